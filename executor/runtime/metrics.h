// What one training iteration did (docs/DESIGN.md §10): bytes moved by kind,
// device peaks and allocations, time computing and waiting, the loss.
//
// Thread-safety: plain values.

#ifndef HARMONY_EXECUTOR_RUNTIME_METRICS_H_
#define HARMONY_EXECUTOR_RUNTIME_METRICS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace harmony::executor {

// Bytes moved in one iteration, by kind, as the plan's estimates count them.
struct SwapCounts {
  uint64_t weights_in = 0;
  uint64_t gradients_out = 0;  // With updated buffers.
  uint64_t activations_in = 0;
  uint64_t activations_out = 0;
  uint64_t stash_out = 0;
  uint64_t stash_in = 0;
  uint64_t kept_out = 0;  // Kept packs' saved activations (plan::Config::keep).
  uint64_t kept_in = 0;
  uint64_t peer = 0;
  uint64_t data_in = 0;     // forward's arguments from the loader.
  uint64_t targets_in = 0;  // Targets of a loss applied outside the model.

  uint64_t to_device() const {
    return weights_in + activations_in + stash_in + kept_in + data_in + targets_in;
  }
  uint64_t to_host() const { return gradients_out + activations_out + stash_out + kept_out; }
};

// What one evaluation did (executor/runtime/evaluation.h).
struct EvalMetrics {
  int64_t minibatches = 0;
  int64_t samples = 0;  // This server's.
  double loss = 0;
  double seconds = 0;
  // Bytes over the host link: weights and forward's data to the devices,
  // values between packs both ways.
  uint64_t weights_in = 0, data_in = 0, activations_in = 0, activations_out = 0;
  std::vector<uint64_t> device_peak_bytes;
};

struct IterationMetrics {
  int64_t iteration = 0;  // From 0.
  double loss = 0;        // Sum over microbatches of loss * size / D.
  double seconds = 0;
  double samples_per_s = 0;
  SwapCounts bytes;
  std::vector<uint64_t> device_peak_bytes;
  // What each device was allocating for when it reached its peak ("task 7
  // (backward of vLayers 2-3): vLayer 3, microbatch 1"); empty if unknown.
  std::vector<std::string> device_peak_activity;
  // Storages each device needed during the iteration (weights, gradients,
  // received activations, every tensor computed there): fresh from the
  // process's allocator, and reused from the device's cache of freed
  // storages (common/device_memory.h). From the second iteration on nearly
  // all are reused: buffers are not allocated anew per task.
  std::vector<uint64_t> device_allocations;
  std::vector<uint64_t> device_reused;
  // Summed over devices: computing, and waiting for weights and inputs.
  double compute_s = 0;
  double swap_wait_s = 0;
  // Of swap_wait_s: waiting for the other devices (a vDP reduction's
  // gradients, or its sum, and the room of weights they still copy).
  // Devices that run in step wait for the slowest of them: a device slower
  // than the others for a while (a shared VM, partitions of one GPU) shows
  // here, where the simulator's devices, all as fast as profiled, wait none.
  double peer_wait_s = 0;
  // Each device's share of compute_s.
  std::vector<double> device_compute_s;
  // The host's CPU optimizer.
  double optimizer_s = 0;
  // The host summing gradients into its store (HostStore::AddGradients),
  // on the threads that sent them, summed over those threads, waits for
  // a vLayer's lock included; and of the bytes, those kept aside (copied)
  // because a send ahead of them in the plan's order had not arrived. Where
  // a GPU's sends are many (dp-swap, on-demand: a vLayer's gradients from
  // every device and microbatch), this host work, which the simulator does
  // not price, can hold the devices: on the H200 of 11-28 dp-swap's GPT-2
  // XL iteration took 11.4 s against 4.3 s simulated at its own compute.
  double host_sum_s = 0;
  uint64_t host_sum_early_bytes = 0;
  // The host link per direction (HostLink::TakeUse): bytes that crossed and
  // the seconds during which at least one copy was crossing, whatever the
  // devices copying at once. bytes / busy seconds is the link's rate while
  // in use: on a GPU, against pinned copies, how well the swaps use PCIe.
  uint64_t to_device_link_bytes = 0, to_host_link_bytes = 0;
  double to_device_busy_s = 0, to_host_busy_s = 0;
  // Emulated (emulated_link), per direction: the copies, and by how many
  // seconds they came back past their emulated end, summed and the largest
  // (LinkUse). Each late second holds a device's next step; a plan for an
  // emulated link prices a fixed cost per transfer against it
  // (Config::host_link_latency_s).
  int64_t to_device_copies = 0, to_host_copies = 0;
  double to_device_late_s = 0, to_device_late_max_s = 0;
  double to_host_late_s = 0, to_host_late_max_s = 0;
  // The learning rate of this iteration's update (the schedule's).
  double learning_rate = 0;
  // With gradient clipping (RuntimeOptions::clip_grad_norm): the total
  // 2-norm of the gradients before clipping, the factor they were scaled by
  // (1: not clipped), how many vLayers were stepped before the norm was
  // known (speculatively) and, when it fired, stepped again, and the host
  // seconds that took (after the devices had finished).
  bool clipping = false;
  double grad_norm = 0;
  double clip_coef = 1;
  int speculated_vlayers = 0;
  bool redone = false;
  double redo_s = 0;
  std::string clip_mode;  // How this iteration's updates met it: speculate, hold.
  bool emulated_link = false;
  // Set by the caller: an evaluation run after this iteration (--eval-every)
  // and what it did.
  bool evaluated = false;
  EvalMetrics eval;
  // Set by the caller: a checkpoint taken after this iteration and how long
  // training stalled while its state was copied out of the host store; and
  // a checkpoint whose write (in the background) finished by the end of this
  // iteration, with the seconds the write took.
  std::string checkpoint_path;
  double checkpoint_copy_s = 0;
  std::string checkpoint_written_path;
  double checkpoint_write_s = 0;
};

