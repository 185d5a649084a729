// Building and simulating many search candidates at once, and choosing per
// pack by flips, for the search's own files (search.cc, keep_choice.cc,
// prefetch_choice.cc).
//
// Thread-safety: SimulateAll and ChooseByFlips run their own threads over a
// const CostModel and join them before they return.
#ifndef HARMONY_PLANNER_SEARCH_CANDIDATES_H_
#define HARMONY_PLANNER_SEARCH_CANDIDATES_H_

#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {

struct Candidate {
  Config config;
  // Built and simulated, its tasks then dropped (SimulateAll): building
  // `config` again gives them back, the same.
  absl::StatusOr<TaskGraph> graph = absl::UnknownError("not built");
  absl::StatusOr<SimResult> sim = absl::UnknownError("not simulated");

  // Built, simulated and within the devices.
  bool fits() const { return graph.ok() && sim.ok() && sim->fits; }
};

// Builds and simulates every config on `threads` threads; results in the
// configs' order, whatever the number of threads. Each graph keeps its
// config only: at most `threads` are whole at once.
std::vector<Candidate> SimulateAll(const CostModel& model, std::vector<Config> configs,
                                   int threads);

// A choice made per pack by flips (keep or recompute, prefetch or late):
// from `start` (a config that fits, simulated at `start_s`), each round
// simulates the current config with each of the `choices` flipped
// (`flip(config, i)` toggles choice i), takes the fastest flip, or every
// faster flip at once when that is faster still, and stops when no flip
// gains at least 0.1% (or after `max_rounds`). The fastest config found
// that fits, or nullopt when none beats `start`; `simulated` counts the
// configs simulated.
std::optional<Candidate> ChooseByFlips(const CostModel& model, const Config& start,
                                       double start_s, int choices,
                                       const std::function<void(Config&, int)>& flip,
                                       int threads, int* simulated, int max_rounds);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_CANDIDATES_H_
