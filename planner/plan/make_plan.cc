#include "planner/plan/make_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/units.h"
#include "planner/plan/plan_builder.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {

absl::StatusOr<MadePlan> MakePlan(const proto::ProfileFile& profile,
                                  const MakePlanOptions& o) {
  if (!(o.memory_reserve >= 0 && o.memory_reserve < 0.9)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory reserve ", o.memory_reserve, ": expected a fraction in [0, 0.9)"));
  }
  if (o.minibatch < 1) {
    return absl::InvalidArgumentError("the minibatch must be at least 1 sample");
  }
  MadePlan made;
  absl::StatusOr<std::shared_ptr<const CostModel>> cost =
      CostModel::Create(profile, o.host_link, o.network, o.host_link_latency);
  if (!cost.ok()) return cost.status();
  made.cost = *std::move(cost);
  if (o.keep == KeepActivations::kAll && !made.cost->measured_kept() &&
      made.cost->num_layers() > 1) {
    return absl::FailedPreconditionError(
        "--keep-activations all: the profile does not say what keeping activations moves (it "
        "was made before kept bytes were measured, or synthesized): profile the model again "
        "with harmony-plan profile");
  }

  SearchOptions search;
  search.num_devices = o.num_devices;
  search.device_memory =
      static_cast<uint64_t>(static_cast<double>(o.device_memory) * (1 - o.memory_reserve));
  search.minibatch = o.minibatch;
  search.mode = o.mode;
  search.schedule = o.schedule;
  search.microbatch = o.microbatch;
  search.backward_packs = o.backward_packs;
  search.time_tolerance = o.time_tolerance;
  search.local_activations = o.local_activations;
  search.peer_weights = o.peer_weights;
  search.keep = o.keep;
  search.waves = o.waves;
  search.any_fit = o.any_fit;
  search.progress = o.progress;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SearchResult> found =
      o.schedule == Schedule::kHarmony
          ? SearchSchedule(*made.cost, search)
          : PlanBaseline(*made.cost, search, std::max(1, o.microbatch));
  // A baseline without a pinned microbatch runs at its own best: the
  // fastest simulated power of two that fits (microbatch 1 if none does).
  if (o.schedule != Schedule::kHarmony && o.microbatch <= 0 && found.ok()) {
    const int largest = std::min(o.minibatch, made.cost->max_backward_microbatch());
    for (int u = 2; u <= largest; u *= 2) {
      absl::StatusOr<SearchResult> other = PlanBaseline(*made.cost, search, u);
      if (!other.ok() || !other->sim.fits) continue;
      if (!found->sim.fits || other->sim.iteration_s < found->sim.iteration_s) {
        found = std::move(other);
      }
    }
  }
  if (!found.ok()) {
    if (absl::IsResourceExhausted(found.status()) && o.memory_reserve > 0) {
      return absl::Status(found.status().code(),
                          absl::StrCat(found.status().message(), "; that is ",
                                       common::FormatBytes(o.device_memory), " less the ",
                                       std::lround(o.memory_reserve * 100),
                                       "% memory reserve (--memory-reserve)"));
    }
    return found.status();
  }
  made.result = *std::move(found);
  made.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The plan is for devices of the full size; the search kept the reserve.
  made.result.graph.config.device_memory = o.device_memory;
  absl::Status valid = ValidateTaskGraph(*made.cost, made.result.graph);
  if (!valid.ok()) return absl::InternalError(absl::StrCat("bug: ", valid.message()));
  // The on-demand baseline at the same microbatch size, for comparison.
  SearchOptions baseline = search;
  baseline.schedule = Schedule::kOndemand;
  absl::StatusOr<SearchResult> ondemand = PlanBaseline(
      *made.cost, baseline, made.result.graph.config.backward_microbatch);
  if (ondemand.ok()) made.ondemand = std::move(ondemand->sim);
  made.plan = BuildPlan(profile, made.result.graph, made.result.sim, made.ondemand);
  {
    // The iteration with gradient clipping, each way it can go.
    proto::Estimates& e = *made.plan.mutable_estimates();
    for (ClipSim clip : {ClipSim::kSpeculate, ClipSim::kSpeculateFires, ClipSim::kHold}) {
      absl::StatusOr<SimResult> sim = Simulate(*made.cost, made.result.graph, false, clip);
      if (!sim.ok()) return sim.status();
      const double s = sim->iteration_s;
      if (clip == ClipSim::kSpeculate) e.set_clip_speculate_s(s);
      if (clip == ClipSim::kSpeculateFires) e.set_clip_speculate_fires_s(s);
      if (clip == ClipSim::kHold) e.set_clip_hold_s(s);
    }
  }
  proto::Configuration& c = *made.plan.mutable_config();
  if (o.host_link > 0) c.set_host_link_bytes_per_s(o.host_link);
  if (o.host_link_latency >= 0) c.set_host_link_latency_s(o.host_link_latency);
  if (o.network.servers > 1) {
    c.set_servers(static_cast<uint32_t>(o.network.servers));
    c.set_network_bytes_per_s(o.network.bytes_per_s);
    c.set_network_latency_s(o.network.latency_s);
    c.set_shard_optimizer_state(o.network.shard_optimizer_state);
    made.plan.mutable_estimates()->set_network_bytes_per_server(made.result.sim.network_bytes);
  }
  return made;
}

}  // namespace harmony::planner
