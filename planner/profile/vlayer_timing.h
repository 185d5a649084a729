// Timing one vLayer of a decomposed model on a device of the profile's
// target (target.h: a virtual CPU device or a GPU), for the profiler
// (profiler.cc): one run with its memory peaks, the median of repeats, and
// the vLayers in turn as a device of the runtime runs them. Every time
// runs up to the target's Synchronize (on a GPU, until the work queued is
// done: launch costs included, as the runtime pays them). Internal to
// planner/profile.
//
// Thread-safety: the functions may run on several threads at once over one
// Context (they only read it).

#ifndef HARMONY_PLANNER_PROFILE_VLAYER_TIMING_H_
#define HARMONY_PLANNER_PROFILE_VLAYER_TIMING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "absl/status/statusor.h"
#include "common/decomposer.h"
#include "common/loss.h"
#include "planner/profile/target.h"

namespace harmony::planner::timing {

struct Measurement {
  bool fits = false;
  double time_s = 0;
  uint64_t peak = 0;
  // With autograd: what the forward's graph keeps until the backward.
  uint64_t saved = 0;
  // A backward's peak before its gradients exist (see RunOnce).
  uint64_t first_peak = 0;
  std::string error;  // Why it did not fit.
};

// Everything needed to run vLayers at one microbatch size.
struct Context {
  const common::Decomposition* d = nullptr;
  std::vector<std::vector<at::Tensor>> params, buffers;
  std::vector<c10::IValue> model_args;
  std::vector<at::Tensor> targets;
  bool takes_targets = false;
  common::LossKind loss = common::LossKind::kAuto;
  std::vector<std::vector<c10::IValue>> outputs;  // Of the forward chain.
  // The loss's gradient with respect to each output of each vLayer (an
  // undefined tensor where the loss does not depend on it), set by
  // OutputGradients; a backward is timed on them. Empty: on ones.
  std::vector<std::vector<at::Tensor>> output_grads;
  // Where the vLayers run (borrowed; outlives the context) and the bytes
  // of one device.
  Target* target = nullptr;
  uint64_t capacity = 0;
  // bf16 parameters (already in params) and every vLayer and loss run under
  // autocast to bf16 (ProfilerOptions::bf16).
  bool bf16 = false;
  bool fp32_gradients = false;  // ProfilerOptions::fp32_gradients.

  std::vector<c10::IValue> InputsOf(int k) const;
};

// Fills c.output_grads from c.outputs: the backward of the whole model at
// the context's microbatch (its loss unscaled), a vLayer at a time in
// reverse, each recomputed from its inputs, so that each vLayer's backward
// is timed on the values the runtime's will see. Ones hide slow paths: a
// deep plain conv stack's real gradients go denormal, which many x86 cores
// compute ~100x slower when denormals are not flushed (see
// common/denormals.h). Buffers (BatchNorm statistics) are left as they
// were.
absl::Status OutputGradients(Context& c);

// What keeping vLayer k's activations moves at the context's microbatch
// (proto kept_bytes): its forward run with autograd as a kept pack's forward
// task runs it (live-ins from earlier vLayers and the parameters as leaves),
// the distinct storages of what autograd saves, the parameters' excluded
// (common/saved_tensors.h).
absl::StatusOr<uint64_t> KeptBytes(const Context& c, int k);

// One run of vLayer k's forward (or recompute + backward) with its weights
// and inputs copied onto the device `device` meters (a fresh one of the
// context's capacity when null). Repeats share a device, so that they reuse its cache of freed
// storages as the runtime's devices do from their second iteration on: a
// fresh allocation of a large activation costs page faults the runtime
// does not pay (at microbatch 64 of a 34 MiB GPT, 0.3 s of 2.1 s).
// `with_gradients`: the parameters' gradients exist before the backward
// (a task's second microbatch on). Not fitting is a Measurement with fits
// false; InvalidArgument when the vLayer fails otherwise.
absl::StatusOr<Measurement> RunOnce(const Context& c, int k, bool backward, int64_t u,
                                    bool with_gradients = true,
                                    Target::Meter* device = nullptr);

// Median of `repeats` runs, after a warm-up run when `warm_up` (a vLayer's
// first call is the slow one; later sizes need none). repeats 0: one run,
// memory only.
absl::StatusOr<Measurement> Measure(const Context& c, int k, bool backward, int64_t u,
                                    int repeats, bool warm_up = false);

// Each vLayer's forward and backward seconds at the context's microbatch
// as the runtime's devices see them: the vLayers in turn (forwards in
// order, then backwards in reverse), weights and inputs copied in by
// another thread one step ahead and what each made copied out by a third
// (outputs; gradients added into host copies); the mean of `repeats`
// passes (the simulator sums times: it needs the expected one). Beside
// `others` threads doing the same (the plan's other devices, which share the
// host's cores, or a GPU's), in step: each step starts on every device at
// once, and its time is the mean of theirs; the device timed runs it alone
// right before (the others wait, their copies out done), so that a VM's
// drifting speed does not come out as a slowdown beside them. A vLayer run over and over on
// copies just made reads a hot cache the runtime's never has: on the
// 2-core bench VM it is 1.1-1.2x faster at small microbatches (vgg,
// microbatch 4), and the runtime was measured up to 1.5x slower per
// vLayer than such a profile. On a GPU the host tensors are pinned copies
// (the runtime's host store is pinned) and a step's copy-out is at most two
// behind (the runtime's devices hold their own tasks' tensors only).
struct ChainTimes {
  std::vector<double> forward, backward;  // 0 where it does not fit.
};
// Each step is timed alone and, with `others`, at once again beside them
// (the two within milliseconds: the ratio is not the machine's drift).
struct TurnTimes {
  ChainTimes alone;
  std::optional<ChainTimes> beside;  // With others > 0.
  // A vLayer that runs right after another of its task (a pack's second and
  // later vLayers) takes this fraction of its time in turn: measured on
  // pairs of vLayers (k, k + 1), every other one whose k + 1 alone reads
  // k's outputs, each timed as one task right after its two vLayers' steps:
  // the sum over pairs of (the pair's time - the first's) over the sum of
  // the seconds' times, alone and beside. 1 without such pairs. On the
  // 2-core Intel VM the runtime's packs of 4-7 vgg vLayers computed 0.82-0.86x
  // the sum of their times in turn beside a busy device, single-vLayer packs
  // 0.91-0.92x.
  double forward_chained = 1;
  double backward_chained = 1;
  // The timed device's compute thread between two steps whose next was
  // ready (its weights and inputs copied in): the mean gap from one step's
  // end to the next one's start, barrier waits left out. On the 2-core
  // AMD bench VM 126-177 us at vgg's microbatches 4 and 8, where the
  // runtime's device thread paid less between a task's microbatches (60 us
  // on average, median 36-45) and more at each backward task's start (0.5-2
  // ms beyond the simulation: the vDP devices waiting for each other and for
  // the reduction); priced before every compute, the two offset each other
  // (docs/bench/README.md, amd/run5). None of it on the CPU (perf): the
  // compute thread descheduled while the copy threads it woke run. 0 with
  // no step ready.
  double step_handoff_s = 0;
};
// The least chained factor kept (a pair timed far below its first vLayer's
// own time is noise).
inline constexpr double kLeastChained = 0.25;
absl::StatusOr<TurnTimes> MeasureInTurn(const Context& c, int repeats, int others,
                                        const std::vector<bool>& forward_fits,
                                        const std::vector<bool>& backward_fits);

}  // namespace harmony::planner::timing

#endif  // HARMONY_PLANNER_PROFILE_VLAYER_TIMING_H_
