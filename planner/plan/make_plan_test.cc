#include "planner/plan/make_plan.h"

#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

// Weights dominate the traffic (each vLayer's weights cross the link once
// per microbatch in on-demand swapping), so larger microbatches are faster;
// without a pinned microbatch a baseline runs at the fastest that fits,
// never slower than at microbatch 1.
TEST(MakePlanTest, BaselineRunsAtItsFastestMicrobatch) {
  FakeProfileOptions f;
  f.layers = 8;
  f.bandwidth = 2e8;
  const proto::ProfileFile profile = MakeFakeProfile(f);
  for (Schedule s : {Schedule::kOndemand, Schedule::kDpSwap}) {
    MakePlanOptions o;
    o.num_devices = 2;
    o.device_memory = 64u << 20;
    o.minibatch = 32;
    o.schedule = s;
    o.microbatch = 1;
    absl::StatusOr<MadePlan> one = MakePlan(profile, o);
    ASSERT_TRUE(one.ok()) << one.status();
    o.microbatch = 0;
    absl::StatusOr<MadePlan> best = MakePlan(profile, o);
    ASSERT_TRUE(best.ok()) << best.status();
    EXPECT_GT(best->result.graph.config.backward_microbatch, 1) << ScheduleName(s);
    EXPECT_TRUE(best->result.sim.fits) << ScheduleName(s);
    EXPECT_LT(best->result.sim.iteration_s, 0.5 * one->result.sim.iteration_s)
        << ScheduleName(s);
    // Pinned, it stays pinned.
    o.microbatch = 2;
    absl::StatusOr<MadePlan> two = MakePlan(profile, o);
    ASSERT_TRUE(two.ok()) << two.status();
    EXPECT_EQ(two->result.graph.config.backward_microbatch, 2) << ScheduleName(s);
  }
}

}  // namespace
}  // namespace harmony::planner
