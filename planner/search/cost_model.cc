#include "planner/search/cost_model.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace harmony::planner {
namespace {

double Lerp(double a, double b, double t) { return a + (b - a) * t; }

uint64_t LerpBytes(uint64_t a, uint64_t b, double t) {
  if (t < 0) t = 0;
  return static_cast<uint64_t>(Lerp(static_cast<double>(a), static_cast<double>(b), t) + 0.5);
}

// A vLayer's median over its microbatch sizes of (time beside the other
// devices ÷ time alone), forward or backward; 1 where none was measured
// (a profile from before, or one device). The lower median of an even count.
double BusySlowdown(const proto::VLayerProfile& v, bool backward) {
  std::vector<double> ratios;
  for (const proto::MicrobatchProfile& r : v.by_microbatch()) {
    const double alone = backward ? r.backward_time_s() : r.forward_time_s();
    const double busy = backward ? r.backward_time_busy_s() : r.forward_time_busy_s();
    if (alone > 0 && busy > 0) ratios.push_back(busy / alone);
  }
  if (ratios.empty()) return 1;
  const auto mid = ratios.begin() + (ratios.size() - 1) / 2;
  std::nth_element(ratios.begin(), mid, ratios.end());
  return *mid;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CostModel>> CostModel::Create(
    const proto::ProfileFile& file, double host_link, const NetworkModel& network,
    double host_link_latency) {
  if (network.servers < 1 ||
      (network.servers > 1 && !(network.bytes_per_s > 0 && network.latency_s >= 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a world of ", network.servers, " servers needs a positive network bandwidth and a "
        "latency >= 0; got ", network.bytes_per_s, " B/s and ", network.latency_s, " s"));
  }
  const proto::Profile& p = file.profile();
  if (p.vlayers_size() == 0) {
    return absl::InvalidArgumentError("the profile has no vLayers");
  }
  std::shared_ptr<CostModel> m(new CostModel());
  m->device_memory_ = p.device_memory_bytes();
  m->max_forward_ = static_cast<int>(p.max_forward_microbatch());
  m->max_backward_ = static_cast<int>(p.max_backward_microbatch());
  m->batch_statistics_ = file.model().has_batch_statistics();
  m->peak_with_gradients_ = p.backward_peak_with_gradients();
  // A loss applied outside the model reads the targets on the device of the
  // last backward pack.
  if (file.model().loss() != proto::LOSS_FROM_MODEL) {
    for (const proto::TensorMeta& t : file.model().sample_targets()) {
      if (t.shape_size() > 0 && t.shape(0) > 0) {
        m->target_bytes_per_sample_ += t.bytes() / static_cast<uint64_t>(t.shape(0));
      }
    }
  }
  if (m->max_backward_ < 1) {
    return absl::InvalidArgumentError(
        "the profile has no microbatch size whose backward fits a device");
  }
  const proto::Bandwidths& bw = p.bandwidths();
  m->bandwidths_.host_to_device = bw.host_to_device_bytes_per_s();
  m->bandwidths_.device_to_host = bw.device_to_host_bytes_per_s();
  m->bandwidths_.host_all_devices = bw.host_link_all_devices_bytes_per_s();
  m->bandwidths_.peer = bw.peer_bytes_per_s();
  m->bandwidths_.transfer_latency_s =
      host_link_latency >= 0 ? host_link_latency : std::max(0.0, bw.transfer_latency_s());
  m->network_ = network;
  if (host_link > 0) {
    m->bandwidths_.host_to_device = host_link;
    m->bandwidths_.device_to_host = host_link;
    m->bandwidths_.host_all_devices = host_link;
  }
  if (!(m->bandwidths_.host_to_device > 0) || !(m->bandwidths_.device_to_host > 0)) {
    return absl::InvalidArgumentError(
        "the profile has no host<->device bandwidth (re-profile, or give "
        "--host-link)");
  }
  if (!(m->bandwidths_.host_all_devices > 0)) {
    m->bandwidths_.host_all_devices =
        std::min(m->bandwidths_.host_to_device, m->bandwidths_.device_to_host);
  }
  if (!(m->bandwidths_.peer > 0)) m->bandwidths_.peer = m->bandwidths_.host_to_device;

  for (int k = 0; k < p.vlayers_size(); ++k) {
    const proto::VLayerProfile& v = p.vlayers(k);
    LayerSizes s;
    s.parameter_bytes = v.parameter_bytes();
    s.buffer_bytes = v.buffer_bytes();
    s.gradient_bytes = v.gradient_bytes();
    s.optimizer_state_bytes = v.optimizer_state_bytes();
    s.host_parameter_bytes =
        v.host_parameter_bytes() > 0 ? v.host_parameter_bytes() : v.parameter_bytes();
    // fp32 gradients are the host's size already; bf16 ones half of it.
    s.host_gradient_bytes =
        p.fp32_gradients() || v.parameter_bytes() == 0
            ? v.gradient_bytes()
            : v.gradient_bytes() * s.host_parameter_bytes / v.parameter_bytes();
    s.update_s = v.update_time_s();
    m->sizes_.push_back(s);
    std::vector<Row> rows;
    int last = 0;
    // Devices that share the host's cores compute beside each other: each
    // vLayer's times alone, slowed by its median over the microbatch sizes
    // of (time beside the others ÷ time alone). Each size's two timings
    // take a second or so; a VM's speed swinging during one of them put
    // that size 10-28% off the rest on the 2-core bench VM (one size per
    // profile, a different one each time), which swung the search's
    // microbatch choice; the slowdown itself does not follow the size.
    const bool busy = p.num_devices() > 1;
    const double slow_f = busy ? BusySlowdown(v, /*backward=*/false) : 1;
    const double slow_b = busy ? BusySlowdown(v, /*backward=*/true) : 1;
    if (busy) m->busy_neighbours_ = static_cast<int>(p.num_devices()) - 1;
    for (const proto::MicrobatchProfile& r : v.by_microbatch()) {
      if (static_cast<int>(r.size()) <= last) {
        return absl::InvalidArgumentError(absl::StrCat(
            "vLayer ", k, ": microbatch sizes must increase (", r.size(),
            " after ", last, ")"));
      }
      last = static_cast<int>(r.size());
      Row row;
      row.size = last;
      row.cost.forward_s = r.forward_time_s() * slow_f;
      row.cost.backward_s = r.backward_time_s() * slow_b;
      row.cost.forward_alone_s = r.forward_time_s();
      row.cost.backward_alone_s = r.backward_time_s();
      if (r.forward_chained() > 0) row.cost.forward_chained = r.forward_chained();
      if (r.backward_chained() > 0) row.cost.backward_chained = r.backward_chained();
      const double handoff = r.step_handoff_s();  // Per size: the largest over the vLayers.
      if (handoff > 0) m->step_handoff_[last] = std::max(m->step_handoff_[last], handoff);
      row.cost.forward_peak = r.forward_peak_bytes();
      row.cost.backward_peak = r.backward_peak_bytes();
      row.cost.backward_first_peak = r.backward_first_peak_bytes();
      m->first_peaks_ =
          m->peak_with_gradients_ && (m->first_peaks_ || r.backward_first_peak_bytes() > 0);
      row.cost.saved_bytes = r.saved_bytes();
      m->measured_saved_ = m->measured_saved_ || r.saved_bytes() > 0;
      row.cost.kept_bytes = r.kept_bytes();
      m->measured_kept_ = m->measured_kept_ || r.kept_bytes() > 0;
      row.cost.forward_fits = r.forward_fits();
      row.cost.backward_fits = r.backward_fits();
      rows.push_back(row);
    }
    // Slots from the first row: a batched tensor grows with the microbatch.
    // With several rows, a tensor is batched when its dimension 0 follows
    // the microbatch size in all of them (at size 1 a [1, T, T] mask would
    // look batched).
    std::vector<Slot> in_slots, out_slots;
    if (v.by_microbatch_size() > 0) {
      const proto::MicrobatchProfile& first = v.by_microbatch(0);
      auto slot = [&](const proto::TensorMeta& t, bool is_input, int i) {
        Slot sl;
        sl.floating = t.dtype() == proto::FLOAT32 || t.dtype() == proto::FLOAT64 ||
                      t.dtype() == proto::FLOAT16 || t.dtype() == proto::BFLOAT16;
        bool batched = t.batched() && first.size() > 0;
        for (const proto::MicrobatchProfile& r : v.by_microbatch()) {
          const auto& list = is_input ? r.inputs() : r.outputs();
          if (i >= list.size()) continue;
          const proto::TensorMeta& o = list[i];
          if (o.shape_size() == 0 || o.shape(0) != static_cast<int64_t>(r.size())) {
            batched = false;
          }
        }
        if (batched) {
          sl.per_sample = t.bytes() / first.size();
        } else {
          sl.fixed = t.bytes();
        }
        return sl;
      };
      for (int i = 0; i < first.inputs_size(); ++i) {
        in_slots.push_back(slot(first.inputs(i), true, i));
      }
      for (int i = 0; i < first.outputs_size(); ++i) {
        out_slots.push_back(slot(first.outputs(i), false, i));
      }
    }
    if (!rows.empty()) m->min_ = std::max(m->min_, rows.front().size);
    m->in_slots_.push_back(std::move(in_slots));
    m->out_slots_.push_back(std::move(out_slots));
    if (rows.empty() || !rows.front().cost.backward_fits) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vLayer ", k, " has no profiled microbatch size whose backward fits"));
    }
    m->rows_.push_back(std::move(rows));
  }
  const auto& dec = file.model().decomposition();
  if (dec.vlayers_size() == p.vlayers_size()) {
    for (int k = 0; k < dec.vlayers_size(); ++k) {
      const proto::VLayer& v = dec.vlayers(k);
      m->sizes_[k].updates_buffers = v.updates_buffers();
      m->uses_rng_ = m->uses_rng_ || v.uses_rng();
      std::vector<std::pair<int, int>> in;
      for (const proto::TensorRef& r : v.inputs()) {
        in.emplace_back(r.producer(), static_cast<int>(r.index()));
      }
      m->inputs_.push_back(std::move(in));
    }
  } else {
    // A synthesized profile: its buffers are batch statistics if any are.
    for (LayerSizes& s : m->sizes_) {
      s.updates_buffers = m->batch_statistics_ && s.buffer_bytes > 0;
    }
  }
  m->Precompute();
  return std::shared_ptr<const CostModel>(std::move(m));
}

void CostModel::Precompute() {
  const int n = num_layers();
  table_.resize(static_cast<size_t>(kCached) * n);
  for (std::vector<double>* prefix : {&forward_chained_prefix_, &backward_chained_prefix_,
                                      &forward_alone_chained_prefix_,
                                      &backward_alone_chained_prefix_}) {
    prefix->assign(static_cast<size_t>(kCached) * (n + 1), 0.0);
  }
  for (int u = 1; u <= kCached; ++u) {
    const size_t at = static_cast<size_t>(u - 1) * (n + 1);
    double* fc = &forward_chained_prefix_[at];
    double* bc = &backward_chained_prefix_[at];
    double* fac = &forward_alone_chained_prefix_[at];
    double* bac = &backward_alone_chained_prefix_[at];
    for (int l = 0; l < n; ++l) {
      const LayerCost c = Compute(l, u);
      table_[static_cast<size_t>(u - 1) * n + l] = c;
      fc[l + 1] = fc[l] + c.forward_s * c.forward_chained;
      bc[l + 1] = bc[l] + c.backward_s * c.backward_chained;
      fac[l + 1] = fac[l] + c.forward_alone_s * c.forward_chained;
      bac[l + 1] = bac[l] + c.backward_alone_s * c.backward_chained;
    }
  }
}

LayerCost CostModel::Cost(int layer, int u) const {
  if (u >= 1 && u <= kCached) return table_[static_cast<size_t>(u - 1) * num_layers() + layer];
  return Compute(layer, u);
}

LayerCost CostModel::Compute(int layer, int u) const {
  const std::vector<Row>& rows = rows_[layer];
  // Interpolates each group of fields over the rows where it was measured.
  auto interpolate = [&](auto valid, auto apply) {
    const Row* lo = nullptr;
    const Row* hi = nullptr;
    for (const Row& r : rows) {
      if (!valid(r)) continue;
      if (r.size <= u) lo = &r;
      if (r.size >= u && hi == nullptr) hi = &r;
    }
    if (lo == nullptr && hi == nullptr) return;
    if (lo == nullptr) lo = hi;
    if (hi == nullptr) {
      apply(*lo, *lo, static_cast<double>(u) / lo->size);  // Extrapolate.
      return;
    }
    const double t = hi->size == lo->size
                         ? 0.0
                         : static_cast<double>(u - lo->size) / (hi->size - lo->size);
    apply(*lo, *hi, t);
  };
  LayerCost c;
  for (const Slot& sl : in_slots_[layer]) c.input_bytes += sl.Bytes(u);
  for (const Slot& sl : out_slots_[layer]) c.output_bytes += sl.Bytes(u);
  interpolate([](const Row& r) { return r.cost.forward_fits; },
              [&](const Row& a, const Row& b, double t) {
                if (&a == &b && t != 0.0) {
                  c.forward_s = a.cost.forward_s * t;
                  c.forward_alone_s = a.cost.forward_alone_s * t;
                  c.forward_chained = a.cost.forward_chained;
                  c.forward_peak = static_cast<uint64_t>(a.cost.forward_peak * t);
                  return;
                }
                c.forward_chained = Lerp(a.cost.forward_chained, b.cost.forward_chained, t);
                c.forward_s = Lerp(a.cost.forward_s, b.cost.forward_s, t);
                c.forward_alone_s = Lerp(a.cost.forward_alone_s, b.cost.forward_alone_s, t);
                c.forward_peak = LerpBytes(a.cost.forward_peak, b.cost.forward_peak, t);
              });
  interpolate([](const Row& r) { return r.cost.backward_fits; },
              [&](const Row& a, const Row& b, double t) {
                if (&a == &b && t != 0.0) {
                  c.backward_s = a.cost.backward_s * t;
                  c.backward_alone_s = a.cost.backward_alone_s * t;
                  c.backward_chained = a.cost.backward_chained;
                  c.backward_peak = static_cast<uint64_t>(a.cost.backward_peak * t);
                  c.backward_first_peak = static_cast<uint64_t>(a.cost.backward_first_peak * t);
                  c.saved_bytes = static_cast<uint64_t>(a.cost.saved_bytes * t);
                  c.kept_bytes = static_cast<uint64_t>(a.cost.kept_bytes * t);
                  return;
                }
                c.backward_s = Lerp(a.cost.backward_s, b.cost.backward_s, t);
                c.backward_chained = Lerp(a.cost.backward_chained, b.cost.backward_chained, t);
                c.backward_alone_s = Lerp(a.cost.backward_alone_s, b.cost.backward_alone_s, t);
                c.backward_peak = LerpBytes(a.cost.backward_peak, b.cost.backward_peak, t);
                c.backward_first_peak =
                    LerpBytes(a.cost.backward_first_peak, b.cost.backward_first_peak, t);
                c.saved_bytes = LerpBytes(a.cost.saved_bytes, b.cost.saved_bytes, t);
                c.kept_bytes = LerpBytes(a.cost.kept_bytes, b.cost.kept_bytes, t);
              });
  // Fits up to the largest size measured to fit with nothing failing below.
  auto fits_up_to = [&](bool backward) {
    int largest = 0;
    for (const Row& r : rows) {
      if (!(backward ? r.cost.backward_fits : r.cost.forward_fits)) break;
      largest = r.size;
    }
    return largest;
  };
  c.forward_fits = u <= fits_up_to(false);
  c.backward_fits = u <= fits_up_to(true);
  return c;
}

uint64_t CostModel::WeightBytes(int begin, int end) const {
  uint64_t t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].weight_bytes();
  return t;
}

