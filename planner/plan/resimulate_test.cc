#include "planner/plan/resimulate.h"

#include <limits>

#include "gtest/gtest.h"
#include "planner/plan/make_plan.h"
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

}  // namespace
}  // namespace harmony::planner
