#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace harmony::optim {

bool LrSchedule::operator==(const LrSchedule& o) const {
  return kind == o.kind && warmup_iterations == o.warmup_iterations &&
         decay_iterations == o.decay_iterations && min_lr == o.min_lr &&
         total_iterations == o.total_iterations;
}

absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view text) {
  if (text == "constant") return ScheduleKind::kConstant;
  if (text == "cosine") return ScheduleKind::kCosine;
  if (text == "linear") return ScheduleKind::kLinear;
  if (text == "wsd") return ScheduleKind::kWsd;
  return absl::InvalidArgumentError(absl::StrCat(
      "--lr-schedule: unknown schedule \"", text, "\" (expected constant, cosine, linear or wsd)"));
}

const char* ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kCosine: return "cosine";
    case ScheduleKind::kLinear: return "linear";
    case ScheduleKind::kWsd: return "wsd";
    default: return "constant";
  }
}

absl::StatusOr<LrSchedule> ResolveSchedule(LrSchedule s, double lr) {
  if (!std::isfinite(lr) || lr < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr must be a finite number >= 0, got ", lr));
  }
  if (!std::isfinite(s.min_lr) || s.min_lr < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-lr must be a finite number >= 0, got ", s.min_lr));
  }
  if (s.min_lr > lr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min-lr ", s.min_lr, " is above --lr ", lr, ": the floor must be below"));
  }
  if (s.warmup_iterations < 0 || s.decay_iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--warmup-iterations and --decay-iterations must be >= 0, got ", s.warmup_iterations,
        " and ", s.decay_iterations));
  }
  const int64_t total = s.total_iterations;
  switch (s.kind) {
    case ScheduleKind::kConstant:
      if (s.decay_iterations > 0 || s.min_lr > 0) {
        return absl::InvalidArgumentError(
            "--decay-iterations and --min-lr need a decaying --lr-schedule (cosine, linear or "
            "wsd)");
      }
      break;
    case ScheduleKind::kCosine:
    case ScheduleKind::kLinear:
      if (s.decay_iterations == 0) s.decay_iterations = total;
      if (s.decay_iterations <= s.warmup_iterations) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--warmup-iterations ", s.warmup_iterations, " must be below --decay-iterations ",
            s.decay_iterations, " (the iteration the decay ends at",
            total > 0 ? absl::StrCat("; default: --iterations ", total) : "", ")"));
      }
      break;
    case ScheduleKind::kWsd:
      if (total < 1) {
        return absl::InvalidArgumentError("--lr-schedule wsd needs the run's --iterations");
      }
      if (s.decay_iterations == 0) s.decay_iterations = std::max<int64_t>(1, total / 5);
      if (s.warmup_iterations + s.decay_iterations > total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--warmup-iterations ", s.warmup_iterations, " + --decay-iterations ",
            s.decay_iterations, " exceed --iterations ", total,
            " (wsd warms up, holds, then decays over the last --decay-iterations)"));
      }
      break;
  }
  return s;
}

double LearningRateAt(const LrSchedule& s, double lr, int64_t i) {
  // The same operations in the same order as the reference loop's lambda
  // (tests/suite/reference_train.py), so the rates agree to the bit.
  double factor = 1.0;
  const double m = lr > 0 ? s.min_lr / lr : 0.0;
  if (i < s.warmup_iterations) {
    factor = static_cast<double>(i + 1) / static_cast<double>(s.warmup_iterations);
  } else if (s.kind == ScheduleKind::kCosine || s.kind == ScheduleKind::kLinear) {
    const double r = std::min(1.0, static_cast<double>(i - s.warmup_iterations) /
                                       static_cast<double>(s.decay_iterations -
                                                           s.warmup_iterations));
    factor = s.kind == ScheduleKind::kCosine ? m + (1.0 - m) * (0.5 * (1.0 + std::cos(M_PI * r)))
                                             : m + (1.0 - m) * (1.0 - r);
  } else if (s.kind == ScheduleKind::kWsd) {
    const int64_t decay_start = s.total_iterations - s.decay_iterations;
    if (i >= decay_start) {
      const double r = std::min(1.0, static_cast<double>(i - decay_start) /
                                         static_cast<double>(s.decay_iterations));
      factor = m + (1.0 - m) * (1.0 - r);
    }
  }
  return lr * factor;
}

std::string DescribeSchedule(const LrSchedule& s, double lr) {
  std::string out = absl::StrCat(ScheduleKindName(s.kind), " lr ", lr);
  if (s.warmup_iterations > 0) absl::StrAppend(&out, ", warm-up ", s.warmup_iterations);
  if (s.kind == ScheduleKind::kCosine || s.kind == ScheduleKind::kLinear) {
    absl::StrAppend(&out, ", decay to ", s.min_lr, " by iteration ", s.decay_iterations);
  } else if (s.kind == ScheduleKind::kWsd) {
    absl::StrAppend(&out, ", decay to ", s.min_lr, " over the last ", s.decay_iterations);
  }
  return out;
}

}  // namespace harmony::optim
