// The answer the runtime's results must equal (docs/DESIGN.md §6, exactness): a
// plain LibTorch loop over the same microbatches a plan uses. For every
// minibatch it runs each microbatch forward and backward with its loss
// scaled by its share of the minibatch (size / D), accumulating gradients
// in the parameters' .grad, then takes one optimizer step.
//
// Two knobs make the comparison exact where it can be:
//   - `harmony_optimizer`: step with the runtime's CPU optimizer over the
//     same flat per-vLayer buffers (same arithmetic, so bit-identical
//     weights are possible) instead of torch::optim (within 1e-6);
//   - `vlayer_dropout`: run the plan's vLayers in plain order with the
//     runtime's random stream per (iteration, microbatch, vLayer) instead of
//     the original module (whose dropout draws one stream per step).
//
// Thread-safety: thread-compatible; mutates the module it is given.

#ifndef HARMONY_EXECUTOR_RUNTIME_REFERENCE_H_
#define HARMONY_EXECUTOR_RUNTIME_REFERENCE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "absl/status/statusor.h"
#include "common/tensor_file.h"
#include "optim/cpu_optimizer.h"
#include "proto/plan.pb.h"

namespace harmony::executor {

struct ReferenceOptions {
  optim::OptimizerOptions optimizer;
  bool harmony_optimizer = true;
  bool vlayer_dropout = false;
  uint64_t seed = 0;  // Of the dropout stream, as RuntimeOptions::seed.
  int64_t iterations = 3;
  // Where forward and backward run. On a CUDA device the master weights,
  // buffers and the optimizer stay on the host as in the runtime: each
  // iteration copies them to the device, runs the vLayers there (the
  // vlayer_dropout path, with the device's generator) and brings the
  // gradients and buffers back. Needs harmony_optimizer.
  at::Device device = at::kCPU;
  // Intra-op threads, as RuntimeOptions::threads (0: the runtime's default
  // for the plan's device count).
  int threads = 0;
  // Denormal floats flushed to zero, as RuntimeOptions::flush_denormal
  // (unset: as the plan's profile was measured).
  std::optional<bool> flush_denormal;
};

// Trains `model` (loaded from the plan's model file, in training mode) on
// `data` taken in order as the runtime takes it; returns each iteration's
// loss (the sum of the scaled microbatch losses).
absl::StatusOr<std::vector<double>> TrainReferenceForPlan(const proto::Plan& plan,
                                                          torch::jit::Module& model,
                                                          const common::TrainingData& data,
                                                          const ReferenceOptions& options);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_REFERENCE_H_
