#include "common/loss.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor_file.h"
#include "common/torch_status.h"

namespace harmony::common {
absl::StatusOr<LossKind> ParseLossKind(absl::string_view text) {
  if (text == "auto") return LossKind::kAuto;
  if (text == "cross-entropy") return LossKind::kCrossEntropy;
  if (text == "mse") return LossKind::kMse;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown loss \"", text, "\" (expected auto, cross-entropy or mse)"));
}

absl::StatusOr<bool> ForwardTakesTargets(
    const std::vector<std::string>& forward_arguments,
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& targets) {
  const size_t arity = forward_arguments.size();
  if (!targets.empty() && arity == inputs.size() + targets.size()) return true;
  if (arity == inputs.size()) return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "forward(", absl::StrJoin(forward_arguments, ", "), ") takes ", arity,
      " tensors, but the data has ", inputs.size(), " input(s) [",
      DescribeTensors(inputs), "] and ", targets.size(), " target(s) [",
      DescribeTensors(targets), "]"));
}

absl::StatusOr<at::Tensor> LossFromOutput(const at::Tensor& output,
                                          const std::vector<at::Tensor>& targets,
                                          bool forward_took_targets,
                                          LossKind kind) {
  if (output.dim() == 0 && (forward_took_targets || kind == LossKind::kAuto)) {
    return output;  // The model's own loss.
  }
  if (targets.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward returned ", DescribeTensor(output),
        "; applying a loss needs exactly one target tensor, the data has ",
        targets.size()));
  }
  const at::Tensor& target = targets.front();
  if (kind == LossKind::kAuto) {
    kind = at::isFloatingType(target.scalar_type()) ? LossKind::kMse
                                                    : LossKind::kCrossEntropy;
  }
  return CallTorch(
      absl::StrCat("applying the loss to output ", DescribeTensor(output),
                   " and target ", DescribeTensor(target)),
      [&]() -> at::Tensor {
        if (kind == LossKind::kCrossEntropy) {
          // Classes in the last dimension ([N, C] or [N, T, V] logits with
          // [N] or [N, T] targets), else in dimension 1 (segmentation:
          // [N, C, H, W] logits with [N, H, W] targets), as
          // F.cross_entropy takes them.
          const bool last = output.dim() >= 1 && output.dim() == target.dim() + 1 &&
                            output.sizes().slice(0, output.dim() - 1).equals(target.sizes());
          const bool second = output.dim() >= 3 && output.dim() == target.dim() + 1 &&
                              output.size(0) == target.size(0) &&
                              output.sizes().slice(2).equals(target.sizes().slice(1));
          if (!last && second) return at::cross_entropy_loss(output, target);
          return at::cross_entropy_loss(output.reshape({-1, output.size(-1)}),
                                        target.reshape({-1}));
        }
        return at::mse_loss(output, target.to(output.scalar_type()));
      });
}

}  // namespace harmony::common
