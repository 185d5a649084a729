// The schedules' formulas (optim/lr_schedule.h) and the refusals of
// inconsistent settings.

#include "optim/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace harmony::optim {
namespace {

LrSchedule Make(ScheduleKind kind, int64_t warmup, int64_t decay, double min_lr, int64_t total) {
  LrSchedule s;
  s.kind = kind;
  s.warmup_iterations = warmup;
  s.decay_iterations = decay;
  s.min_lr = min_lr;
  s.total_iterations = total;
  absl::StatusOr<LrSchedule> r = ResolveSchedule(s, 1.0);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : s;
}

TEST(LrScheduleTest, WarmupThenCosineToTheFloor) {
  const LrSchedule s = Make(ScheduleKind::kCosine, 4, 14, 0.1, 20);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2.0, 0), 0.5);   // (0 + 1) / 4 of 2.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2.0, 3), 2.0);   // The warm-up's end.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2.0, 4), 2.0);   // r = 0: the peak.
  EXPECT_NEAR(LearningRateAt(s, 2.0, 9), 0.1 + (2.0 - 0.1) * 0.5, 1e-12);  // r = 1/2.
  EXPECT_NEAR(LearningRateAt(s, 2.0, 14), 0.1, 1e-12);  // The floor from D on.
  EXPECT_NEAR(LearningRateAt(s, 2.0, 19), 0.1, 1e-12);
}

TEST(LrScheduleTest, LinearAndWsd) {
  const LrSchedule linear = Make(ScheduleKind::kLinear, 0, 10, 0.0, 10);
  EXPECT_DOUBLE_EQ(LearningRateAt(linear, 1.0, 0), 1.0);
  EXPECT_NEAR(LearningRateAt(linear, 1.0, 5), 0.5, 1e-12);
  // wsd: warm-up 2, hold, then the last 4 of 12 decay linearly.
  const LrSchedule wsd = Make(ScheduleKind::kWsd, 2, 4, 0.0, 12);
  EXPECT_DOUBLE_EQ(LearningRateAt(wsd, 1.0, 0), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(wsd, 1.0, 7), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(wsd, 1.0, 8), 1.0);
  EXPECT_NEAR(LearningRateAt(wsd, 1.0, 10), 0.5, 1e-12);
  EXPECT_NEAR(LearningRateAt(wsd, 1.0, 11), 0.25, 1e-12);
}

TEST(LrScheduleTest, DefaultsFollowTheRun) {
  const LrSchedule cosine = Make(ScheduleKind::kCosine, 0, 0, 0.0, 50);
  EXPECT_EQ(cosine.decay_iterations, 50);
  const LrSchedule wsd = Make(ScheduleKind::kWsd, 0, 0, 0.0, 50);
  EXPECT_EQ(wsd.decay_iterations, 10);  // The last 20%.
  const LrSchedule constant = Make(ScheduleKind::kConstant, 3, 0, 0.0, 50);
  EXPECT_DOUBLE_EQ(LearningRateAt(constant, 1.0, 1), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(constant, 1.0, 40), 1.0);
}

TEST(LrScheduleTest, RefusesInconsistentSettingsNamingTheFlag) {
  auto error = [](LrSchedule s, double lr) {
    absl::StatusOr<LrSchedule> r = ResolveSchedule(s, lr);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  LrSchedule s;
  EXPECT_NE(error(s, INFINITY).find("--lr"), std::string::npos);
  EXPECT_NE(error(s, -1).find("--lr"), std::string::npos);
  EXPECT_NE(error(s, NAN).find("--lr"), std::string::npos);
  s.kind = ScheduleKind::kCosine;
  s.min_lr = 0.5;
  s.total_iterations = 10;
  EXPECT_NE(error(s, 0.1).find("--min-lr"), std::string::npos);
  s.min_lr = 0;
  s.warmup_iterations = 10;
  EXPECT_NE(error(s, 0.1).find("--warmup-iterations 10 must be below --decay-iterations 10"),
            std::string::npos);
  s.kind = ScheduleKind::kWsd;
  s.warmup_iterations = 6;
  s.decay_iterations = 5;
  EXPECT_NE(error(s, 0.1).find("exceed --iterations 10"), std::string::npos);
  EXPECT_FALSE(ParseScheduleKind("cosin").ok());
}

}  // namespace
}  // namespace harmony::optim
