#include "zoo/reference_training.h"

#include <torch/optim/sgd.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
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
                                       LossKind loss) {
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
  if (!out.isTensor()) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward returned ", out.type()->str(),
                     ", expected a tensor (logits or a scalar loss)"));
  }
  return common::LossFromOutput(out.toTensor(), targets, takes_targets, loss);
}

absl::StatusOr<std::vector<double>> TrainReference(
    torch::jit::Module& model, const common::TrainingData& data,
    const ReferenceTrainingOptions& options) {
  if (data.inputs.empty()) {
    return absl::InvalidArgumentError("training data has no inputs");
  }
  const int64_t samples = data.size();
  const int64_t minibatch = options.minibatch > 0 ? options.minibatch : samples;
  std::vector<at::Tensor> params;
  for (at::Tensor p : model.parameters()) {
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
    HARMONY_ASSIGN_OR_RETURN(at::Tensor loss,
                             ComputeLoss(model, inputs, targets, options.loss));
    const double value = loss.item<double>();
    HARMONY_RETURN_IF_ERROR(common::CallTorch("backward", [&] {
      loss.backward();
      sgd.step();
    }));
    losses.push_back(value);
    if (options.on_step) options.on_step(step, value);
  }
  return losses;
}

}  // namespace harmony::zoo
