// The training recipe's choices beyond the optimizer (docs/DESIGN.md §6.8):
// how gradient clipping meets the overlapped updates, and which parameters
// take no weight decay. Parsed from flags by harmony-exec run and
// harmony-ctl submit alike.
//
// Thread-safety: plain values and pure functions.

#ifndef HARMONY_EXECUTOR_RUNTIME_RECIPE_H_
#define HARMONY_EXECUTOR_RUNTIME_RECIPE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "optim/cpu_optimizer.h"
#include "optim/lr_schedule.h"

namespace harmony::executor {

// How updates that come before the global gradient norm is known proceed
// (executor/runtime/host_updates.h): step speculatively and redo when
// clipping fires, or hold until every backward is done. kAuto: speculate,
// and hold after an iteration that clipped when the plan says a redo costs
// more than holding.
enum class ClipMode { kAuto, kSpeculate, kHold };

// "auto", "speculate", "hold"; InvalidArgument naming --clip-mode otherwise.
absl::StatusOr<ClipMode> ParseClipMode(absl::string_view text);
const char* ClipModeName(ClipMode mode);

// The parameters without weight decay (AdamW's usual second group).
struct NoDecayRule {
  bool one_dimensional = false;  // Biases, norm weights: every parameter of <= 1 dimension.
  bool embeddings = false;       // The weights of nn.Embedding and nn.EmbeddingBag.
  // Shell patterns (fnmatch, `*` crossing dots) over a parameter's qualified
  // name or any of its dotted tails: "ln_*" matches "h.0.ln_1.weight".
  std::vector<std::string> patterns;

  bool any() const { return one_dimensional || embeddings || !patterns.empty(); }
  // Whether a parameter so named, of `dims` dimensions, in an embedding
  // module or not, takes no decay.
  bool Matches(const std::string& name, int64_t dims, bool in_embedding) const;
  // "1-D, embeddings, ln_*" for logs; "none".
  std::string ToString() const;
};

// --no-decay's value: "auto" (every <= 1-D parameter), patterns separated
// by commas, or both ("auto,wte.*"); `embeddings` adds
// --no-decay-embeddings. InvalidArgument naming --no-decay for an empty
// pattern.
absl::StatusOr<NoDecayRule> ParseNoDecay(absl::string_view text, bool embeddings);

// What a run trains with beyond the optimizer's constants: the same in
// harmony-exec run, daemon jobs (stored in their records) and checkpoints.
struct TrainingRecipe {
  // The learning rate of each iteration: the optimizer's scaled by this
  // schedule (optim/lr_schedule.h; constant by default). Its
  // total_iterations is the run's --iterations.
  optim::LrSchedule lr_schedule;
  // > 0: the gradients' global 2-norm is clipped to this before each step,
  // as torch.nn.utils.clip_grad_norm_ does (executor/runtime/host_updates.h).
  double clip_grad_norm = 0;
  ClipMode clip_mode = ClipMode::kAuto;
  // Parameters that take no weight decay (the optimizer's second group):
  // --no-decay's text and --no-decay-embeddings.
  std::string no_decay;
  bool no_decay_embeddings = false;
  // Validation (executor/runtime/evaluation.h): a data file of the training
  // data's form, evaluated after every `eval_every` iterations (0: only at
  // the end) on `eval_iterations` minibatches (0: as many whole minibatches
  // as it holds, at least 1). Empty: no validation.
  std::string eval_data;
  int64_t eval_every = 0;
  int64_t eval_iterations = 0;

  // Whether to evaluate after iteration `done` (counted from 1) of `total`.
  bool EvalDue(int64_t done, int64_t total) const {
    return !eval_data.empty() && (done == total || (eval_every > 0 && done % eval_every == 0));
  }
};

// The recipe and the optimizer checked together, the schedule resolved for
// a run of `iterations`: InvalidArgument naming the flag for a non-finite or
// negative value (--lr, --momentum, --weight-decay, --beta1, --beta2, --eps,
// --min-lr, --clip-grad-norm, ...) or inconsistent ones (warm-up longer than
// the decay, --min-lr above --lr, --eval-every or --eval-iterations without
// --eval-data).
absl::Status ResolveRecipe(const optim::OptimizerOptions& optimizer, int64_t iterations,
                           TrainingRecipe& recipe);

// "cosine lr 0.0006, warm-up 100, ...; clip 1 (speculate); no decay: 1-D" for
// logs.
std::string DescribeRecipe(const optim::OptimizerOptions& optimizer, const TrainingRecipe& r);

// "val.pt, 2 minibatches each time, after every 50 iterations and at the
// end" for logs; "" without validation.
std::string DescribeEvaluation(const TrainingRecipe& r);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_RECIPE_H_
