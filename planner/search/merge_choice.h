// Larger packs where the simulator says they are faster: adjacent packs of
// the best candidate merged, one pair at a time or several at once.
//
// The packers (packing.h) fit each pack to a memory budget on its own; the
// task before a pack prefetches its weights beside what it holds, so the
// largest packs that fit alone often do not fit double-buffered, and the
// search falls back on packs of one vLayer where two would fit with their
// neighbour's weights. Each boundary between packs costs a stash (the
// backward pack's input, out to the host in the forward and back in the
// backward) and a task's fixed costs: on zoo vgg's last stage (convolutions
// of 0.56 MiB on 4x4 images), a stash per vLayer moved 53.5 MiB over the
// link per iteration, against 37.5 MiB with packs of two.
//
// Thread-safety: stateless; ChooseMergedPacks runs its own threads and joins
// them before it returns.
#ifndef HARMONY_PLANNER_SEARCH_MERGE_CHOICE_H_
#define HARMONY_PLANNER_SEARCH_MERGE_CHOICE_H_

#include <optional>

#include "planner/search/candidates.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"

namespace harmony::planner {

// Where a merge applies. Backward merges join backward packs q and q + 1
// and, when the forward packs are the backward ones (all but the last),
// the same forward packs; into the last, fused pack (which computes its
// own forward, its weights loaded once for both) only where the last
// forward pack is pack q, which then goes; forward merges
// (only where the forward packs are their own) join forward packs q and
// q + 1. Per-pack choices follow the merged pack: its microbatch is the
// smaller of the two, its weights come late or its gradients are summed on
// the host if either's did, and it keeps its activations only if both did
// and the forward packs merged with it.
enum class MergeSide { kBackward, kForward };

// `c` with packs q and q + 1 of `side` merged; nullopt where that merge does
// not apply (out of range, or into a fused pack that it cannot join).
std::optional<Config> MergePacks(const Config& c, MergeSide side, int q);

// From `start` (Harmony's schedule, a config that fits, simulated at
// `start_s`): each round simulates every merge of two adjacent packs, and
// takes the fastest, or every faster merge that shares no pack with a
// faster one at once when that is faster still; it stops when no merge
// gains at least 0.1% (or after `max_rounds`). The fastest config found
// that fits, or nullopt when none beats `start`; `simulated` counts the
// configs simulated.
std::optional<Candidate> ChooseMergedPacks(const CostModel& model, const Config& start,
                                           double start_s, int threads, int* simulated,
                                           int max_rounds = 16);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_MERGE_CHOICE_H_
