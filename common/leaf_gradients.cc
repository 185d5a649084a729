#include "common/leaf_gradients.h"

#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/utils/grad_layout_contract.h>

namespace harmony::common {

void LeafGradients::Watch(const at::Tensor& leaf) {
  // The leaf's own strides, not the leaf: a hook holding its tensor would
  // keep it alive in its own autograd metadata.
  at::Tensor like = at::empty_strided(leaf.sizes(), leaf.strides(),
                                      leaf.options().device(at::kMeta).requires_grad(false));
  const void* key = leaf.unsafeGetTensorImpl();
  leaf.register_hook([state = state_, like = std::move(like), key](const at::Tensor& g) {
    if (g.is_sparse() || torch::autograd::utils::obeys_layout_contract(g, like)) return;
    std::lock_guard<std::mutex> lock(state->mu);
    state->raw[key] = g;
  });
}

at::Tensor LeafGradients::Take(const at::Tensor& leaf) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->raw.find(leaf.unsafeGetTensorImpl());
    if (it != state_->raw.end()) {
      at::Tensor g = std::move(it->second);
      state_->raw.erase(it);
      leaf.mutable_grad() = at::Tensor();  // AccumulateGrad's copy, not needed.
      return g;
    }
  }
  return leaf.grad();
}

}  // namespace harmony::common
