// Pack construction: splitting a vLayer range into contiguous packs that
// each fit a device's memory budget while they run (CostModel's
// ForwardMemory / BackwardMemory at the given microbatch size).
//
//   Greedy          fills each pack as far as it fits, front to back.
//   BalancedMemory  the fewest packs of about equal memory that all fit.
//   BalancedTime    as many packs as BalancedMemory, of about equal time.
//   Optimal         a dynamic program over every cut point: minimises the
//                   largest pack cost then the sum (or, with minimize_sum,
//                   the sum then the largest), where a pack costs its
//                   compute over all microbatches, or its weight swap-in if
//                   that is longer (it is prefetched during the previous
//                   pack), plus moving its input and output activations.
//
// All return ResourceExhausted naming the vLayer, what it needs and the
// budget when a single vLayer does not fit.
//
// Thread-safety: stateless functions over an immutable CostModel.

#ifndef HARMONY_PLANNER_SEARCH_PACKING_H_
#define HARMONY_PLANNER_SEARCH_PACKING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/task_graph.h"
#include "planner/search/cost_model.h"

namespace harmony::planner {

using plan::PackRange;  // plan/task_graph.h
using plan::Packing;

enum class PackPhase { kForward, kBackward };

struct PackRequest {
  int begin = 0;
  int end = 0;
  int microbatch = 1;
  // Microbatches each task runs (for the pack cost of Optimal).
  int microbatches = 1;
  PackPhase phase = PackPhase::kBackward;
  uint64_t budget = 0;  // Bytes a pack may use.
  // Bandwidth a device gets for swaps (the host link shared by devices).
  double swap_bandwidth = 1e9;
  // Optimal's objective: the sum of pack costs (packs that run one after
  // another, as in vDP) rather than the largest (a pipeline, as in vPP).
  bool minimize_sum = false;
  // Backward packs may have their gradients summed on the host (vPP,
  // Config::host_sums): a pack fits when it does either way.
  bool host_sums = false;
};

absl::StatusOr<Packing> GreedyPacks(const CostModel& model, const PackRequest& r);
absl::StatusOr<Packing> BalancedMemoryPacks(const CostModel& model,
                                            const PackRequest& r);
absl::StatusOr<Packing> BalancedTimePacks(const CostModel& model,
                                          const PackRequest& r);
absl::StatusOr<Packing> OptimalPacks(const CostModel& model, const PackRequest& r);

// Exactly `parts` packs of about equal time (e.g. a multiple of the device
// count, for a pipeline); ResourceExhausted when one of them does not fit.
absl::StatusOr<Packing> EvenTimePacks(const CostModel& model, const PackRequest& r,
                                      int parts);

// The cost Optimal minimises, for one pack.
double PackCost(const CostModel& model, const PackRequest& r, int begin, int end);

// "[0-3][4-7]" for people and logs.
std::string PackingString(const Packing& packing);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_PACKING_H_