uint64_t CostModel::UpdatedBufferBytes(int begin, int end) const {
  uint64_t total = 0;
  for (int l = begin; l < end; ++l) {
    if (sizes_[l].updates_buffers) total += sizes_[l].buffer_bytes;
  }
  return total;
}

uint64_t CostModel::BufferBytes(int begin, int end) const {
  uint64_t t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].buffer_bytes;
  return t;
}

uint64_t CostModel::GradientBytes(int begin, int end) const {
  uint64_t t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].gradient_bytes;
  return t;
}

uint64_t CostModel::OptimizerStateBytes(int begin, int end) const {
  uint64_t t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].optimizer_state_bytes;
  return t;
}

uint64_t CostModel::HostWeightBytes(int begin, int end) const {
  uint64_t t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].host_parameter_bytes + sizes_[l].buffer_bytes;
  return t;
}

uint64_t CostModel::HostGradientBytes(int begin, int end) const {
  uint64_t t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].host_gradient_bytes;
  return t;
}

// Servers all-reduce the host's fp32 gradients.
uint64_t CostModel::ReduceBytesPerServer(int begin, int end) const {
  const int s = network_.servers;
  if (s <= 1) return 0;
  return HostGradientBytes(begin, end) * 2 * static_cast<uint64_t>(s - 1) / static_cast<uint64_t>(s);
}

