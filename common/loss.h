// How a model's output becomes the training loss, shared by the plain
// reference loop, the vLayer runner and (later) the executor, so that all of
// them apply the very same operations.
//
// A forward that takes the targets after its inputs and returns a scalar
// computes its own loss. Otherwise a criterion is applied to its output and
// the single target tensor.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_COMMON_LOSS_H_
#define HARMONY_COMMON_LOSS_H_

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

enum class LossKind {
  kAuto,          // The model's scalar output, else cross-entropy for
                  // integer targets and MSE for floating-point ones.
  kCrossEntropy,  // Over the last dimension of the output when the targets
                  // have its shape without it ([N, T, V] and [N, T]), else
                  // over dimension 1 ([N, C, H, W] and [N, H, W]).
  kMse,
};

// "auto", "cross-entropy", "mse". InvalidArgument quoting other text.
absl::StatusOr<LossKind> ParseLossKind(absl::string_view text);

// Whether forward receives the targets: true when it takes inputs+targets
// arguments, false when it takes just the inputs. InvalidArgument naming
// forward's arguments and the data's tensors otherwise.
absl::StatusOr<bool> ForwardTakesTargets(
    const std::vector<std::string>& forward_arguments,
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& targets);

// The loss from forward's output. A scalar output is the loss when `kind` is
// kAuto or forward took the targets; otherwise the criterion is applied.
// Errors (InvalidArgument) say what was expected and found.
absl::StatusOr<at::Tensor> LossFromOutput(const at::Tensor& output,
                                          const std::vector<at::Tensor>& targets,
                                          bool forward_took_targets,
                                          LossKind kind);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_LOSS_H_
