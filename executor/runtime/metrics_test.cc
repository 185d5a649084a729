#include "executor/runtime/metrics.h"

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

TEST(MetricsTest, ComputeAgainstThePlan) {
  // The first iteration (warming up) is left out; the median of the rest.
  ComputeCheck c = CheckComputeAgainstPlan({9.0, 1.1, 0.9, 1.0}, 1.0);
  EXPECT_DOUBLE_EQ(c.measured_s, 1.0);
  EXPECT_DOUBLE_EQ(c.ratio, 1.0);
  EXPECT_FALSE(c.off);
  EXPECT_NE(c.text.find("1.00x the plan's"), std::string::npos) << c.text;
  EXPECT_EQ(c.text.find("warning"), std::string::npos) << c.text;

  c = CheckComputeAgainstPlan({5.0, 5.0, 6.0}, 2.0);  // Slow: 2.75x.
  EXPECT_TRUE(c.off);
  EXPECT_NE(c.text.find("0.36x the speed"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("--flush-denormal on"), std::string::npos) << c.text;
  EXPECT_TRUE(CheckComputeAgainstPlan({1.0, 0.5}, 2.0).off);  // Fast: 0.25x.
  // On a GPU the causes are the GPU's, not denormals.
  c = CheckComputeAgainstPlan({5.0, 5.0, 6.0}, 2.0, /*gpu=*/true);
  EXPECT_TRUE(c.off);
  EXPECT_EQ(c.text.find("denormal"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("--devices"), std::string::npos) << c.text;
  EXPECT_FALSE(CheckComputeAgainstPlan({0.7}, 1.0).off);      // One iteration: kept.
  EXPECT_FALSE(CheckComputeAgainstPlan({1.7}, 1.0).off);      // Tiny tasks swing so far.

  EXPECT_TRUE(CheckComputeAgainstPlan({1.0}, 0).text.empty());  // An older plan.
  EXPECT_TRUE(CheckComputeAgainstPlan({}, 1.0).text.empty());
}

TEST(MetricsTest, CountersFillTheMetricsAndReset) {
  IterationCounters c;
  c.weights_in += 10;
  c.stash_in += 3;
  c.peer += 7;
  IterationCounters::AddSeconds(c.compute_ns, 1.5);
  IterationCounters::AddSeconds(c.compute_ns, 0.25);
  IterationCounters::AddSeconds(c.optimizer_ns, 0.5);
  IterationMetrics m;
  c.Fill(m);
  EXPECT_EQ(m.bytes.weights_in, 10u);
  EXPECT_EQ(m.bytes.stash_in, 3u);
  EXPECT_EQ(m.bytes.peer, 7u);
  EXPECT_EQ(m.bytes.to_device(), 13u);
  EXPECT_DOUBLE_EQ(m.compute_s, 1.75);
  EXPECT_DOUBLE_EQ(m.optimizer_s, 0.5);
  c.Reset();
  c.Fill(m);
  EXPECT_EQ(m.bytes.to_device(), 0u);
  EXPECT_EQ(m.compute_s, 0);
}

}  // namespace
}  // namespace harmony::executor