double CostModel::StepHandoffSeconds(int microbatch) const {
  auto hi = step_handoff_.lower_bound(microbatch);  // Sizes that measured it (> 0).
  if (hi == step_handoff_.end()) return hi == step_handoff_.begin() ? 0 : std::prev(hi)->second;
  if (hi->first == microbatch || hi == step_handoff_.begin()) return hi->second;
  const auto lo = std::prev(hi);
  return Lerp(lo->second, hi->second, (microbatch - lo->first) * 1.0 / (hi->first - lo->first));
}

double CostModel::ReduceSeconds(int begin, int end) const {
  const int s = network_.servers;
  if (s <= 1 || GradientBytes(begin, end) == 0) return 0;
  return static_cast<double>(ReduceBytesPerServer(begin, end)) / network_.bytes_per_s +
         2.0 * (s - 1) * network_.latency_s;
}

double CostModel::IterationSyncSeconds() const {
  const int s = network_.servers;
  if (s <= 1) return 0;
  // The loss, the stop and checkpoint decisions, and the buffers.
  return 3 * 2.0 * (s - 1) * network_.latency_s +
         static_cast<double>(BufferBytes(0, num_layers())) / network_.bytes_per_s;
}

double CostModel::UpdateSeconds(int begin, int end) const {
  double t = 0;
  for (int l = begin; l < end; ++l) t += sizes_[l].update_s;
  return t;
}

