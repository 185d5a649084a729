#include "planner/plan/resimulate.h"

#include <limits>

#include "gtest/gtest.h"
#include "planner/plan/make_plan.h"
#include "planner/plan/plan_builder.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

MadePlan PlanFor(double bandwidth) {
  FakeProfileOptions f;
  f.layers = 8;
  f.bandwidth = bandwidth;
  MakePlanOptions o;
  o.num_devices = 2;
  o.device_memory = 64u << 20;
  o.minibatch = 32;
  absl::StatusOr<MadePlan> made = MakePlan(MakeFakeProfile(f), o);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : MadePlan{};
}

TEST(ResimulateTest, AtScaleOneItIsThePlansOwnSimulation) {
  const MadePlan made = PlanFor(2e8);
  absl::StatusOr<Resimulated> again = ResimulatePlan(made.plan, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->sim.iteration_s, made.result.sim.iteration_s);
  EXPECT_EQ(again->sim.swap.host_link(), made.result.sim.swap.host_link());
  EXPECT_EQ(again->graph.config.minibatch, 32);
}

// On a link that costs nothing the iteration is the devices' compute and the
// host's updates: twice the compute, nearly twice the iteration.
TEST(ResimulateTest, ComputeScaleSlowsAComputeBoundPlan) {
  const MadePlan made = PlanFor(1e15);
  ResimulateOptions o;
  absl::StatusOr<Resimulated> base = ResimulatePlan(made.plan, o);
  ASSERT_TRUE(base.ok()) << base.status();
  o.compute_scale = 2;
  absl::StatusOr<Resimulated> slow = ResimulatePlan(made.plan, o);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_GT(slow->sim.iteration_s, 1.5 * base->sim.iteration_s);
  EXPECT_LE(slow->sim.iteration_s, 2.0 * base->sim.iteration_s * (1 + 1e-9));
  // The bytes are the plan's whatever the speed.
  EXPECT_EQ(slow->sim.swap.host_link(), base->sim.swap.host_link());
}

TEST(ResimulateTest, ScalesDeviceTimesNotTheHostsUpdates) {
  FakeProfileOptions f;
  f.layers = 2;
  proto::ProfileFile p = MakeFakeProfile(f);
  const proto::ProfileFile before = p;
  ScaleComputeTimes(p, 3);
  const auto& a = before.profile().vlayers(1);
  const auto& b = p.profile().vlayers(1);
  ASSERT_GT(a.by_microbatch_size(), 0);
  EXPECT_DOUBLE_EQ(b.by_microbatch(0).forward_time_s(), 3 * a.by_microbatch(0).forward_time_s());
  EXPECT_DOUBLE_EQ(b.by_microbatch(0).backward_time_s(),
                   3 * a.by_microbatch(0).backward_time_s());
  EXPECT_DOUBLE_EQ(b.update_time_s(), a.update_time_s());
}

TEST(ResimulateTest, RefusesAScaleThatIsNotAPositiveFactor) {
  const MadePlan made = PlanFor(2e8);
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    ResimulateOptions o;
    o.compute_scale = bad;
    absl::StatusOr<Resimulated> r = ResimulatePlan(made.plan, o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("compute scale"), std::string::npos) << r.status();
  }
}