// What an iteration's threads count as they go (every device's compute and
// copy threads, the host's update thread): bytes moved by kind, and the
// nanoseconds spent computing, waiting for inputs and weights, and in the
// CPU optimizer, summed over the devices.
//
// Thread-safety: the fields are atomics that any thread adds to; Reset and
// Fill run when no thread does (between iterations).
struct IterationCounters {
  std::atomic<uint64_t> weights_in{0}, gradients_out{0}, activations_in{0},
      activations_out{0}, stash_out{0}, stash_in{0}, kept_out{0}, kept_in{0}, peer{0},
      data_in{0}, targets_in{0};
  std::atomic<int64_t> compute_ns{0}, wait_ns{0}, optimizer_ns{0};
  std::atomic<int64_t> peer_wait_ns{0};  // Also in wait_ns.
  std::atomic<int64_t> host_sum_ns{0};
  std::atomic<uint64_t> host_sum_early{0};

  static void AddSeconds(std::atomic<int64_t>& ns, double seconds) {
    ns += static_cast<int64_t>(seconds * 1e9);
  }
  // Device `d` computed for `seconds` (compute_ns and its own count).
  void AddCompute(int d, double seconds);
  // Zero, counting `devices` devices' compute apart.
  void Reset(int devices);
  // Into the metrics' bytes and seconds.
  void Fill(IterationMetrics& out) const;

 private:
  std::vector<std::atomic<int64_t>> device_compute_ns_;  // Sized by Reset.
};

// Metrics as one JSON line (metrics.jsonl).
std::string MetricsJson(const IterationMetrics& metrics);

// The devices' compute per iteration against the plan's estimate of it
// (Estimates.compute_s): the median of `compute_s` (the iterations' summed
// compute; the first left out when there are more, as it warms up), for
// people. Off by more than 2x either way, a warning with the usual causes
// on the devices that trained (`gpu`: other work on the GPU, partitions
// of one GPU, a profile from another GPU or the CPU; else denormal numbers
// computed on a CPU slow at them, another CPU than the profile's, other
// load). Empty when there is no estimate or no iteration.
struct ComputeCheck {
  double measured_s = 0, planned_s = 0, ratio = 0;
  bool off = false;  // Outside [0.5, 2]: tiny tasks on a busy VM swing 1.2-1.5x.
  std::string text;
};
ComputeCheck CheckComputeAgainstPlan(std::vector<double> compute_s, double planned_s,
                                     bool gpu = false);

// How evenly the devices computed in one iteration: the slowest device's
// compute over the devices' mean (0 with fewer than two devices), and their
// waits for each other (peer_wait_s) over their time computing and waiting.
struct IterationBalance {
  double slowest_over_mean = 0;
  double peer_wait_share = 0;
};
IterationBalance BalanceOf(const IterationMetrics& m);

// Over the iterations (the first left out when there are more, as it warms
// up): the medians, and a line for people. Empty text with fewer than two
// devices.
struct BalanceCheck {
  double slowest_over_mean = 0;
  double peer_wait_share = 0;
  std::string text;
};
BalanceCheck CheckDeviceBalance(std::vector<IterationBalance> iterations);

// How late an emulated link's copies came back in one iteration (the
// metrics' to_*_late_s), and over the iterations (the first left out when
// there are more): the medians, and a line for people; empty text when the
// link was not emulated.
struct LinkLateness {
  int64_t copies = 0;  // Both ways.
  double in_s = 0, in_max_s = 0, out_s = 0, out_max_s = 0;
  std::string text;
};
LinkLateness LatenessOf(const IterationMetrics& m);
LinkLateness CheckLinkLateness(std::vector<LinkLateness> iterations);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_METRICS_H_
