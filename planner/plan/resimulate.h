// A saved plan simulated again from the profile it carries (harmony-plan
// simulate, the benchmarks): on the link it was made for or another, at
// another compute speed than profiled ("what if the devices computed 1.2x
// slower than when the model was profiled"), or with its vLayers' times
// from another profile of the same model (taken again right before a run,
// on a machine whose speed drifts: harmony-plan profile --microbatches).
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
  // Not null: the device compute times of this profile of the same model
  // (ReplaceComputeTimes) instead of the plan's, before compute_scale.
  const proto::ProfileFile* times_from = nullptr;
  bool keep_events = false;  // For a Chrome trace (ChromeTrace).
};

// What ReplaceComputeTimes did: rows (a vLayer at a microbatch size) whose
// times came from the other profile, rows scaled instead, and the other
// profile's compute over the first's on the rows both have.
struct ReplacedTimes {
  int rows_taken = 0;
  int rows_scaled = 0;
  double ratio = 1;
};

struct Resimulated {
  TaskGraph graph;
  SimResult sim;
  // The simulated devices' compute in one iteration, summed over the
  // devices (the recompute included), at these times: as the plan's
  // estimates().compute_s, what harmony-exec's "device compute per
  // iteration ... Nx the plan's" and the bench measure against.
  double device_compute_s = 0;
  ReplacedTimes replaced;  // With times_from.
};

// InvalidArgument for a compute_scale that is not positive and finite, times
// from a profile that ReplaceComputeTimes refuses, or a plan whose task graph
// does not validate against its own profile (the error names what).
absl::StatusOr<Resimulated> ResimulatePlan(const proto::Plan& plan,
                                           const ResimulateOptions& options);

// Multiplies every device compute time in `profile` by `scale`.
void ScaleComputeTimes(proto::ProfileFile& profile, double scale);

// Every device compute time in `profile` the mean of its and `other`'s at the
// same vLayer and microbatch size (two profiles taken around a run), and
// so their chained factors and step hand-offs; rows `other` lacks stay.
void AverageComputeTimes(proto::ProfileFile& profile, const proto::ProfileFile& other);

// Every device compute time in `profile` (forward, backward; alone, beside
// busy devices, one vLayer run over and over), its chained factors
// (proto forward_chained) and step hand-off taken from `times`, a profile
// of the same model (its SHA-256), decomposition (as many vLayers) and
// precision. A row `times` lacks (a size it did not measure) is scaled by
// its vLayer's ratio over the sizes both have (the whole model's where none)
// and keeps its factors and hand-off.
// Sizes, peaks and update times stay. InvalidArgument naming what differs,
// or when the two share no row.
absl::StatusOr<ReplacedTimes> ReplaceComputeTimes(proto::ProfileFile& profile,
                                                  const proto::ProfileFile& times);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PLAN_RESIMULATE_H_
