#include "zoo/reference_training.h"

#include <torch/optim/sgd.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::zoo {
namespace {

std::string DescribeTensors(const std::vector<at::Tensor>& tensors) {
  std::vector<std::string> parts;
  for (const at::Tensor& t : tensors) parts.push_back(common::DescribeTensor(t));
  return absl::StrJoin(parts, ", ");
}

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
  const auto& arguments = method->function().getSchema().arguments();
  // arguments[0] is self.
  const size_t arity = arguments.size() - 1;
  std::vector<std::string> names;
  for (size_t i = 1; i < arguments.size(); ++i) names.push_back(arguments[i].name());
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  bool model_takes_targets = false;
  if (arity == inputs.size() + targets.size() && !targets.empty()) {
    args.insert(args.end(), targets.begin(), targets.end());
    model_takes_targets = true;
  } else if (arity != inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward(", absl::StrJoin(names, ", "), ") takes ", arity,
        " tensors, but the data has ", inputs.size(), " input(s) [",
        DescribeTensors(inputs), "] and ", targets.size(), " target(s) [",
        DescribeTensors(targets), "]"));
  }
  return common::CallTorch("forward", [&]() -> at::Tensor {
    c10::IValue out = model.forward(args);
    TORCH_CHECK(out.isTensor(), "forward returned ", out.type()->str(),
                ", expected a tensor (logits or a scalar loss)");
    at::Tensor y = out.toTensor();
    if (y.dim() == 0 && (model_takes_targets || loss == LossKind::kAuto)) {
      return y;  // The model's own loss.
    }
    TORCH_CHECK(targets.size() == 1, "forward returned ", common::DescribeTensor(y),
                "; applying a loss needs exactly one target tensor, the data has ",
                targets.size());
    const at::Tensor& target = targets.front();
    LossKind kind = loss;
    if (kind == LossKind::kAuto) {
      kind = at::isFloatingType(target.scalar_type()) ? LossKind::kMse
                                                      : LossKind::kCrossEntropy;
    }
    if (kind == LossKind::kCrossEntropy) {
      return torch::cross_entropy_loss(y.reshape({-1, y.size(-1)}),
                                       target.reshape({-1}));
    }
    return torch::mse_loss(y, target.to(y.scalar_type()));
  });
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
