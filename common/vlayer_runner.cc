#include "common/vlayer_runner.h"

#include <map>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/leaf_gradients.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::common {
namespace {

at::Tensor GetRngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetRngState(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

absl::StatusOr<VLayerStepResult> RunVLayerStep(
    const Decomposition& decomposition, torch::jit::Module& model,
    const std::vector<at::Tensor>& inputs,
    const std::vector<at::Tensor>& targets, LossKind loss_kind) {
  HARMONY_ASSIGN_OR_RETURN(
      bool takes_targets,
      ForwardTakesTargets(decomposition.forward_arguments(), inputs, targets));
  std::vector<c10::IValue> model_args(inputs.begin(), inputs.end());
  if (takes_targets) model_args.insert(model_args.end(), targets.begin(), targets.end());

  const int count = decomposition.num_vlayers();
  std::vector<std::vector<at::Tensor>> params(count), buffers(count);
  for (int k = 0; k < count; ++k) {
    const VLayerInfo& info = decomposition.vlayers()[k];
    HARMONY_ASSIGN_OR_RETURN(params[k], ResolveTensors(model, info.parameters));
    HARMONY_ASSIGN_OR_RETURN(buffers[k], ResolveTensors(model, info.buffers));
  }
  auto inputs_of = [&](int k, const std::vector<std::vector<c10::IValue>>& outs) {
    std::vector<c10::IValue> in;
    for (const ValueSource& s : decomposition.vlayers()[k].inputs) {
      in.push_back(s.producer < 0 ? model_args.at(s.index)
                                  : outs[s.producer].at(s.index));
    }
    return in;
  };

  // Forward without autograd: stash every vLayer's outputs and RNG state.
  std::vector<std::vector<c10::IValue>> outputs(count);
  std::vector<at::Tensor> rng(count);
  {
    c10::NoGradGuard no_grad;
    for (int k = 0; k < count; ++k) {
      rng[k] = GetRngState();
      HARMONY_ASSIGN_OR_RETURN(
          outputs[k], decomposition.Run(k, params[k], buffers[k],
                                        inputs_of(k, outputs)));
    }
  }
  const c10::IValue& last = outputs[count - 1].at(0);
  if (!last.isTensor()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward returned ", last.type()->str(),
        ", expected a tensor (logits or a scalar loss)"));
  }
  VLayerStepResult result;
  result.output = last.toTensor();
  {
    c10::NoGradGuard no_grad;
    HARMONY_ASSIGN_OR_RETURN(
        result.loss,
        LossFromOutput(result.output, targets, takes_targets, loss_kind));
  }

  // Backward, last vLayer first. grads[k][i]: gradient for output i of k.
  std::vector<std::vector<at::Tensor>> grads(count);
  for (int k = 0; k < count; ++k) grads[k].resize(outputs[k].size());
  const at::Tensor rng_after_forward = GetRngState();
  for (int k = count - 1; k >= 0; --k) {
    const VLayerInfo& info = decomposition.vlayers()[k];
    // Live-ins become leaves so their gradients can be read off.
    std::vector<c10::IValue> in = inputs_of(k, outputs);
    std::vector<at::Tensor> leaves(in.size());
    LeafGradients leaf_grads;  // Handed on as autograd computed them.
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].isTensor() || info.inputs[i].producer < 0) continue;
      at::Tensor t = in[i].toTensor().detach();
      if (at::isFloatingType(t.scalar_type())) {
        t.requires_grad_(true);
        leaf_grads.Watch(t);
      }
      leaves[i] = t;
      in[i] = t;
    }
    std::vector<at::Tensor> scratch;
    for (const at::Tensor& b : buffers[k]) scratch.push_back(b.clone());
    SetRngState(rng[k]);
    c10::AutoGradMode grad_mode(true);
    HARMONY_ASSIGN_OR_RETURN(std::vector<c10::IValue> recomputed,
                             decomposition.Run(k, params[k], scratch, in));
    std::vector<at::Tensor> roots, root_grads;
    if (k == count - 1) {
      HARMONY_ASSIGN_OR_RETURN(
          at::Tensor loss, LossFromOutput(recomputed.at(0).toTensor(), targets,
                                          takes_targets, loss_kind));
      roots.push_back(loss);
      root_grads.push_back(at::ones_like(loss));
    } else {
      for (size_t o = 0; o < recomputed.size(); ++o) {
        if (!grads[k][o].defined() || !recomputed[o].isTensor()) continue;
        at::Tensor out = recomputed[o].toTensor();
        if (!out.requires_grad()) continue;
        roots.push_back(out);
        root_grads.push_back(grads[k][o]);
      }
    }
    if (!roots.empty()) {
      HARMONY_RETURN_IF_ERROR(CallTorch(
          absl::StrCat("backward of vLayer ", k),
          [&] { torch::autograd::backward(roots, root_grads); }));
    }
    // Hand input gradients to their producers, accumulating in the order
    // autograd would (the later consumer first).
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i].defined()) continue;
      const at::Tensor g = leaf_grads.Take(leaves[i]);
      if (!g.defined()) continue;
      const ValueSource& s = info.inputs[i];
      at::Tensor& acc = grads[s.producer][s.index];
      acc = acc.defined() ? acc + g : g;
    }
  }
  SetRngState(rng_after_forward);
  return result;
}

}  // namespace harmony::common
