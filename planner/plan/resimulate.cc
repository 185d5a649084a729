#include "planner/plan/resimulate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "planner/plan/plan_builder.h"
#include "planner/search/cost_model.h"

namespace harmony::planner {

void ScaleComputeTimes(proto::ProfileFile& profile, double scale) {
  for (proto::VLayerProfile& v : *profile.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& m : *v.mutable_by_microbatch()) {
      m.set_forward_time_s(m.forward_time_s() * scale);
      m.set_backward_time_s(m.backward_time_s() * scale);
      m.set_forward_time_busy_s(m.forward_time_busy_s() * scale);
      m.set_backward_time_busy_s(m.backward_time_busy_s() * scale);
      m.set_forward_time_one_s(m.forward_time_one_s() * scale);
      m.set_backward_time_one_s(m.backward_time_one_s() * scale);
    }
  }
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
  return Resimulated{*std::move(graph), *std::move(sim)};
}

}  // namespace harmony::planner
