// The host's update thread (docs/DESIGN.md §6.8): steps each pack's
// optimizer in the plan's update order as soon as the backward tasks whose
// gradients it applies are done, at the iteration's learning rate (the
// schedule's), with global gradient-norm clipping when asked.
//
// Clipping is exact: the result equals a plain loop that calls
// torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) before
// optimizer.step(), as PyTorch 1.13 computes it: the 2-norm of each
// parameter's gradient (torch.norm), the 2-norm of those in parameters()
// order (a tied parameter once), coef = reciprocal(norm + 1e-6) * max_norm
// in fp32 (Tensor.__rtruediv__), clamped at 1, every gradient multiplied by
// it. Each vLayer's norms are computed as soon as its gradients are final.
// The total is not known until the last backward is done, so an update
// that comes earlier either
//   - speculates (ClipMode::kSpeculate): keeps the vLayer's master weights,
//     optimizer state and step count (HostStore::SaveForRedo) and steps on
//     the unclipped gradients, overlapping the devices' backward as without
//     clipping; once the norm is known and clipping fires (coef < 1), every
//     speculated vLayer is restored and stepped again on its clipped
//     gradients (the saved values, not an algebraic inverse: bit for bit);
//     when it does not fire, the speculative step is the step (coef 1
//     multiplies by 1). Which updates speculate is the plan's: every one
//     it does not order after the whole backward (through the tasks'
//     dependencies and each device's order), however the threads' timing
//     falls;
//   - or holds (ClipMode::kHold): waits for every backward task, then steps
//     every vLayer once, clipped.
// kAuto speculates, except where the whole backward happens to be done
// when the update comes (a late host thread learns the norm first); when
// the plan's simulation says a redo costs more than holding
// (Estimates.clip_speculate_fires_s > clip_hold_s), it holds in the
// iteration after one that clipped (clipping tends to fire in runs of
// iterations: early in training, after a spike) and speculates again after
// one that did not. Every mode gives the same result.
//
// Thread-safety: confined to the thread that drives the runtime (it runs
// the updates while the devices' threads run their tasks); it waits on
// TaskCompletion for the devices' progress.

#ifndef HARMONY_EXECUTOR_RUNTIME_HOST_UPDATES_H_
#define HARMONY_EXECUTOR_RUNTIME_HOST_UPDATES_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/runtime/host_link.h"
#include "executor/runtime/host_store.h"
#include "executor/runtime/metrics.h"
#include "executor/runtime/recipe.h"
#include "executor/runtime/task_completion.h"
#include "executor/runtime/trace.h"
#include "executor/runtime/world.h"
#include "optim/lr_schedule.h"
#include "plan/task_graph.h"

namespace harmony::executor {

struct UpdateRecipe {
  double learning_rate = 0.01;  // The base rate the schedule scales.
  optim::LrSchedule schedule;   // Resolved (optim::ResolveSchedule).
  double clip_grad_norm = 0;    // > 0: clip the global 2-norm to it.
  // kSpeculate, kHold, or kAuto: speculate, hold after an iteration that
  // clipped when `hold_after_clipping`.
  ClipMode clip_mode = ClipMode::kSpeculate;
  bool hold_after_clipping = true;  // kAuto: the plan says a redo costs more than holding.
  // Intra-op threads the norms are computed on (some reductions round
  // differently at another count): a device's, as the reference loop's.
  int norm_threads = 1;
};

class HostUpdates {
 public:
  // `host` and `graph` are borrowed and outlive it. `parameter_order`: the
  // canonical names of the model's parameters in parameters() order (a tied
  // one once); Internal naming a parameter of the host store it lacks.
  static absl::StatusOr<std::unique_ptr<HostUpdates>> Create(
      const plan::TaskGraph& graph, HostStore& host, std::vector<std::string> parameter_order,
      const UpdateRecipe& recipe);

  // The iteration's updates, in the plan's order, each after its backward
  // tasks (and those of its shared parameters' later readers) are done.
  // Fills the metrics' learning rate, optimizer seconds and clipping fields.
  // Returns the first error (a failed collective; Cancelled when a device
  // failed); the caller stops the iteration.
  absl::Status Run(int64_t iteration, const World& world, TaskCompletion& completion,
                   const HostLink& clock, TraceRecorder& tracer, IterationCounters& counters,
                   IterationMetrics& out);

  const UpdateRecipe& recipe() const { return recipe_; }

 private:
  HostUpdates(const plan::TaskGraph& graph, HostStore& host, const UpdateRecipe& recipe)
      : graph_(graph), host_(host), recipe_(recipe) {}

  // vLayer k's gradients final (Finalize) and their norms recorded.
  absl::Status Finalize(int k, const World& world);
  // The clipping factor from the norms recorded (all of them).
  absl::Status ComputeCoefficient();

  const plan::TaskGraph& graph_;
  HostStore& host_;
  const UpdateRecipe recipe_;
  std::map<int, std::vector<int>> deps_;  // Update task -> tasks it waits for.
  std::vector<int> backward_tasks_;
  std::set<int> after_every_backward_;  // Update tasks the plan orders after every backward.
  std::map<std::string, int> parameter_index_;  // Canonical name -> parameters() position.
  // Per iteration (clipping).
  std::vector<at::Tensor> norms_;  // By parameters() position.
  std::vector<bool> finalized_;    // By vLayer.
  at::Tensor total_norm_, coef_;
  bool fires_ = false;  // coef_ < 1 (or not a number).
  bool fired_before_ = false;  // In the previous iteration (kAuto).
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_HOST_UPDATES_H_
