// One step of a vLayer on a profiling target: its weights and inputs
// copied onto the device (Prepare), then its forward, or its forward and
// backward, run and timed (Execute). Shared by the single timings
// (vlayer_timing.cc) and the timings in turn.

#ifndef HARMONY_PLANNER_PROFILE_VLAYER_STEP_H_
#define HARMONY_PLANNER_PROFILE_VLAYER_STEP_H_

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "planner/profile/target.h"
#include "planner/profile/vlayer_timing.h"

namespace harmony::planner::timing {

// What one run of vLayer k reads, copied onto the device of the scope
// active on the calling thread: its weights (with zeroed gradients when
// `with_gradients`, as in the runtime from a task's second microbatch on;
// the backward adds into them), its inputs and the targets.
struct Prepared {
  int k = 0;  // The vLayer.
  std::vector<at::Tensor> params, buffers, targets;
  std::vector<at::Tensor> output_grads;  // A backward's, from c.output_grads.
  std::vector<c10::IValue> inputs;
  std::vector<c10::IValue> outputs;  // Set by Execute.
};
Prepared Prepare(const Context& c, int k, bool backward, bool with_gradients);

// What vLayer k's backward starts from, given its outputs `out`: the loss
// (gradient one) for the last vLayer, else each output that requires a
// gradient with its gradient in `output_grads` (only those that get one, as
// the runtime does), or ones when `output_grads` is null (no gradients
// computed). Throws with the reason when the loss cannot be computed.
struct BackwardRoots {
  std::vector<at::Tensor> roots, grads;
};
BackwardRoots RootsOf(const Context& c, int k, const std::vector<c10::IValue>& out,
                      const std::vector<at::Tensor>& targets,
                      const std::vector<at::Tensor>* output_grads);

// Runs vLayer k's forward (or forward + backward) on `p`; throws as
// LibTorch does (an allocation over the device's cap: OutOfMemoryError).
// Returns the seconds it took, up to the target's Synchronize; `saved` (may
// be null): what the forward's graph keeps for the backward on `memory`.
double Execute(const Context& c, int k, bool backward, Prepared& p,
               Target::Meter* memory = nullptr, uint64_t* saved = nullptr);

// Whether vLayer k's outputs are read by vLayer k + 1 and by no later one:
// then k and k + 1 run as one task (ExecutePair) start their backward from
// k + 1's outputs alone.
bool OnlyReaderIsNext(const common::Decomposition& d, int k);

// vLayers `first` and `second` (its next, OnlyReaderIsNext) run as a task
// of the runtime runs them: the forwards in turn, the second reading the
// first's outputs as they come; with `backward`, the recompute of both, then
// one backward from the second's outputs. Returns the seconds, up to the
// target's Synchronize; throws as Execute does.
double ExecutePair(const Context& c, bool backward, Prepared& first, Prepared& second);

}  // namespace harmony::planner::timing

#endif  // HARMONY_PLANNER_PROFILE_VLAYER_STEP_H_
