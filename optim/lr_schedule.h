// Learning-rate schedules (docs/DESIGN.md §6.8): the rate of each iteration,
// a function of the iteration alone, so a resumed run continues where it
// stopped. Evaluated on the host once per iteration.
//
// The rate of iteration i (0-based; iteration i's update uses it) is
// lr x factor(i), as torch.optim.lr_scheduler.LambdaLR computes it
// (base_lr * lambda(step), in double), with W = warmup_iterations,
// D = decay_iterations, m = min_lr / lr:
//
//   warm-up (i < W):  factor = (i + 1) / W
//   constant:         factor = 1
//   cosine:           r = (i - W) / (D - W), capped at 1;
//                     factor = m + (1 - m) * (0.5 * (1 + cos(pi * r)))
//   linear:           factor = m + (1 - m) * (1 - r)
//   wsd (warm-up, stable, decay; T = total iterations):
//                     factor = 1 until T - D, then
//                     r = (i - (T - D)) / D; factor = m + (1 - m) * (1 - r)
//
// For cosine and linear D counts from the start of training (the decay ends
// at iteration D, as nanoGPT's lr_decay_iters); after it the factor is m.
// For wsd D is the length of the final decay.
//
// Thread-safety: plain values and pure functions.

#ifndef HARMONY_OPTIM_LR_SCHEDULE_H_
#define HARMONY_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::optim {

enum class ScheduleKind { kConstant, kCosine, kLinear, kWsd };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::kConstant;
  int64_t warmup_iterations = 0;
  // Cosine, linear: the iteration the decay ends at (0: the run's last);
  // wsd: the length of the final decay (0: 20% of the run).
  int64_t decay_iterations = 0;
  double min_lr = 0;
  // The run's total iterations (wsd's decay ends there; the default D).
  int64_t total_iterations = 0;

  bool operator==(const LrSchedule& o) const;
  bool operator!=(const LrSchedule& o) const { return !(*this == o); }
};

// "constant", "cosine", "linear", "wsd"; InvalidArgument quoting anything
// else.
absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view text);
const char* ScheduleKindName(ScheduleKind kind);

// The schedule with its defaults filled in (decay_iterations), or
// InvalidArgument naming the flag (--lr, --min-lr, --warmup-iterations,
// --decay-iterations) for a non-finite or negative value or inconsistent
// ones: warm-up longer than the decay, a min_lr above lr.
absl::StatusOr<LrSchedule> ResolveSchedule(LrSchedule schedule, double lr);

// lr x factor(iteration), as above. `schedule` resolved.
double LearningRateAt(const LrSchedule& schedule, double lr, int64_t iteration);

// "cosine: warm-up 100, decay to 3e-05 by iteration 2000", for logs.
std::string DescribeSchedule(const LrSchedule& schedule, double lr);

}  // namespace harmony::optim

#endif  // HARMONY_OPTIM_LR_SCHEDULE_H_
