// SynthesizeProfile (profiler.h): a profile for a model too large to
// instantiate, scaled from a measured one.

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/profile/profiler.h"

namespace harmony::planner {

using machine::Median;

namespace {

// Time per sample at microbatch size `u` (any positive value), linear
// between the measured sizes that fit, the nearest one outside them.
double PerSampleTime(const proto::VLayerProfile& v, double u, bool backward) {
  std::vector<std::pair<double, double>> points;  // (size, seconds per sample)
  for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
    if (!(backward ? m.backward_fits() : m.forward_fits()) || m.size() == 0) continue;
    points.emplace_back(m.size(),
                        (backward ? m.backward_time_s() : m.forward_time_s()) / m.size());
  }
  if (points.empty()) return 0.0;
  if (u <= points.front().first) return points.front().second;
  for (size_t i = 1; i < points.size(); ++i) {
    if (u <= points[i].first) {
      const auto& [a, ta] = points[i - 1];
      const auto& [b, tb] = points[i];
      return ta + (tb - ta) * (u - a) / (b - a);
    }
  }
  return points.back().second;
}

}  // namespace

absl::StatusOr<proto::ProfileFile> SynthesizeProfile(const proto::ProfileFile& base,
                                                     int block, int block_count,
                                                     int num_blocks,
                                                     double width_scale,
                                                     double seq_scale,
                                                     double compute_scale) {
  const int n = base.profile().vlayers_size();
  if (block < 0 || block_count < 1 || block + block_count > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the block vLayers [", block, ", ", block + block_count,
        ") are not within the profile's ", n, " vLayers"));
  }
  if (num_blocks < 1 || !(width_scale > 0) || !(seq_scale > 0) || !(compute_scale > 0)) {
    return absl::InvalidArgumentError(
        "the block count and the width and sequence scales must be positive");
  }
  const double s = width_scale;
  const double q = seq_scale;
  auto scale_meta = [&](proto::TensorMeta* m, double f) {
    m->set_bytes(static_cast<uint64_t>(m->bytes() * f));
    if (m->shape_size() > 0 && f != 1.0) {
      m->set_shape(m->shape_size() - 1,
                   static_cast<int64_t>(std::llround(m->shape(m->shape_size() - 1) * f)));
    }
  };
  // Weights by `w`, compute by `w` x q, activations by `a` x q.
  const double k = compute_scale;
  auto scaled = [&](const proto::VLayerProfile& in, double w, double a_width) {
    const double a = a_width * q;
    proto::VLayerProfile v = in;
    v.set_parameter_bytes(static_cast<uint64_t>(in.parameter_bytes() * w));
    v.set_gradient_bytes(static_cast<uint64_t>(in.gradient_bytes() * w));
    v.set_host_parameter_bytes(static_cast<uint64_t>(in.host_parameter_bytes() * w));
    v.set_optimizer_state_bytes(static_cast<uint64_t>(in.optimizer_state_bytes() * w));
    v.set_buffer_bytes(static_cast<uint64_t>(in.buffer_bytes() * a));
    v.set_update_time_s(in.update_time_s() * w);  // The host's CPU: unscaled.
    for (proto::MicrobatchProfile& m : *v.mutable_by_microbatch()) {
      // A sample q times as long is as many tokens as q measured samples:
      // a microbatch of u runs at the per-sample efficiency measured at
      // u x q (the largest measured size past it).
      const double tokens = m.size() * q;
      // Beside busy neighbours: the measured slowdown of this row.
      const double fwd_busy = m.forward_time_s() > 0 ? m.forward_time_busy_s() / m.forward_time_s() : 0;
      const double bwd_busy = m.backward_time_s() > 0 ? m.backward_time_busy_s() / m.backward_time_s() : 0;
      m.set_forward_time_s(m.size() * PerSampleTime(in, tokens, false) * w * q * k);
      m.set_backward_time_s(m.size() * PerSampleTime(in, tokens, true) * w * q * k);
      m.set_forward_time_busy_s(m.forward_time_s() * fwd_busy);
      m.set_backward_time_busy_s(m.backward_time_s() * bwd_busy);
      // Peaks: weights (and, in backward, their gradients) scale with the
      // weights, the rest with the activations.
      auto peak = [&](uint64_t p, double weights) {
        const double rest = std::max(0.0, static_cast<double>(p) - weights);
        return static_cast<uint64_t>(weights * w + rest * a);
      };
      m.set_forward_peak_bytes(peak(m.forward_peak_bytes(), in.parameter_bytes()));
      m.set_backward_peak_bytes(peak(m.backward_peak_bytes(),
                                     in.parameter_bytes() + in.gradient_bytes()));
      if (m.backward_first_peak_bytes() > 0) {
        m.set_backward_first_peak_bytes(
            peak(m.backward_first_peak_bytes(), in.parameter_bytes() + in.gradient_bytes()));
      }
      m.set_saved_bytes(static_cast<uint64_t>(m.saved_bytes() * a));
      m.set_kept_bytes(static_cast<uint64_t>(m.kept_bytes() * a));
      for (auto& t : *m.mutable_inputs()) scale_meta(&t, a);
      for (auto& t : *m.mutable_outputs()) scale_meta(&t, a);
    }
    return v;
  };
  proto::ProfileFile out = base;
  proto::Profile* p = out.mutable_profile();
  p->clear_vlayers();
  p->set_synthesized(true);
  std::vector<proto::VLayerProfile> layers;
  for (int k = 0; k < block; ++k) layers.push_back(scaled(base.profile().vlayers(k), s, s));
  // The block's times: the median over the measured blocks at each size,
  // so one noisy measurement does not repeat num_blocks times.
  proto::VLayerProfile typical = base.profile().vlayers(block);
  for (int i = 0; i < typical.by_microbatch_size(); ++i) {
    proto::MicrobatchProfile* row = typical.mutable_by_microbatch(i);
    std::vector<double> fwd, bwd, fwd_busy, bwd_busy;
    for (int k = block; k < block + block_count; ++k) {
      const proto::VLayerProfile& v = base.profile().vlayers(k);
      if (i < v.by_microbatch_size() && v.by_microbatch(i).size() == row->size()) {
        fwd.push_back(v.by_microbatch(i).forward_time_s());
        bwd.push_back(v.by_microbatch(i).backward_time_s());
        fwd_busy.push_back(v.by_microbatch(i).forward_time_busy_s());
        bwd_busy.push_back(v.by_microbatch(i).backward_time_busy_s());
      }
    }
    row->set_forward_time_s(Median(fwd));
    row->set_backward_time_s(Median(bwd));
    row->set_forward_time_busy_s(Median(fwd_busy));
    row->set_backward_time_busy_s(Median(bwd_busy));
  }
  for (int r = 0; r < num_blocks; ++r) {
    layers.push_back(scaled(typical, s * s, s));
  }
  for (int k = block + block_count; k < n; ++k) {
    layers.push_back(scaled(base.profile().vlayers(k), s, s));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].set_vlayer(static_cast<uint32_t>(i));
    *p->add_vlayers() = layers[i];
  }
  // A synthesized model has no file and cannot be executed, only planned.
  proto::ModelIdentity* model = out.mutable_model();
  model->set_sha256("");
  model->set_file_bytes(0);
  model->set_file_name(absl::StrCat(base.model().file_name(), " (synthesized: ",
                                    num_blocks, " blocks, width x", s,
                                    q != 1.0 ? absl::StrCat(", sequence x", q) : "",
                                    k != 1.0 ? absl::StrCat(", compute x", k) : "",
                                    ")"));
  proto::Decomposition* dec = model->mutable_decomposition();
  dec->clear_cut_points();
  dec->clear_vlayers();
  dec->set_vlayer_count(static_cast<uint32_t>(layers.size()));
  return out;
}

}  // namespace harmony::planner