double CostModel::PackSeconds(bool backward, int begin, int end, int u, bool alone) const {
  if (end <= begin) return 0;
  auto own = [&](const LayerCost& c) {
    return backward ? (alone ? c.backward_alone_s : c.backward_s)
                    : (alone ? c.forward_alone_s : c.forward_s);
  };
  const double first = own(Cost(begin, u));
  if (u >= 1 && u <= kCached) {
    const std::vector<double>& chained =
        backward ? (alone ? backward_alone_chained_prefix_ : backward_chained_prefix_)
                 : (alone ? forward_alone_chained_prefix_ : forward_chained_prefix_);
    const size_t at = static_cast<size_t>(u - 1) * (num_layers() + 1);
    return first + chained[at + end] - chained[at + begin + 1];
  }
  double t = first;
  for (int l = begin + 1; l < end; ++l) {
    const LayerCost c = Cost(l, u);
    t += own(c) * (backward ? c.backward_chained : c.forward_chained);
  }
  return t;
}

double CostModel::ForwardSeconds(int begin, int end, int u, bool alone) const {
  return PackSeconds(/*backward=*/false, begin, end, u, alone);
}

double CostModel::BackwardSeconds(int begin, int end, int u, bool alone) const {
  return PackSeconds(/*backward=*/true, begin, end, u, alone);
}

double CostModel::LeastBackwardSeconds(int layer, int u) const {
  const LayerCost c = Cost(layer, u);
  return c.backward_s * c.backward_chained;
}

double CostModel::KeptBackwardSeconds(int begin, int end, int u, bool alone) const {
  double t = 0;
  for (int l = begin; l < end; ++l) {
    const LayerCost c = Cost(l, u);
    const double f = alone ? c.forward_alone_s : c.forward_s;
    const double b = alone ? c.backward_alone_s : c.backward_s;
    // Timing noise on a small vLayer can put its forward above its
    // backward; a backward without recompute still takes half (its two
    // gradient products to the recompute's one forward product).
    t += std::max(b / 2, b - f);
  }
  return t;
}

}  // namespace harmony::planner
