#include "optim/cpu_optimizer.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace harmony::optim {
namespace {

// Elements per parallel chunk: large enough to amortise the dispatch.
constexpr int64_t kGrain = 1 << 15;

// The kernels. Each mirrors torch::optim's sequence of tensor operations
// element by element (same operations, same order, fp32), so results agree
// with it. `target_clones` builds an x86-64-v3 (AVX2 + FMA) and a baseline
// version; the loader picks one by the CPU's feature flags. (It was
// "arch=haswell", which the resolver matches by processor model: AMD and
// newer Intel CPUs got the baseline clone, whose std::fma is a libm call per
// element, 8-10x slower.)
#define HARMONY_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))

struct SgdArgs {
  float lr, weight_decay, momentum, dampening_complement;
  bool nesterov, first;
};

HARMONY_KERNEL void SgdKernel(float* __restrict p, const float* __restrict g,
                              float* __restrict buf, int64_t n, SgdArgs a) {
  // The arithmetic of torch.optim.SGD, rounding for rounding: its
  // `x.add_(y, alpha=a)` is one fused multiply-add, fma(y, a, x) (ATen's
  // vectorised add), and `buf.mul_(m)` rounds before the add.
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (a.weight_decay != 0.0f) d = std::fma(p[i], a.weight_decay, d);
    if (a.momentum != 0.0f) {
      if (a.first) {
        buf[i] = d;
      } else {
        const float decayed = buf[i] * a.momentum;
        buf[i] = std::fma(d, a.dampening_complement, decayed);
      }
      d = a.nesterov ? std::fma(buf[i], a.momentum, d) : buf[i];
    }
    p[i] = std::fma(d, -a.lr, p[i]);
  }
}

struct AdamArgs {
  float beta1, beta2, one_minus_beta1, one_minus_beta2;
  float sqrt_bias_correction2, epsilon, step_size, weight_decay, decay_factor;
  bool decoupled;
};

HARMONY_KERNEL void AdamKernel(float* __restrict p, const float* __restrict g,
                               float* __restrict m, float* __restrict v, int64_t n,
                               AdamArgs a) {
  for (int64_t i = 0; i < n; ++i) {
    // torch.optim.Adam / AdamW's arithmetic, rounding for rounding:
    // add_(x, alpha) is a fused multiply-add, mul_ rounds first, addcmul
    // fuses its last multiply with the add (fma(value * t1, t2, self): GCC
    // contracts ATen's kernel), addcdiv computes self + value * t1 / t2.
    float param = p[i];
    if (a.decoupled) param = param * a.decay_factor;
    float grad = g[i];
    if (!a.decoupled && a.weight_decay != 0.0f) grad = std::fma(param, a.weight_decay, grad);
    const float decayed_m = m[i] * a.beta1;
    const float mi = std::fma(grad, a.one_minus_beta1, decayed_m);
    const float decayed_v = v[i] * a.beta2;
    const float vi = std::fma(a.one_minus_beta2 * grad, grad, decayed_v);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / a.sqrt_bias_correction2 + a.epsilon;
    p[i] = param + (-a.step_size) * mi / denom;
  }
}

}  // namespace

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view text) {
  if (text == "sgd") return OptimizerKind::kSgd;
  if (text == "adam") return OptimizerKind::kAdam;
  if (text == "adamw") return OptimizerKind::kAdamW;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", text, "\" (expected sgd, adam or adamw)"));
}

size_t StateBytesPerElement(const OptimizerOptions& o) {
  if (o.kind == OptimizerKind::kSgd) return o.momentum != 0 ? 4 : 0;
  return 8;
}

absl::StatusOr<std::unique_ptr<CpuOptimizer>> CpuOptimizer::Create(
    const OptimizerOptions& o, size_t elements) {
  if (!(o.learning_rate >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the learning rate must be >= 0, got ", o.learning_rate));
  }
  if (!(o.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the weight decay must be >= 0, got ", o.weight_decay));
  }
  if (o.kind == OptimizerKind::kSgd) {
    if (!(o.momentum >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the momentum must be >= 0, got ", o.momentum));
    }
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
      return absl::InvalidArgumentError(
          "Nesterov momentum needs a momentum and zero dampening");
    }
  } else {
    for (double beta : {o.beta1, o.beta2}) {
      if (!(beta >= 0 && beta < 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("betas must be in [0, 1), got ", beta));
      }
    }
    if (!(o.epsilon >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("epsilon must be >= 0, got ", o.epsilon));
    }
  }
  return std::unique_ptr<CpuOptimizer>(new CpuOptimizer(o, elements));
}

CpuOptimizer::CpuOptimizer(const OptimizerOptions& options, size_t elements)
    : options_(options),
      elements_(elements),
      learning_rate_(options.learning_rate),
      state_(elements * StateBytesPerElement(options) / sizeof(float), 0.0f) {}

std::vector<std::string> CpuOptimizer::state_names() const {
  if (state_.empty()) return {};
  if (options_.kind == OptimizerKind::kSgd) return {"momentum_buffer"};
  return {"exp_avg", "exp_avg_sq"};
}

void CpuOptimizer::SetNoDecay(std::vector<std::pair<size_t, size_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  no_decay_ = std::move(ranges);
}

void CpuOptimizer::Step(float* params, const float* grads) {
  ++steps_;
  const double decay = options_.weight_decay;
  if (no_decay_.empty() || decay == 0) {
    StepRange(params, grads, 0, elements_, decay);
    return;
  }
  size_t at = 0;
  for (const auto& [begin, end] : no_decay_) {
    if (begin > at) StepRange(params, grads, at, begin, decay);
    if (end > begin) StepRange(params, grads, begin, end, 0.0);
    at = std::max(at, end);
  }
  if (at < elements_) StepRange(params, grads, at, elements_, decay);
}

void CpuOptimizer::StepRange(float* params, const float* grads, size_t first, size_t last,
                             double weight_decay) {
  const int64_t n = static_cast<int64_t>(last - first);
  if (n <= 0) return;
  const OptimizerOptions& o = options_;
  const double lr = learning_rate_;
  params += first;
  grads += first;
  if (o.kind == OptimizerKind::kSgd) {
    SgdArgs a{static_cast<float>(lr), static_cast<float>(weight_decay),
              static_cast<float>(o.momentum), static_cast<float>(1 - o.dampening),
              o.nesterov, steps_ == 1};
    float* buf = state_.empty() ? nullptr : state_.data() + first;
    at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      SgdKernel(params + begin, grads + begin, buf == nullptr ? nullptr : buf + begin,
                end - begin, a);
    });
    return;
  }
  const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(steps_));
  const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(steps_));
  const bool decoupled = o.kind == OptimizerKind::kAdamW;
  AdamArgs a{static_cast<float>(o.beta1),
             static_cast<float>(o.beta2),
             static_cast<float>(1 - o.beta1),
             static_cast<float>(1 - o.beta2),
             static_cast<float>(std::sqrt(bias_correction2)),
             static_cast<float>(o.epsilon),
             static_cast<float>(lr / bias_correction1),
             static_cast<float>(weight_decay),
             static_cast<float>(1 - lr * weight_decay),
             decoupled};
  float* m = state_.data() + first;
  float* v = state_.data() + elements_ + first;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    AdamKernel(params + begin, grads + begin, m + begin, v + begin, end - begin, a);
  });
}

}  // namespace harmony::optim
