#include "executor/runtime/metrics.h"

#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

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
  EXPECT_TRUE(m.device_compute_s.empty());  // Not counted apart before Reset(devices).
  c.Reset(2);
  c.Fill(m);
  EXPECT_EQ(m.bytes.to_device(), 0u);
  EXPECT_EQ(m.compute_s, 0);
  EXPECT_EQ(m.device_compute_s, (std::vector<double>{0, 0}));
  // Each device's compute apart, their sum in compute_s; the waits for
  // other devices also in the wait.
  c.AddCompute(0, 1.0);
  c.AddCompute(1, 0.5);
  c.AddCompute(1, 0.25);
  c.AddCompute(2, 9.0);  // No such device: in the sum only.
  IterationCounters::AddSeconds(c.wait_ns, 0.5);
  IterationCounters::AddSeconds(c.peer_wait_ns, 0.125);
  c.Fill(m);
  EXPECT_DOUBLE_EQ(m.compute_s, 10.75);
  ASSERT_EQ(m.device_compute_s.size(), 2u);
  EXPECT_DOUBLE_EQ(m.device_compute_s[0], 1.0);
  EXPECT_DOUBLE_EQ(m.device_compute_s[1], 0.75);
  EXPECT_DOUBLE_EQ(m.peer_wait_s, 0.125);
  c.Reset(2);
  c.Fill(m);
  EXPECT_EQ(m.device_compute_s, (std::vector<double>{0, 0}));
  EXPECT_EQ(m.peer_wait_s, 0);
}

IterationMetrics Balance(std::vector<double> devices, double peer_wait, double wait) {
  IterationMetrics m;
  m.device_compute_s = devices;
  for (double d : devices) m.compute_s += d;
  m.peer_wait_s = peer_wait;
  m.swap_wait_s = wait;
  return m;
}

TEST(MetricsTest, DeviceBalance) {
  // The first iteration is left out; the medians of the rest: the slowest
  // over the mean 1.2 / 1.0, 1.1 / 1.0, 1.0 / 1.0; waits 0.2 of 2.2,
  // 0.1 of 2.1 (and its 0.1 swap wait), 0 of 2.0.
  const IterationBalance one = BalanceOf(Balance({1.2, 0.8}, 0.2, 0.2));
  EXPECT_DOUBLE_EQ(one.slowest_over_mean, 1.2);
  EXPECT_NEAR(one.peer_wait_share, 0.2 / 2.2, 1e-12);
  BalanceCheck b = CheckDeviceBalance(
      {BalanceOf(Balance({5.0, 1.0}, 3.0, 3.0)), one, BalanceOf(Balance({1.1, 0.9}, 0.1, 0.1)),
       BalanceOf(Balance({1.0, 1.0}, 0, 0))});
  EXPECT_DOUBLE_EQ(b.slowest_over_mean, 1.1);
  EXPECT_NEAR(b.peer_wait_share, 0.1 / 2.1, 1e-12);
  EXPECT_NE(b.text.find("the slowest device computed 1.10x the devices' mean"), std::string::npos)
      << b.text;
  EXPECT_NE(b.text.find("waited for each other 4.8% of their time (medians of 3;"),
            std::string::npos)
      << b.text;
  // One device: nothing to balance.
  EXPECT_EQ(BalanceOf(Balance({1.0}, 0, 0)).slowest_over_mean, 0);
  EXPECT_TRUE(CheckDeviceBalance({BalanceOf(Balance({1.0}, 0, 0)), BalanceOf(Balance({1.0}, 0, 0))})
                  .text.empty());
  EXPECT_TRUE(CheckDeviceBalance({}).text.empty());
}

IterationMetrics Late(int64_t copies, double in, double in_max, double out, double out_max) {
  IterationMetrics m;
  m.emulated_link = true;
  m.to_device_copies = copies;
  m.to_host_copies = copies;
  m.to_device_late_s = in;
  m.to_device_late_max_s = in_max;
  m.to_host_late_s = out;
  m.to_host_late_max_s = out_max;
  return m;
}

TEST(MetricsTest, LinkLateness) {
  // The first iteration is left out; the medians of the rest, each figure
  // its own.
  LinkLateness c = CheckLinkLateness({LatenessOf(Late(5, 9, 9, 9, 9)),
                                      LatenessOf(Late(50, 0.300, 0.0010, 0.140, 0.0009)),
                                      LatenessOf(Late(60, 0.290, 0.0020, 0.150, 0.0007)),
                                      LatenessOf(Late(70, 0.310, 0.0005, 0.145, 0.0008))});
  EXPECT_EQ(c.copies, 120);
  EXPECT_DOUBLE_EQ(c.in_s, 0.300);
  EXPECT_DOUBLE_EQ(c.in_max_s, 0.0010);
  EXPECT_DOUBLE_EQ(c.out_s, 0.145);
  EXPECT_DOUBLE_EQ(c.out_max_s, 0.0008);
  EXPECT_NE(c.text.find("its 120 copies per iteration came back 300.0 ms late in all going in "
                        "(the latest 1.00 ms), 145.0 ms going out (0.80 ms) (medians of 3)"),
            std::string::npos)
      << c.text;
  // Not emulated: nothing to say, whatever the fields.
  IterationMetrics real = Late(5, 1, 1, 1, 1);
  real.emulated_link = false;
  EXPECT_EQ(LatenessOf(real).copies, 0);
  EXPECT_TRUE(CheckLinkLateness({LatenessOf(real), LatenessOf(real)}).text.empty());
  EXPECT_TRUE(CheckLinkLateness({}).text.empty());
  // metrics.jsonl carries them when emulated, and only then.
  const nlohmann::json j = nlohmann::json::parse(MetricsJson(Late(7, 0.25, 0.01, 0.5, 0.02)));
  EXPECT_EQ(j["host_link"]["to_device_copies"], 7);
  EXPECT_DOUBLE_EQ(j["host_link"]["to_host_late_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["host_link"]["to_host_late_max_s"].get<double>(), 0.02);
  EXPECT_FALSE(nlohmann::json::parse(MetricsJson(real))["host_link"].contains("to_device_late_s"));
}

// The host's sums of gradients: counted by the threads that send them,
// read out per iteration and written to metrics.jsonl.
TEST(MetricsTest, HostSumsAreCountedAndWritten) {
  IterationCounters c;
  c.Reset(2);
  IterationCounters::AddSeconds(c.host_sum_ns, 0.25);
  IterationCounters::AddSeconds(c.host_sum_ns, 0.5);
  c.host_sum_early += 4096;
  IterationMetrics m;
  c.Fill(m);
  EXPECT_DOUBLE_EQ(m.host_sum_s, 0.75);
  EXPECT_EQ(m.host_sum_early_bytes, 4096u);
  const nlohmann::json j = nlohmann::json::parse(MetricsJson(m));
  EXPECT_DOUBLE_EQ(j["host_sums"]["seconds"].get<double>(), 0.75);
  EXPECT_EQ(j["host_sums"]["early_bytes"], 4096);
  c.Reset(2);
  c.Fill(m);
  EXPECT_EQ(m.host_sum_s, 0);
  EXPECT_EQ(m.host_sum_early_bytes, 0u);
}

}  // namespace
}  // namespace harmony::executor
