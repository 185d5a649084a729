// Backward microbatches per pack (plan::Config::backward_pack_microbatch):
// the search's U_b is the largest microbatch at which every backward pack
// fits, so one heavy pack (GPT's lm_head with the loss) holds every other
// pack's backward at small, slow kernels. These give each backward pack
// the largest microbatch it fits at instead, up to U_f.
//
// Thread-safety: stateless.
#ifndef HARMONY_PLANNER_SEARCH_MICROBATCH_CHOICE_H_
#define HARMONY_PLANNER_SEARCH_MICROBATCH_CHOICE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"

namespace harmony::planner {

// Whether backward packs may run at microbatches of their own in `c`:
// Harmony's schedule, U_f > U_b, and a model that neither draws dropout
// masks nor updates batch statistics (their recompute must see the
// forward's microbatches).
bool PackMicrobatchesAllowed(const CostModel& model, const Config& c);

// `c` with each backward pack at the largest of U_b * 2^k (k >= 0) and U_f
// whose backward fits the device, with `beside_prefetch` beside the
// weights of the packs whose backward may come next on its device (else
// the search's retries swap those in late where they do not fit), or
// nullopt when no pack grows (or packs may not have their own). The
// simulator judges the whole config.
std::optional<Config> LargerPackMicrobatches(const CostModel& model, const Config& c,
                                             bool beside_prefetch);

// The largest of `sizes` at which every vLayer's backward alone fits
// `device_memory` (0 when none does).
int LargestFittingBackwardMicrobatch(const CostModel& model, const std::vector<int>& sizes,
                                     uint64_t device_memory);

// A lower bound on the backward compute (with its recompute) of every
// vLayer over `samples` when each pack may run at any microbatch from `ub`
// to `largest`: per vLayer, its chained time (the least it adds to a pack)
// at its fastest microbatch.
double BackwardSecondsLowerBound(const CostModel& model, int samples, int ub, int largest);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_MICROBATCH_CHOICE_H_