// Times from a profile of the same model twice as slow: the simulation of
// compute_scale 2, every row taken.
TEST(ResimulateTest, TimesFromAnotherProfileReplaceThePlans) {
  const MadePlan made = PlanFor(1e15);
  proto::ProfileFile slower = ProfileOfPlan(made.plan);
  slower.mutable_model()->set_sha256("abc");
  proto::Plan plan = made.plan;
  plan.mutable_model()->set_sha256("abc");
  ScaleComputeTimes(slower, 2);
  ResimulateOptions o;
  o.compute_scale = 2;
  absl::StatusOr<Resimulated> scaled = ResimulatePlan(plan, o);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  ResimulateOptions t;
  t.times_from = &slower;
  absl::StatusOr<Resimulated> taken = ResimulatePlan(plan, t);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->sim.iteration_s, scaled->sim.iteration_s);
  EXPECT_EQ(taken->device_compute_s, scaled->device_compute_s);
  absl::StatusOr<Resimulated> base = ResimulatePlan(plan, {});
  ASSERT_TRUE(base.ok());
  EXPECT_NEAR(taken->device_compute_s, 2 * base->device_compute_s,
              1e-12 * base->device_compute_s);
  // At the plan's own times: the compute its estimates say.
  EXPECT_NEAR(base->device_compute_s, plan.estimates().compute_s(),
              1e-9 * plan.estimates().compute_s());

  proto::ProfileFile mine = ProfileOfPlan(plan);
  absl::StatusOr<ReplacedTimes> r = ReplaceComputeTimes(mine, slower);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->ratio, 2);
  EXPECT_EQ(r->rows_scaled, 0);
  EXPECT_GT(r->rows_taken, 0);
  // Simulated with the times' step hand-offs: each compute starts that
  // much later, and the devices' compute does not count it.
  proto::ProfileFile handoffs = slower;
  for (auto& v : *handoffs.mutable_profile()->mutable_vlayers()) {
    for (auto& row : *v.mutable_by_microbatch()) row.set_step_handoff_s(2e-4);
  }
  ResimulateOptions h;
  h.times_from = &handoffs;
  absl::StatusOr<Resimulated> handed = ResimulatePlan(plan, h);
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_GT(handed->sim.iteration_s, taken->sim.iteration_s);
  EXPECT_NEAR(handed->device_compute_s, taken->device_compute_s,
              1e-12 * taken->device_compute_s);
  ASSERT_FALSE(handed->sim.handoff_s.empty());
  EXPECT_GT(handed->sim.handoff_s[0], 0);
  // The times' chained factors and step hand-offs come with them.
  for (auto& v : *slower.mutable_profile()->mutable_vlayers()) {
    for (auto& row : *v.mutable_by_microbatch()) {
      row.set_backward_chained(0.75);
      row.set_step_handoff_s(2e-4);
    }
  }
  proto::ProfileFile again = ProfileOfPlan(plan);
  ASSERT_TRUE(ReplaceComputeTimes(again, slower).ok());
  EXPECT_EQ(again.profile().vlayers(0).by_microbatch(0).backward_chained(), 0.75);
  EXPECT_EQ(again.profile().vlayers(0).by_microbatch(0).step_handoff_s(), 2e-4);
}

// A profile of only some sizes (harmony-plan profile --microbatches): those
// rows taken, the others scaled by their vLayer's ratio; sizes and update
// times stay.
TEST(ResimulateTest, RowsTheTimesLackAreScaledByTheirVLayersRatio) {
  FakeProfileOptions f;
  f.layers = 3;
  proto::ProfileFile p = MakeFakeProfile(f);
  ASSERT_GT(p.profile().vlayers(0).by_microbatch_size(), 2);
  proto::ProfileFile times = p;
  ScaleComputeTimes(times, 3);
  for (auto& v : *times.mutable_profile()->mutable_vlayers()) {
    v.mutable_by_microbatch()->DeleteSubrange(1, v.by_microbatch_size() - 1);  // First only.
    v.set_update_time_s(99);
  }
  const proto::ProfileFile before = p;
  absl::StatusOr<ReplacedTimes> r = ReplaceComputeTimes(p, times);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_taken, 3);
  EXPECT_EQ(r->rows_scaled, 3 * (before.profile().vlayers(0).by_microbatch_size() - 1));
  EXPECT_NEAR(r->ratio, 3, 1e-12);
  for (int k = 0; k < 3; ++k) {
    const auto& a = before.profile().vlayers(k);
    const auto& b = p.profile().vlayers(k);
    EXPECT_EQ(b.update_time_s(), a.update_time_s());
    for (int i = 0; i < a.by_microbatch_size(); ++i) {
      EXPECT_EQ(b.by_microbatch(i).size(), a.by_microbatch(i).size());
      EXPECT_NEAR(b.by_microbatch(i).backward_time_busy_s(),
                  3 * a.by_microbatch(i).backward_time_busy_s(), 1e-15);
      EXPECT_NEAR(b.by_microbatch(i).forward_time_s(), 3 * a.by_microbatch(i).forward_time_s(),
                  1e-15);
    }
  }
}

