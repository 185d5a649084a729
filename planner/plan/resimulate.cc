#include "planner/plan/resimulate.h"

#include <cmath>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/plan/plan_builder.h"
#include "planner/search/cost_model.h"

namespace harmony::planner {

namespace {

// The six device compute times of a row, in a fixed order.
constexpr double (proto::MicrobatchProfile::*kGet[])() const = {
    &proto::MicrobatchProfile::forward_time_s,      &proto::MicrobatchProfile::backward_time_s,
    &proto::MicrobatchProfile::forward_time_busy_s, &proto::MicrobatchProfile::backward_time_busy_s,
    &proto::MicrobatchProfile::forward_time_one_s,  &proto::MicrobatchProfile::backward_time_one_s};
constexpr void (proto::MicrobatchProfile::*kSet[])(double) = {
    &proto::MicrobatchProfile::set_forward_time_s,
    &proto::MicrobatchProfile::set_backward_time_s,
    &proto::MicrobatchProfile::set_forward_time_busy_s,
    &proto::MicrobatchProfile::set_backward_time_busy_s,
    &proto::MicrobatchProfile::set_forward_time_one_s,
    &proto::MicrobatchProfile::set_backward_time_one_s};

const proto::MicrobatchProfile* RowOfSize(const proto::VLayerProfile& v, uint32_t size) {
  for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
    if (m.size() == size) return &m;
  }
  return nullptr;
}

// A row's chained factors (proto forward_chained), 1 where not measured.
double ForwardChained(const proto::MicrobatchProfile& m) {
  return m.forward_chained() > 0 ? m.forward_chained() : 1.0;
}
double BackwardChained(const proto::MicrobatchProfile& m) {
  return m.backward_chained() > 0 ? m.backward_chained() : 1.0;
}

// The times the simulator uses most (alone and beside busy devices), summed.
double Weight(const proto::MicrobatchProfile& m) {
  return m.forward_time_s() + m.backward_time_s() + m.forward_time_busy_s() +
         m.backward_time_busy_s();
}

}  // namespace

void ScaleComputeTimes(proto::ProfileFile& profile, double scale) {
  for (proto::VLayerProfile& v : *profile.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& m : *v.mutable_by_microbatch()) {
      for (size_t f = 0; f < std::size(kGet); ++f) (m.*kSet[f])((m.*kGet[f])() * scale);
    }
  }
}

void AverageComputeTimes(proto::ProfileFile& profile, const proto::ProfileFile& other) {
  auto* vlayers = profile.mutable_profile()->mutable_vlayers();
  for (int k = 0; k < vlayers->size() && k < other.profile().vlayers_size(); ++k) {
    for (proto::MicrobatchProfile& m : *(*vlayers)[k].mutable_by_microbatch()) {
      const proto::MicrobatchProfile* o = RowOfSize(other.profile().vlayers(k), m.size());
      if (o == nullptr) continue;
      for (size_t f = 0; f < std::size(kGet); ++f) {
        (m.*kSet[f])(((m.*kGet[f])() + ((*o).*kGet[f])()) / 2);
      }
      // Factors, not times: the mean of the two where either measured them.
      if (m.forward_chained() > 0 || o->forward_chained() > 0) {
        m.set_forward_chained((ForwardChained(m) + ForwardChained(*o)) / 2);
      }
      if (m.backward_chained() > 0 || o->backward_chained() > 0) {
        m.set_backward_chained((BackwardChained(m) + BackwardChained(*o)) / 2);
      }
      // The step hand-off: the mean where both measured it, else the one.
      if (m.step_handoff_s() > 0 && o->step_handoff_s() > 0) {
        m.set_step_handoff_s((m.step_handoff_s() + o->step_handoff_s()) / 2);
      } else if (o->step_handoff_s() > 0) {
        m.set_step_handoff_s(o->step_handoff_s());
      }
    }
  }
}


