// Trains one minibatch step through a Decomposition the way Harmony's
// runtime does, on one device: a forward pass through every vLayer without
// autograd (recording each vLayer's RNG state), then, from the last vLayer
// back to the first, a recompute of the vLayer's forward from its stashed
// inputs with the RNG state restored and with scratch copies of its
// buffers (so BatchNorm statistics are updated once), and its backward.
// Parameter gradients accumulate in the parameters' .grad, as
// loss.backward() leaves them.
//
// The equivalence tests check that this gives bit-identical loss, outputs
// and gradients to running the original module.
//
// Thread-safety: thread-compatible; uses the global CPU generator.

#ifndef HARMONY_COMMON_VLAYER_RUNNER_H_
#define HARMONY_COMMON_VLAYER_RUNNER_H_

#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "absl/status/statusor.h"
#include "common/decomposer.h"
#include "common/loss.h"

namespace harmony::common {

struct VLayerStepResult {
  at::Tensor loss;    // From the forward pass.
  at::Tensor output;  // Forward's output (logits, or the model's loss).
};

// One training step (no optimizer update) of `model`, whose weights it uses
// and whose gradients and buffers it updates, through `decomposition` (made
// from the same model). Errors name the vLayer and say what went wrong.
absl::StatusOr<VLayerStepResult> RunVLayerStep(
    const Decomposition& decomposition, torch::jit::Module& model,
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& targets, LossKind loss);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_VLAYER_RUNNER_H_
