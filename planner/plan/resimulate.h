// A saved plan simulated again from the profile it carries (harmony-plan
// simulate, the benchmarks): on the link it was made for or another, and at
// another compute speed than profiled ("what if the devices computed 1.2x
// slower than when the model was profiled").
//
// Thread-safety: stateless functions.

#ifndef HARMONY_PLANNER_PLAN_RESIMULATE_H_
#define HARMONY_PLANNER_PLAN_RESIMULATE_H_

#include <optional>

#include "absl/status/statusor.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

struct ResimulateOptions {
  // > 0: this host link (bytes/s per direction) instead of the plan's (its
  // --host-link, else the profile's measurement).
  double host_link = 0;
  // A fixed cost per host transfer (seconds) instead of the plan's.
  std::optional<double> host_link_latency;
  // Every device compute time of the profile (forward, backward, alone and
  // beside busy devices) times this; the CPU optimizer's update times stay.
  double compute_scale = 1;
  bool keep_events = false;  // For a Chrome trace (ChromeTrace).
};

struct Resimulated {
  TaskGraph graph;
  SimResult sim;
};

// InvalidArgument for a compute_scale that is not positive and finite, or a
// plan whose task graph does not validate against its own profile (the error
// names what).
absl::StatusOr<Resimulated> ResimulatePlan(const proto::Plan& plan,
                                           const ResimulateOptions& options);

// Multiplies every device compute time in `profile` by `scale`.
void ScaleComputeTimes(proto::ProfileFile& profile, double scale);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PLAN_RESIMULATE_H_
