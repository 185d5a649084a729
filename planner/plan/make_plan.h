// From a profile to the plan harmony-exec runs: the one pipeline behind
// `harmony-plan MODEL.pt ...` and the benchmarks (tests/bench). It builds
// the cost model, searches the schedule (or plans a baseline), validates the
// task graph, plans the on-demand baseline at the same microbatch size for
// comparison, and builds the plan file.
//
// Thread-safety: stateless; `progress` is called on the calling thread.

#ifndef HARMONY_PLANNER_PLAN_MAKE_PLAN_H_
#define HARMONY_PLANNER_PLAN_MAKE_PLAN_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "planner/search/cost_model.h"
#include "planner/search/search.h"
#include "planner/sim/simulator.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

struct MakePlanOptions {
  int num_devices = 1;
  // Each device's memory, bytes; the search keeps `memory_reserve` of it
  // free for what the profile does not see (allocator slack, buffers).
  uint64_t device_memory = 0;
  double memory_reserve = 0.1;
  int minibatch = 0;
  std::optional<Mode> mode;  // Empty: both.
  Schedule schedule = Schedule::kHarmony;
  int microbatch = 0;        // > 0 pins it; 0: a baseline takes its fastest that fits.
  Packing backward_packs;    // Non-empty pins the backward packing.
  double time_tolerance = 0.05;
  // vDP: activations between a device's packs kept on it (true), sent
  // through the host (false), or both tried (empty).
  std::optional<bool> local_activations;
  // vDP on several devices: parameters copied from device 0 instead of
  // swapped in by every device (true), not (false), or by the bandwidths
  // (empty; SearchOptions::peer_weights).
  std::optional<bool> peer_weights;
  bool any_fit = false;                            // SearchOptions::any_fit.
  KeepActivations keep = KeepActivations::kAuto;  // SearchOptions::keep.
  int waves = 0;                                   // SearchOptions::waves.
  // > 0: plan for this host link (bytes/s per direction) instead of the
  // profile's measurement.
  double host_link = 0;
  // >= 0: plan for this fixed cost per host transfer (seconds) instead of
  // the profile's measurement (an emulated link's: its sleep's overshoot).
  double host_link_latency = -1;
  // The world of servers it is for (one by default).
  NetworkModel network;
  std::function<void(const std::string&)> progress;
};

struct MadePlan {
  proto::Plan plan;
  SearchResult result;
  std::optional<SimResult> ondemand;  // The comparison baseline, when it plans.
  std::shared_ptr<const CostModel> cost;
  double search_seconds = 0;
};

// InvalidArgument for bad options (a reserve outside [0, 0.9), a minibatch
// below 1); the search's errors otherwise. A baseline that does not fit the
// devices is returned all the same (result.sim.fits says so).
absl::StatusOr<MadePlan> MakePlan(const proto::ProfileFile& profile,
                                  const MakePlanOptions& options);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PLAN_MAKE_PLAN_H_
