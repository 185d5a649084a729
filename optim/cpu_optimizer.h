// The CPU optimizer (docs/DESIGN.md §6): SGD (momentum, dampening, Nesterov,
// weight decay), Adam and AdamW over one flat fp32 buffer of parameters, its
// gradients and its state, fused into one pass per element, vectorised
// (compiled for x86-64-v3, AVX2 + FMA, and baseline x86-64, chosen at run
// time by the CPU's feature flags) and split over
// LibTorch's intra-op threads. It follows torch::optim's arithmetic, so the
// results match it to about 1e-7 relative.
//
// Usage: one CpuOptimizer per flat buffer (a vLayer's parameters, say);
// Step() once per iteration with that buffer's summed gradients.
//
// Thread-safety: thread-compatible. Step() uses intra-op threads itself;
// different optimizers may step from different threads at once.

#ifndef HARMONY_OPTIM_CPU_OPTIMIZER_H_
#define HARMONY_OPTIM_CPU_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::optim {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double learning_rate = 0.01;
  double weight_decay = 0;  // L2 for SGD and Adam; decoupled for AdamW.
  // SGD.
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  // Adam, AdamW.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// "sgd", "adam", "adamw"; InvalidArgument quoting anything else.
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view text);

// Bytes of state per parameter element: 4 for SGD with momentum, 8 for Adam
// and AdamW, 0 for plain SGD.
size_t StateBytesPerElement(const OptimizerOptions& options);

class CpuOptimizer {
 public:
  // InvalidArgument for options torch::optim would refuse (negative rates,
  // betas outside [0, 1), Nesterov without momentum or with dampening).
  static absl::StatusOr<std::unique_ptr<CpuOptimizer>> Create(
      const OptimizerOptions& options, size_t elements);

  // One step: updates `params` (borrowed, `elements` floats) from `grads`.
  void Step(float* params, const float* grads);

  // The learning rate of the next steps (a schedule's; initially the
  // options').
  void set_learning_rate(double lr) { learning_rate_ = lr; }
  double learning_rate() const { return learning_rate_; }
  // Elements in these [begin, end) ranges take no weight decay (AdamW's
  // no-decay parameter group: biases, norm weights). Ranges within
  // [0, elements), not overlapping.
  void SetNoDecay(std::vector<std::pair<size_t, size_t>> ranges);

  size_t elements() const { return elements_; }
  int64_t steps() const { return steps_; }
  const OptimizerOptions& options() const { return options_; }
  // The state, for checkpoints: momentum, or exp_avg then exp_avg_sq.
  std::vector<float>& state() { return state_; }
  const std::vector<float>& state() const { return state_; }
  // Names of the state's parts per element, in order, as torch.optim names
  // them: {"momentum_buffer"}, {"exp_avg", "exp_avg_sq"} or none.
  std::vector<std::string> state_names() const;
  // For a resumed run: the steps taken before (Adam's bias correction, SGD's
  // first momentum step).
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  CpuOptimizer(const OptimizerOptions& options, size_t elements);

  // One pass over [begin, end) with `weight_decay`.
  void StepRange(float* params, const float* grads, size_t begin, size_t end,
                 double weight_decay);

  const OptimizerOptions options_;
  const size_t elements_;
  double learning_rate_;
  int64_t steps_ = 0;
  std::vector<float> state_;
  std::vector<std::pair<size_t, size_t>> no_decay_;  // Sorted.
};

}  // namespace harmony::optim

#endif  // HARMONY_OPTIM_CPU_OPTIMIZER_H_
