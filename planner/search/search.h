// The configuration search (docs/DESIGN.md §5): over mode (vPP, vDP), forward
// and backward microbatch sizes (U_f >= U_b; equal when the model depends
// on batch statistics), and forward/backward packs made by every packer at
// several memory budgets, every candidate is built into a task graph and
// simulated; the fastest whose simulated peak fits the devices wins (within
// `time_tolerance` of the fastest time, the least product of time and bytes
// over the host link). On the winner, adjacent packs merge where that is
// faster (merge_choice.h), then weights come late and packs keep their
// activations per pack where that is faster. Microbatch sizes are tried
// largest first, and one whose compute alone (every vLayer's backward over a
// device's share) is slower than what was found is skipped without packing
// it (branch and bound; the result is the full search's). Pinned choices (a
// microbatch size, a backward packing) restrict the search to what is left
// free. Pure and deterministic: the same inputs give the same
// result.
//
// Thread-safety: stateless; `progress` is called on the calling thread.

#ifndef HARMONY_PLANNER_SEARCH_SEARCH_H_
#define HARMONY_PLANNER_SEARCH_SEARCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "planner/search/cost_model.h"
#include "planner/search/keep_choice.h"
#include "planner/search/packing.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {

struct SearchOptions {
  int num_devices = 1;
  uint64_t device_memory = 0;
  int minibatch = 0;
  std::optional<Mode> mode;  // Empty: both.
  Schedule schedule = Schedule::kHarmony;
  int microbatch = 0;        // > 0 pins U_f = U_b.
  Packing backward_packs;    // Non-empty pins the backward packing.
  // Simulated times within this fraction of the fastest are traded against
  // bytes over the host link at par (the least time x bytes wins): the
  // simulator is not that exact, and less traffic is more robust.
  double time_tolerance = 0.05;
  // vDP: activations and their gradients between a device's packs stay on
  // the device (true), go through the host (false), or both are tried
  // (empty).
  std::optional<bool> local_activations;
  // vDP on several devices (Harmony's schedule): parameters cross the host
  // link once, device 0 swapping them in and the others copying them from
  // it (true), or each device swaps its own in (false); empty: true when
  // the profile's device-to-device bandwidth is at least the host link's.
  std::optional<bool> peer_weights;
  KeepActivations keep = KeepActivations::kAuto;
  // vDP Harmony: the minibatch in this many waves (plan::Config::waves);
  // 0: one, and where a config keeping activations on the devices does
  // not fit, 2, 4, 8 and 16 tried (each wave two microbatches per device
  // at least). > 1 plans Harmony's vDP only (no baseline competes).
  int waves = 0;
  // Skip microbatch sizes whose compute alone cannot beat what was found
  // (a lower bound; the result is the same as without: tested).
  bool prune = true;
  // Stop at the first candidate that fits: whether any does, not which is
  // best (SmallestDeviceMemory's question, asked many times over).
  bool any_fit = false;
  // The choices (merges, prefetch, keep) also run on the fastest Harmony
  // candidate where it is not the best but near it at par, and the better
  // result wins (false: on the best only; for tests and ablations).
  bool refine_fastest = true;
  // With refine_fastest: so do the fastest candidates of the other
  // microbatch pairs (and modes) within 10% of the fastest (false: not;
  // for tests and ablations).
  bool refine_each_microbatch = true;
  // Threads simulating candidates (0: one per hardware thread). The result
  // does not depend on it: candidates are compared in a fixed order.
  int threads = 0;
  std::function<void(const std::string&)> progress;
};

struct SearchResult {
  TaskGraph graph;
  SimResult sim;
  int candidates = 0;  // Simulated.
  int feasible = 0;    // Fitting the devices.
  // Microbatch sizes skipped because their compute alone is slower than
  // what was already found (branch and bound).
  int pruned = 0;
  // Configurations not simulated because their busiest device's compute
  // alone is slower than what was already found.
  int pruned_configs = 0;
};

// A lower bound on a config's simulated iteration: the compute of its
// busiest device, which runs its tasks' microbatches one after another (vDP:
// the largest share; vPP: the minibatch's compute over the devices), the
// backward packs' recompute included.
double BusiestDeviceComputeSeconds(const CostModel& model, const Config& config);

// Within the time tolerance: whether a plan of `seconds` moving `bytes` over
// the host link beats the best so far (`best_seconds`, `best_bytes`): time
// and bytes trade at par, the smaller product wins (a plan moving x% fewer
// bytes may be up to x% slower). Ties: neither.
bool BeatsWithinTolerance(double seconds, uint64_t bytes, double best_seconds,
                          uint64_t best_bytes);

// FailedPrecondition / ResourceExhausted / InvalidArgument with what a
// person can act on: a vLayer that cannot fit even alone at microbatch 1
// (which, how much, the cap), no configuration within the memory, vDP with
// more devices than samples, a pinned choice that does not fit.
absl::StatusOr<SearchResult> SearchSchedule(const CostModel& model,
                                            const SearchOptions& options);

// Plans a baseline schedule (options.schedule: ondemand, gpipe or dp-swap)
// at one microbatch size, for comparison: ondemand puts one vLayer in each
// pack; dp-swap the fewest packs (greedy) within half a device's memory
// (the other half for the next pack's weights; all of it when a vLayer
// needs more); gpipe balanced-time packs likewise,
// at least one per device. It is simulated whether or not it fits
// (sim.fits says). The same errors as SearchSchedule.
absl::StatusOr<SearchResult> PlanBaseline(const CostModel& model,
                                          const SearchOptions& options, int microbatch);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_SEARCH_H_
