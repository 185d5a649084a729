// The simulator (docs/DESIGN.md §5): plays one iteration of a task graph on a
// model of the machine and predicts its time, its swap traffic and each
// device's memory over time.
//
// The machine: per device, a swap-in, a swap-out, a compute and a peer
// stream, each running its operations in the order they were issued; one
// CPU optimizer stream; a host link shared by all devices, full duplex
// (host->device and device->host transfers each queue on their direction of
// the link, at the profile's all-devices bandwidth); peer copies at the peer
// bandwidth on the sender's peer stream. An operation starts when its
// stream is free and what it depends on has finished.
//
// What runs: a task swaps its weights in on the weights stream (during the
// device's previous task when that task lists the prefetch, after it
// started computing), then for each microbatch receives its inputs (those
// from the host on the swap-in stream, all of the task's microbatches in
// order from when the task starts), computes, and sends its outputs (to
// the host on the swap-out stream); a backward task then reduces (vDP) and
// sends its gradients out on the swap-out stream, and the update runs on
// the CPU as soon as they land (across servers, after its gradients are
// summed over the network on the same thread: CostModel::ReduceSeconds). A device's tasks run one after another, as
// the runtime runs them: a task starts once the previous one has computed,
// sent to its peers and reduced; its copies to the host go on beside the
// next task, as the runtime's copy-out stream runs them. Each compute
// starts a step hand-off after its stream and inputs allow (the device
// thread's own time between steps, CostModel::StepHandoffSeconds).
//
// Memory per device: a task's weights from their swap-in (a prefetch's from
// the start of the task it overlaps, when the runtime allocates them) until
// the task has computed (kept into the next task when it says so),
// gradients from its first compute until they are out and, at least, until
// the device's next task has computed its first microbatch (the runtime's
// copy-out thread may lag that far however fast the link), each microbatch's
// input from its arrival until its compute ends, its output from its compute until it is sent, the
// compute's working set while it runs, and a reduction's receive buffer
// (a vLayer's gradients) while it runs.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_PLANNER_SIM_SIMULATOR_H_
#define HARMONY_PLANNER_SIM_SIMULATOR_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"

namespace harmony::planner {

// kSwapIn carries data, activations and stashes to the device; kWeightsIn
// its weights (the runtime's copy-in and weights streams).
enum Stream { kSwapIn = 0, kSwapOut, kCompute, kPeer, kWeightsIn, kNumStreams };

struct SwapTotals {
  uint64_t weights_in = 0;
  uint64_t gradients_out = 0;
  uint64_t activations_in = 0;   // Through the host.
  uint64_t activations_out = 0;
  uint64_t stash_out = 0;
  uint64_t stash_in = 0;
  uint64_t kept_out = 0;  // Kept packs' saved activations.
  uint64_t kept_in = 0;
  uint64_t data_in = 0;
  uint64_t peer = 0;             // Device to device, reductions included.
  // Bytes over the host link (both directions).
  uint64_t host_link() const {
    return weights_in + gradients_out + activations_in + activations_out + stash_out +
           stash_in + kept_out + kept_in + data_in;
  }
};

struct TraceEvent {
  std::string name;
  int device = 0;  // -1: the host's CPU optimizer.
  Stream stream = kCompute;
  double start_s = 0;
  double end_s = 0;
};

struct SimResult {
  double iteration_s = 0;
  // busy[device][stream], seconds.
  std::vector<std::array<double, kNumStreams>> busy;
  // Per device, seconds its compute thread spent handing off between steps
  // (Op::lead; not in busy: the runtime's compute excludes it).
  std::vector<double> handoff_s;
  double optimizer_busy_s = 0;
  SwapTotals swap;
  std::vector<uint64_t> device_peak;
  uint64_t host_memory = 0;  // Master weights, gradients, optimizer state, stashes.
  // Bytes each server sends per iteration across a world (0 for one).
  uint64_t network_bytes = 0;
  bool fits = true;          // Every device's peak within its memory.
  // The most microbatches of one task whose host sends (activations, their
  // gradients, stashes) were still on the device when a later microbatch of
  // it began computing (Config::host_outputs_pending bounds it below its
  // value): a bound at or above this changes nothing.
  int host_outputs_pending = 0;
  // The most bytes one microbatch of a task copies in from the host: what
  // each microbatch fewer ahead (Config::inputs_ahead) can free at most.
  uint64_t largest_host_input = 0;
  std::vector<TraceEvent> events;

  // The devices' compute busy time, summed over the devices: the plan's
  // Estimates.compute_s, what harmony-exec's device compute compares with.
  double device_compute_s() const;
};

// How global gradient-norm clipping meets the host's updates
// (executor/runtime/host_updates.h). Each update with clipping also reads
// its gradients once for their norm; speculating, every update but the last
// first copies its parameters and optimizer state (to restore them), and
// when clipping fires every speculated update is restored and stepped again
// after the last; holding, the first update waits for every backward. The
// copies are priced from the profiled update time by bytes touched: an
// update reads and writes parameters and state and reads the gradients
// (2 (P + S) + G), a copy reads and writes parameters and state (2 (P + S)),
// a norm reads the gradients (G).
enum class ClipSim { kOff, kSpeculate, kSpeculateFires, kHold };

// Simulates one iteration of `graph`. Internal (a dependency cycle means a
// malformed graph) when the graph cannot make progress.
absl::StatusOr<SimResult> Simulate(const CostModel& model, const TaskGraph& graph,
                                   bool keep_events = false, ClipSim clip = ClipSim::kOff);

// The events as a Chrome trace (chrome://tracing, Perfetto): a process per
// device (and one for the host), a thread per stream, times in microseconds.
std::string ChromeTrace(const SimResult& result);

std::string StreamName(Stream stream);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SIM_SIMULATOR_H_
