// Building and simulating many search candidates at once, for the search's
// own files (search.cc, keep_choice.cc).
//
// Thread-safety: SimulateAll runs its own threads over a const CostModel
// and joins them before it returns.
#ifndef HARMONY_PLANNER_SEARCH_CANDIDATES_H_
#define HARMONY_PLANNER_SEARCH_CANDIDATES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {

struct Candidate {
  Config config;
  absl::StatusOr<TaskGraph> graph = absl::UnknownError("not built");
  absl::StatusOr<SimResult> sim = absl::UnknownError("not simulated");

  // Built, simulated and within the devices.
  bool fits() const { return graph.ok() && sim.ok() && sim->fits; }
};

// Builds and simulates every config on `threads` threads; results in the
// configs' order, whatever the number of threads.
std::vector<Candidate> SimulateAll(const CostModel& model, std::vector<Config> configs,
                                   int threads);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_CANDIDATES_H_
