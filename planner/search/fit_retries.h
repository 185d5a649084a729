// What the search simulates again of a candidate that does not fit its
// devices (search.cc): the same schedule with what a task sends to the host
// held for a few microbatches (Config::host_outputs_pending), in waves,
// with the gradients of its heaviest backward packs summed on the host,
// single-buffered, and with its host inputs copied in fewer microbatches
// ahead (Config::inputs_ahead).
//
// Thread-safety: a FitRetries is filled by one thread.
#ifndef HARMONY_PLANNER_SEARCH_FIT_RETRIES_H_
#define HARMONY_PLANNER_SEARCH_FIT_RETRIES_H_

#include <vector>

#include "planner/search/candidates.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"

namespace harmony::planner {

struct FitRetries {
  // Each kind's configs, in the order the search simulates them.
  std::vector<Config> bounded, waved, summed, single, fewer_ahead;

  // Adds the retries of `cand`, nothing where it fits or was not built.
  // `waves`: SearchOptions::waves (0: the search may choose them).
  void Add(const CostModel& model, int minibatch, int num_devices, int waves,
           const Candidate& cand);
  // Adds only `cand` with fewer inputs ahead: each of plan::kInputsAhead -
  // 1 down to plan::kFewerInputsAhead that could free enough, so that the
  // most that fits is among them (the fewer ahead, the longer a pack's last
  // inputs wait behind the next pack's weights on the link).
  void AddFewerAhead(const Candidate& cand);
};

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_FIT_RETRIES_H_
