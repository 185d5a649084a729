// Which packs prefetch their weights during the task before and which swap
// them in when their task starts (plan::Config::late_forward /
// late_backward, docs/DESIGN.md §5.3): where a device cannot hold the next
// pack's weights beside every task, single buffering everywhere leaves the
// device idle for every pack's swap-in; chosen per pack, only the packs
// that do not fit wait.
//
// Thread-safety: stateless; the functions run their own threads and join
// them before they return.
#ifndef HARMONY_PLANNER_SEARCH_PREFETCH_CHOICE_H_
#define HARMONY_PLANNER_SEARCH_PREFETCH_CHOICE_H_

#include <optional>
#include <vector>

#include "planner/search/candidates.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"

namespace harmony::planner {

// Whether some pack of `c` swaps its weights in when its task starts
// (single-buffered, or late packs).
bool AnyLate(const Config& c);

// `c` (which prefetches every pack and does not fit) as the search tries it
// again: single-buffered, and prefetching only the backward packs or only
// the forward packs (the others late), where `c` has both.
std::vector<Config> LateVariants(const Config& c);

// `c` in its plainest form: single-buffered when every pack is late, no
// late lists when none is.
Config NormalizeLate(Config c);

// The per-pack choice from `start` (a config that fits, simulated at
// `start_s`, single-buffered or with late packs): flips each pack between
// late and prefetched (ChooseByFlips). The fastest config found that fits,
// normalized, or nullopt when none beats `start` (or `start` prefetches
// every pack already).
std::optional<Candidate> ChoosePrefetchedPacks(const CostModel& model, const Config& start,
                                               double start_s, int threads, int* simulated,
                                               int max_rounds = 16);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_PREFETCH_CHOICE_H_
