// The search's retries of candidates that do not fit by what waits on the
// host link: a task's sends to the host bounded (Config::
// host_outputs_pending) and its host inputs copied in fewer microbatches
// ahead (Config::inputs_ahead), the most that fits.

#include <tuple>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "planner/search/search.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

SearchOptions Options(int devices, uint64_t memory, int minibatch) {
  SearchOptions o;
  o.num_devices = devices;
  o.device_memory = memory;
  o.minibatch = minibatch;
  return o;
}

// A large minibatch in one pass on a slow link: unbounded, a task's sends
// to the host pile up on the device over its many microbatches and no
// Harmony candidate fits; the search tries them again with the sends held
// for plan::kHostOutputsPending microbatches, and plans Harmony so.
TEST(SearchTest, OnePassAtALargeMinibatchFitsWithItsHostSendsBounded) {
  FakeProfileOptions f;
  f.layers = 8;
  f.activation_bytes = 64 << 10;
  f.bandwidth = 1e8;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  SearchOptions o = Options(2, 6u << 20, 256);
  o.waves = 1;
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Config& c = r->graph.config;
  ASSERT_EQ(c.schedule, Schedule::kHarmony);
  EXPECT_EQ(c.waves, 1);
  EXPECT_EQ(c.host_outputs_pending, plan::kHostOutputsPending);
  EXPECT_TRUE(r->sim.fits);
  EXPECT_LT(r->sim.host_outputs_pending, plan::kHostOutputsPending);
  EXPECT_TRUE(ValidateTaskGraph(*m, r->graph).ok());
  // Unbounded, the same plan does not fit.
  Config free = c;
  free.host_outputs_pending = 0;
  absl::StatusOr<SimResult> unbounded = Simulate(*m, *BuildTaskGraph(*m, free));
  ASSERT_TRUE(unbounded.ok()) << unbounded.status();
  EXPECT_FALSE(unbounded->fits);
  EXPECT_GE(unbounded->host_outputs_pending, plan::kHostOutputsPending);
  // With room for them, the faster unbounded plan wins.
  o.device_memory = 8u << 20;
  absl::StatusOr<SearchResult> roomy = SearchSchedule(*m, o);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_EQ(roomy->graph.config.host_outputs_pending, 0);
  EXPECT_LT(roomy->sim.iteration_s, r->sim.iteration_s);
}

// Where a candidate does not fit with its host inputs copied in 4
// microbatches ahead, by no more than 3 microbatches' inputs, the search
// tries it with 3, 2 and 1 (plan::kFewerInputsAhead): on 5.25 MiB the plan
// that needs 5.75 MiB fits with 1, faster than what fits otherwise.
TEST(SearchTest, FewerInputsAheadWhereOnlyThatFits) {
  FakeProfileOptions f;
  f.layers = 8;
  f.activation_bytes = 256 << 10;
  f.forward_s_per_sample = 5e-3;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, Options(1, 5376u << 10, 32));
  ASSERT_TRUE(r.ok()) << r.status();
  const Config& c = r->graph.config;
  EXPECT_EQ(c.schedule, Schedule::kHarmony);
  EXPECT_EQ(c.inputs_ahead, plan::kFewerInputsAhead);
  EXPECT_TRUE(r->sim.fits);
  EXPECT_TRUE(ValidateTaskGraph(*m, r->graph).ok());
  Config four = c;
  four.inputs_ahead = 0;
  absl::StatusOr<SimResult> more = Simulate(*m, *BuildTaskGraph(*m, four));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_FALSE(more->fits);
  EXPECT_GT(more->device_peak[0], r->sim.device_peak[0]);
  // On a little less (4.75 MiB) only a slower plan fits.
  absl::StatusOr<SearchResult> less = SearchSchedule(*m, Options(1, 4864u << 10, 32));
  ASSERT_TRUE(less.ok()) << less.status();
  EXPECT_GT(less->sim.iteration_s, r->sim.iteration_s);
}

// Between 4 and 1, the most inputs ahead that fits: on a slow link (100
// MB/s, 1 MiB of weights per vLayer), with 1 ahead a pack's last stashes
// are asked for after the next pack's weights and wait behind them on the
// link (plan::kInputsAhead). On 6.5 MiB the search copies them in 2 ahead,
// 5% faster than 1; on 6.75 MiB 3 ahead, 11% faster; 4 fits neither.
TEST(SearchTest, TheMostInputsAheadThatFits) {
  FakeProfileOptions f;
  f.layers = 8;
  f.activation_bytes = 256 << 10;
  f.forward_s_per_sample = 2e-3;
  f.bandwidth = 1e8;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  auto simulate = [&](Config c, int ahead) {
    c.inputs_ahead = ahead;
    absl::StatusOr<SimResult> r = Simulate(*m, *BuildTaskGraph(*m, c));
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  };
  for (const auto& [kib, ahead, faster] : {std::tuple{6656, 2, 1.04}, std::tuple{6912, 3, 1.1}}) {
    absl::StatusOr<SearchResult> r = SearchSchedule(*m, Options(1, uint64_t(kib) << 10, 32));
    ASSERT_TRUE(r.ok()) << r.status();
    const Config& c = r->graph.config;
    EXPECT_EQ(c.schedule, Schedule::kHarmony);
    EXPECT_EQ(c.inputs_ahead, ahead) << kib << " KiB";
    EXPECT_TRUE(r->sim.fits);
    EXPECT_TRUE(ValidateTaskGraph(*m, r->graph).ok());
    EXPECT_GT(simulate(c, 1).iteration_s, faster * r->sim.iteration_s) << kib << " KiB";
    for (int more = ahead + 1; more <= plan::kInputsAhead; ++more) {
      EXPECT_FALSE(simulate(c, more).fits) << kib << " KiB, " << more << " ahead";
    }
  }
}

}  // namespace
}  // namespace harmony::planner
