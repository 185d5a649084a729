// Which backward packs keep their forward's activations instead of
// recomputing them (plan::Config::keep, docs/DESIGN.md §6.11): the variants
// the search tries per candidate, and the choice per pack made on the best
// candidate found.
//
// Thread-safety: stateless; ChooseKeptPacks runs its own threads and joins
// them before it returns.
#ifndef HARMONY_PLANNER_SEARCH_KEEP_CHOICE_H_
#define HARMONY_PLANNER_SEARCH_KEEP_CHOICE_H_

#include <optional>
#include <vector>

#include "planner/search/candidates.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"

namespace harmony::planner {

// Whether backward packs keep their activations from the forward
// (plan::Config::keep) or recompute them: the search chooses per pack
// (auto), or every pack that can keep does (all), or none does.
enum class KeepActivations { kAuto, kAll, kNone };

// The backward packs of `c` that can keep: Harmony's schedule, equal
// forward and backward microbatches, a profile that measured the kept
// bytes, and the pack's vLayers inside one forward pack (never the last,
// fused pack). Empty when none can.
std::vector<int> KeepablePacks(const CostModel& model, const Config& c);

// `c` as the search tries it: as is and with every pack that can keep
// keeping (auto), only the latter (all), or only as is (none).
std::vector<Config> KeepVariants(const CostModel& model, const Config& c, KeepActivations keep);

// The per-pack choice, from `start` (a config that fits, simulated at
// `start_s`): each round simulates `start`'s current choice with each
// keepable pack's flipped (keep for recompute, or back), takes the fastest
// flip, or every faster flip at once when that is faster still, and stops
// when no flip gains at least 0.1% (or after `max_rounds`). The fastest
// config found that fits, or nullopt when none beats `start`; `simulated`
// counts the configs simulated.
std::optional<Candidate> ChooseKeptPacks(const CostModel& model, const Config& start,
                                         double start_s, int threads, int* simulated,
                                         int max_rounds = 16);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_KEEP_CHOICE_H_
