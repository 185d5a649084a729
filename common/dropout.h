// Dropout that draws from the calling thread's own generator, so that
// virtual CPU devices computing at once need not share (and take turns on)
// LibTorch's one global CPU generator.
//
// The decomposer rewrites each vLayer's aten::dropout into harmony::dropout
// (same schema). On a CPU tensor inside a DropoutGeneratorScope it draws
// from the scope's generator, seeded as the global one would be, with the
// same ops in the same order as LibTorch's CPU dropout (a contiguous
// empty_like whatever the input's strides, bernoulli_(1 - p), div_(1 - p),
// mul): the same values and gradients, bit for bit (dropout_test). Outside a scope, or on another device, it is
// aten::dropout itself.
//
// Thread-safety: the scope is the calling thread's; scopes nest.
#ifndef HARMONY_COMMON_DROPOUT_H_
#define HARMONY_COMMON_DROPOUT_H_

#include <cstdint>

#include <ATen/core/Generator.h>

namespace harmony::common {

// The operator's qualified name (defined beside its registration, so that
// whatever names it links the registration in).
const char* DropoutOp();

class DropoutGeneratorScope {
 public:
  // A fresh CPU generator seeded with `seed`.
  explicit DropoutGeneratorScope(uint64_t seed);
  ~DropoutGeneratorScope();
  DropoutGeneratorScope(const DropoutGeneratorScope&) = delete;
  DropoutGeneratorScope& operator=(const DropoutGeneratorScope&) = delete;

 private:
  at::Generator generator_;
  at::Generator* previous_;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_DROPOUT_H_