absl::StatusOr<ReplacedTimes> ReplaceComputeTimes(proto::ProfileFile& profile,
                                                  const proto::ProfileFile& times) {
  const proto::ModelIdentity& a = profile.model();
  const proto::ModelIdentity& b = times.model();
  if (a.sha256() != b.sha256()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the times come from a profile of another model (", b.file_name(), ", SHA-256 ",
        b.sha256().substr(0, 12), "...; the plan's is ", a.file_name(), ", ",
        a.sha256().substr(0, 12), "...): profile the plan's model"));
  }
  const int n = profile.profile().vlayers_size();
  if (times.profile().vlayers_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the times' profile has ", times.profile().vlayers_size(), " vLayers and the plan's ",
        n, ": profile again with the plan's --granularity (",
        a.decomposition().granularity(), ")"));
  }
  if (times.profile().precision() != profile.profile().precision()) {
    return absl::InvalidArgumentError(
        "the times' profile was taken in another precision than the plan's: profile again "
        "with the plan's --precision");
  }
  ReplacedTimes out;
  double old_sum = 0, new_sum = 0;
  std::vector<double> ratio(n, 0);
  for (int k = 0; k < n; ++k) {
    double o = 0, w = 0;
    for (const proto::MicrobatchProfile& m : profile.profile().vlayers(k).by_microbatch()) {
      const proto::MicrobatchProfile* t = RowOfSize(times.profile().vlayers(k), m.size());
      if (t == nullptr) continue;
      o += Weight(m);
      w += Weight(*t);
    }
    if (o > 0) ratio[k] = w / o;
    old_sum += o;
    new_sum += w;
  }
  if (!(old_sum > 0)) {
    return absl::InvalidArgumentError(
        "the times' profile has no microbatch size the plan's profile has: profile the sizes "
        "the plan uses (harmony-plan inspect; harmony-plan profile --microbatches)");
  }
  out.ratio = new_sum / old_sum;
  for (int k = 0; k < n; ++k) {
    const double scale = ratio[k] > 0 ? ratio[k] : out.ratio;
    for (proto::MicrobatchProfile& m :
         *profile.mutable_profile()->mutable_vlayers(k)->mutable_by_microbatch()) {
      const proto::MicrobatchProfile* t = RowOfSize(times.profile().vlayers(k), m.size());
      for (size_t f = 0; f < std::size(kGet); ++f) {
        (m.*kSet[f])(t != nullptr ? ((*t).*kGet[f])() : (m.*kGet[f])() * scale);
      }
      if (t != nullptr) {  // A size it lacks keeps its own factors.
        m.set_forward_chained(t->forward_chained());
        m.set_backward_chained(t->backward_chained());
        m.set_step_handoff_s(t->step_handoff_s());
      }
      ++(t != nullptr ? out.rows_taken : out.rows_scaled);
    }
  }
  return out;
}

absl::StatusOr<Resimulated> ResimulatePlan(const proto::Plan& plan,
                                           const ResimulateOptions& options) {
  if (!(options.compute_scale > 0) || !std::isfinite(options.compute_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute scale ", options.compute_scale, ": a positive factor, e.g. 1.2 for devices "
        "that compute 1.2x slower than profiled"));
  }
  const proto::Configuration& c = plan.config();
  NetworkModel network;  // The world the plan is for.
  if (c.servers() > 1) {
    network.servers = static_cast<int>(c.servers());
    network.bytes_per_s = c.network_bytes_per_s();
    network.latency_s = c.network_latency_s();
    network.shard_optimizer_state = c.shard_optimizer_state();
  }
  double latency = -1;
  if (options.host_link_latency) {
    latency = *options.host_link_latency;
  } else if (c.has_host_link_latency_s()) {
    latency = c.host_link_latency_s();
  }
  proto::ProfileFile profile = ProfileOfPlan(plan);
  ReplacedTimes replaced;
  if (options.times_from != nullptr) {
    absl::StatusOr<ReplacedTimes> r = ReplaceComputeTimes(profile, *options.times_from);
    if (!r.ok()) return r.status();
    replaced = *r;
  }
  if (options.compute_scale != 1) ScaleComputeTimes(profile, options.compute_scale);
  auto cost = CostModel::Create(
      profile, options.host_link > 0 ? options.host_link : c.host_link_bytes_per_s(), network,
      latency);
  if (!cost.ok()) return cost.status();
  auto graph = TaskGraphFromPlan(plan);
  if (!graph.ok()) return graph.status();
  if (absl::Status valid = ValidateTaskGraph(**cost, *graph); !valid.ok()) return valid;
  auto sim = Simulate(**cost, *graph, options.keep_events);
  if (!sim.ok()) return sim.status();
  const double compute = sim->device_compute_s();
  return Resimulated{*std::move(graph), *std::move(sim), compute, replaced};
}

}  // namespace harmony::planner
