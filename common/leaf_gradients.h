// The gradients of a backward's leaves (a vLayer's or a pack's live-ins) as
// autograd computed them. Autograd's AccumulateGrad lays a leaf's .grad out
// as the leaf (its layout contract), copying a gradient whose strides
// differ (after a permute, channels-last) into the leaf's layout; the
// producer that takes it as its root gradient then reduces over it in
// another order than one backward through the whole graph would (ConvNeXt's
// bias gradient after a permute differed by ~1e-8). LeafGradients keeps
// those gradients, before the copy, to hand on as they are. A gradient
// that already obeys the contract is not held: AccumulateGrad takes it
// over without a copy, as before.
//
// Thread-safety: the hooks run on autograd's threads; Watch and Take on
// the caller's, before and after the backward.
#ifndef HARMONY_COMMON_LEAF_GRADIENTS_H_
#define HARMONY_COMMON_LEAF_GRADIENTS_H_

#include <map>
#include <memory>
#include <mutex>

#include <ATen/Tensor.h>

namespace harmony::common {

class LeafGradients {
 public:
  LeafGradients() : state_(std::make_shared<State>()) {}

  // Watches `leaf` (a tensor that requires grad), before the backward.
  void Watch(const at::Tensor& leaf);

  // After the backward: the gradient autograd computed for the watched
  // `leaf` (undefined when none reached it). Where it was kept, the leaf's
  // .grad (AccumulateGrad's copy) is released.
  at::Tensor Take(const at::Tensor& leaf);

 private:
  struct State {
    std::mutex mu;
    // Per leaf (its TensorImpl): gradients that break the contract.
    std::map<const void*, at::Tensor> raw;
  };
  std::shared_ptr<State> state_;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_LEAF_GRADIENTS_H_
