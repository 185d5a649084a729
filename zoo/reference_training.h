// The plain LibTorch training loop: torch::optim::SGD over whole minibatches
// on one device. It is the baseline Harmony's results must equal (same
// losses, same weights), and what the demo trains before a plan exists.
//
// Thread-safety: thread-compatible (it mutates the module it is given).

#ifndef HARMONY_ZOO_REFERENCE_TRAINING_H_
#define HARMONY_ZOO_REFERENCE_TRAINING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "absl/status/statusor.h"
#include "common/loss.h"
#include "common/tensor_file.h"

namespace harmony::zoo {

using common::LossKind;

struct ReferenceTrainingOptions {
  int64_t steps = 5;
  double learning_rate = 0.05;
  double momentum = 0.0;
  double weight_decay = 0.0;
  // Samples per step, taken in order and wrapping around; 0: all of them.
  int64_t minibatch = 0;
  // > 0: the step runs microbatches of this many samples, each loss scaled
  // by its share of the minibatch, gradients accumulated (as Harmony does);
  // the step's loss is the sum of the scaled losses. 0: one pass.
  int64_t microbatch = 0;
  LossKind loss = LossKind::kAuto;
  // The element of forward's output to train on (common/model_output.h);
  // empty: the first scalar tensor, else the first tensor.
  std::string loss_output;
  // Called after every step with (step, loss); may be empty.
  std::function<void(int64_t, double)> on_step;
};

// The loss of `model` on `inputs` and `targets`: forward receives the inputs,
// plus the targets when its signature takes them (it then returns the loss).
// InvalidArgument when forward's arity matches neither, naming what forward
// expects and what the data holds. `output` picks the element of a tuple,
// list or dict output (common/model_output.h; empty: the output itself).
absl::StatusOr<at::Tensor> ComputeLoss(torch::jit::Module& model,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& targets,
                                       LossKind loss, const std::string& output = "");

// Trains `model` in place; returns the loss of every step (before its
// update).
absl::StatusOr<std::vector<double>> TrainReference(
    torch::jit::Module& model, const common::TrainingData& data,
    const ReferenceTrainingOptions& options);

}  // namespace harmony::zoo

#endif  // HARMONY_ZOO_REFERENCE_TRAINING_H_