TEST(ResimulateTest, RefusesTimesOfAnotherModelOrDecomposition) {
  FakeProfileOptions f;
  f.layers = 3;
  const proto::ProfileFile p = MakeFakeProfile(f);
  proto::ProfileFile other = p;
  other.mutable_model()->set_sha256("another");
  proto::ProfileFile mine = p;
  absl::StatusOr<ReplacedTimes> r = ReplaceComputeTimes(mine, other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("another model"), std::string::npos) << r.status();

  f.layers = 4;
  r = ReplaceComputeTimes(mine, MakeFakeProfile(f));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("4 vLayers and the plan's 3"), std::string::npos)
      << r.status();

  proto::ProfileFile none = p;
  for (auto& v : *none.mutable_profile()->mutable_vlayers()) {
    for (auto& m : *v.mutable_by_microbatch()) m.set_size(m.size() + 1000);
  }
  r = ReplaceComputeTimes(mine, none);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no microbatch size"), std::string::npos) << r.status();
}

// Two profiles around a run: each time the mean of the two at its size.
TEST(ResimulateTest, AverageComputeTimesTakesTheMeanOfTwoProfiles) {
  FakeProfileOptions f;
  f.layers = 2;
  proto::ProfileFile p = MakeFakeProfile(f);
  const proto::ProfileFile before = p;
  proto::ProfileFile slower = p;
  ScaleComputeTimes(slower, 3);
  AverageComputeTimes(p, slower);
  const auto& a = before.profile().vlayers(1).by_microbatch(0);
  const auto& b = p.profile().vlayers(1).by_microbatch(0);
  EXPECT_DOUBLE_EQ(b.forward_time_s(), 2 * a.forward_time_s());
  EXPECT_DOUBLE_EQ(b.backward_time_busy_s(), 2 * a.backward_time_busy_s());
  // Chained factors are not times: not scaled; averaged, 1 where unmeasured.
  EXPECT_EQ(b.forward_chained(), 0);
  proto::ProfileFile chained = before;
  for (auto& v : *chained.mutable_profile()->mutable_vlayers()) {
    for (auto& r : *v.mutable_by_microbatch()) {
      r.set_forward_chained(0.8);
      r.set_backward_chained(0.6);
    }
  }
  ScaleComputeTimes(chained, 3);
  EXPECT_EQ(chained.profile().vlayers(1).by_microbatch(0).forward_chained(), 0.8);
  proto::ProfileFile q = before;
  AverageComputeTimes(q, chained);
  EXPECT_DOUBLE_EQ(q.profile().vlayers(1).by_microbatch(0).forward_chained(), 0.9);
  EXPECT_DOUBLE_EQ(q.profile().vlayers(1).by_microbatch(0).backward_chained(), 0.8);
  // Step hand-offs are not compute: not scaled; the mean where both
  // measured them, the one where one did.
  proto::ProfileFile handed = before;
  for (auto& v : *handed.mutable_profile()->mutable_vlayers()) {
    for (auto& r : *v.mutable_by_microbatch()) r.set_step_handoff_s(1e-4);
  }
  ScaleComputeTimes(handed, 3);
  EXPECT_EQ(handed.profile().vlayers(1).by_microbatch(0).step_handoff_s(), 1e-4);
  proto::ProfileFile one = before;
  AverageComputeTimes(one, handed);
  EXPECT_DOUBLE_EQ(one.profile().vlayers(1).by_microbatch(0).step_handoff_s(), 1e-4);
  proto::ProfileFile both = handed;
  for (auto& v : *both.mutable_profile()->mutable_vlayers()) {
    for (auto& r : *v.mutable_by_microbatch()) r.set_step_handoff_s(3e-4);
  }
  AverageComputeTimes(both, handed);
  EXPECT_DOUBLE_EQ(both.profile().vlayers(1).by_microbatch(0).step_handoff_s(), 2e-4);
  EXPECT_EQ(p.profile().vlayers(1).update_time_s(), before.profile().vlayers(1).update_time_s());
}

}  // namespace
}  // namespace harmony::planner
