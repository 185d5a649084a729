#include "common/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/library.h>

namespace harmony::common {
namespace {

thread_local at::Generator* current = nullptr;

at::Tensor Dropout(const at::Tensor& input, double p, bool train) {
  if (current == nullptr || !input.is_cpu()) return at::dropout(input, p, train);
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (p == 0 || !train || input.numel() == 0) return input;
  if (p == 1) return input.mul(at::zeros({}, input.options()));
  at::Tensor noise = at::empty_like(input, at::MemoryFormat::Contiguous);
  noise.bernoulli_(1 - p, *current);
  noise.div_(1 - p);
  return input.mul(noise);
}

}  // namespace

const char* DropoutOp() { return "harmony::dropout"; }

DropoutGeneratorScope::DropoutGeneratorScope(uint64_t seed)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)), previous_(current) {
  current = &generator_;
}

DropoutGeneratorScope::~DropoutGeneratorScope() { current = previous_; }

// Composite: autograd records the ops it runs, as for aten::dropout.
TORCH_LIBRARY(harmony, m) { m.def("dropout(Tensor input, float p, bool train) -> Tensor"); }

TORCH_LIBRARY_IMPL(harmony, CompositeImplicitAutograd, m) { m.impl("dropout", &Dropout); }

}  // namespace harmony::common
