#include "zoo/reference_training.h"

#include <algorithm>
#include <set>

#include <torch/optim/sgd.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/model_output.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::zoo {
namespace {

// Rows [begin, begin + count) of every tensor, wrapping around.
std::vector<at::Tensor> Rows(const std::vector<at::Tensor>& tensors,
                             int64_t begin, int64_t count) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) {
    const int64_t n = t.size(0);
    at::Tensor index = (torch::arange(begin, begin + count) % n);
    out.push_back(t.index_select(0, index));
  }
  return out;
}

}  // namespace

absl::StatusOr<at::Tensor> ComputeLoss(torch::jit::Module& model,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& targets,
                                       LossKind loss, const std::string& output) {
  auto method = model.find_method("forward");
  if (!method) {
    return absl::InvalidArgumentError("the model has no forward method");
  }
  std::vector<std::string> names;
  const auto& arguments = method->function().getSchema().arguments();
  for (size_t i = 1; i < arguments.size(); ++i) {  // arguments[0] is self.
    names.push_back(arguments[i].name());
  }
  HARMONY_ASSIGN_OR_RETURN(bool takes_targets,
                           common::ForwardTakesTargets(names, inputs, targets));
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  if (takes_targets) args.insert(args.end(), targets.begin(), targets.end());
  HARMONY_ASSIGN_OR_RETURN(
      c10::IValue out,
      common::CallTorch("forward", [&] { return model.forward(args); }));
  HARMONY_ASSIGN_OR_RETURN(at::Tensor picked, common::PickOutput(out, output));
  return common::LossFromOutput(picked, targets, takes_targets, loss);
}

absl::StatusOr<std::vector<double>> TrainReference(
    torch::jit::Module& model, const common::TrainingData& data_in,
    const ReferenceTrainingOptions& options) {
  if (data_in.inputs.empty()) {
    return absl::InvalidArgumentError("training data has no inputs");
  }
  auto method = model.find_method("forward");
  if (!method) return absl::InvalidArgumentError("the model has no forward method");
  std::vector<std::string> names;
  const auto& arguments = method->function().getSchema().arguments();
  for (size_t i = 1; i < arguments.size(); ++i) names.push_back(arguments[i].name());
  common::TrainingData data = data_in;
  HARMONY_RETURN_IF_ERROR(common::ArrangeInputs(names, &data));
  HARMONY_ASSIGN_OR_RETURN(bool takes_targets,
                           common::ForwardTakesTargets(names, data.inputs, data.targets));
  std::vector<c10::IValue> sample;
  for (const at::Tensor& t : Rows(data.inputs, 0, 1)) sample.emplace_back(t);
  if (takes_targets) {
    for (const at::Tensor& t : Rows(data.targets, 0, 1)) sample.emplace_back(t);
  }
  HARMONY_ASSIGN_OR_RETURN(common::OutputChoice output,
                           common::ChooseLossOutput(model, options.loss_output, &sample));
  const int64_t samples = data.size();
  const int64_t minibatch = options.minibatch > 0 ? options.minibatch : samples;
  std::vector<at::Tensor> params;
  std::set<const void*> seen;  // A tied weight is one parameter, stepped once.
  for (at::Tensor p : model.parameters()) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    // Parameters registered from C++ may not have the flag Python sets.
    p.requires_grad_(true);
    params.push_back(p);
  }
  model.train(true);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(options.learning_rate)
                                    .momentum(options.momentum)
                                    .weight_decay(options.weight_decay));
  std::vector<double> losses;
  for (int64_t step = 0; step < options.steps; ++step) {
    const int64_t begin = (step * minibatch) % samples;
    std::vector<at::Tensor> inputs = Rows(data.inputs, begin, minibatch);
    std::vector<at::Tensor> targets = Rows(data.targets, begin, minibatch);
    sgd.zero_grad();
    // Each microbatch's loss scaled by its share of the minibatch, gradients
    // accumulated, as Harmony's runtime does.
    const int64_t microbatch = options.microbatch > 0 ? options.microbatch : minibatch;
    double value = 0;
    for (int64_t offset = 0; offset < minibatch; offset += microbatch) {
      const int64_t size = std::min(microbatch, minibatch - offset);
      std::vector<at::Tensor> xs, ys;
      for (const at::Tensor& t : inputs) xs.push_back(t.narrow(0, offset, size));
      for (const at::Tensor& t : targets) ys.push_back(t.narrow(0, offset, size));
      HARMONY_ASSIGN_OR_RETURN(at::Tensor loss,
                               ComputeLoss(model, xs, ys, options.loss, output.selector));
      at::Tensor scaled = size == minibatch
                              ? loss
                              : loss * (static_cast<double>(size) / static_cast<double>(minibatch));
      value += scaled.item<double>();
      HARMONY_RETURN_IF_ERROR(common::CallTorch("backward", [&] { scaled.backward(); }));
    }
    HARMONY_RETURN_IF_ERROR(common::CallTorch("optimizer step", [&] { sgd.step(); }));
    losses.push_back(value);
    if (options.on_step) options.on_step(step, value);
  }
  return losses;
}

}  // namespace harmony::zoo
