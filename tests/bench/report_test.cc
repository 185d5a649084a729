// The benchmark's statistics, charts and report, on results made up here
// (the benchmark itself runs in scripts/bench.sh, not in the test suite).

#include "tests/bench/report.h"

#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/files.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/bench/bench_util.h"
#include "tests/bench/svg_chart.h"

namespace harmony::bench {
namespace {

using nlohmann::json;

TEST(StatsTest, MedianMinMax) {
  Stats odd = Summarize({3, 1, 2});
  EXPECT_EQ(odd.median, 2);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 3);
  EXPECT_EQ(odd.runs, 3);
  EXPECT_EQ(Summarize({4, 1, 2, 3}).median, 2.5);
  EXPECT_EQ(Summarize({}).runs, 0);
}

// A timing is steady (at most 1) only within all three limits; the largest
// of its three measures says how far out it is.
TEST(SteadinessTest, EachLimitAlone) {
  EXPECT_DOUBLE_EQ(Unsteadiness(1, 0, 1), 0);
  EXPECT_DOUBLE_EQ(Unsteadiness(1, 1, 1), 0);
  EXPECT_NEAR(Unsteadiness(1 + kSteadyWithin, 1, 1), 1, 1e-12);
  EXPECT_NEAR(Unsteadiness(1 - 2 * kSteadyWithin, 1, 1), 2, 1e-12);
  EXPECT_NEAR(Unsteadiness(1, kSteadyComputeHigh, 1), 1, 1e-12);
  EXPECT_NEAR(Unsteadiness(1, kSteadyComputeLow, 1), 1, 1e-12);
  EXPECT_NEAR(Unsteadiness(1, 1, kSteadySpread), 1, 1e-12);
  // Docs/bench/intel/run12's flushed row: profiles 0.91 apart, compute 1.22,
  // iterations 1.70-2.88 s. Steady by the first two; not by the spread.
  EXPECT_LT(Unsteadiness(0.91, 1.22, 1), 1);
  EXPECT_GT(Unsteadiness(0.91, 1.22, 2.88 / 1.70), 2);
  // The largest measure wins, not their sum.
  EXPECT_NEAR(Unsteadiness(1 + kSteadyWithin / 2, 1, 1 + (kSteadySpread - 1) / 2), 0.5, 1e-12);
}

TEST(SvgChartTest, OneBarPerValueAndGapsForNaN) {
  BarChart c;
  c.title = "a < b";
  c.categories = {"x", "y"};
  c.series = {{"s1", {1, 10}}, {"s2", {100, std::numeric_limits<double>::quiet_NaN()}}};
  c.log_scale = true;
  c.reference = 1;
  const std::string svg = DrawBarChart(c);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b"), std::string::npos);  // Escaped.
  size_t bars = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) {
    ++bars;
  }
  EXPECT_EQ(bars, 3u);
}

json MadeRun(const std::string& schedule, bool emulated, double bytes, double rate, double sim_error) {
  return {{"schedule", schedule},
          {"emulated", emulated},
          {"backward_microbatch", 4},
          {"swap_bytes", {{"host_link", bytes}, {"weights_in", bytes / 2}, {"gradients_out", 0}}},
          {"samples_per_s", {{"median", rate}, {"min", rate}, {"max", rate}, {"runs", 3}}},
          {"iteration_s", {{"median", 1.0}, {"min", 1.0}, {"max", 1.0}, {"runs", 3}}},
          {"simulated_s", 1 + sim_error},
          {"simulator_error", sim_error}};
}

// A configuration of `model` (a zoo family) on 2 devices, without runs.
json MadeConfig(const std::string& model, int depth, int minibatch, int vlayers) {
  return {{"model", model},
          {"zoo", {{"family", model}, {"depth", depth}, {"width", 32}, {"seq_len", 8},
                   {"image_size", 16}}},
          {"devices", 2},
          {"minibatch", minibatch},
          {"device_memory", 1 << 20},
          {"weight_bytes", 1000},
          {"vlayers", vlayers},
          {"lower_bound_bytes", 500}};
}

// Results holding `config` and `checks`.
json MadeResults(const json& config, const json& checks) {
  return {{"machine", {{"cores", 2}, {"memory_bytes", 1 << 30}}},
          {"runs", 3},
          {"link_balance", {{"gemm_flop_per_s", 2e10}, {"flop_per_byte", 880},
                            {"emulated_link_bytes_per_s", 2e10 / 880}}},
          {"schedules", {{"configs", json::array({config})}}},
          {"checks", checks}};
}

TEST(ReportTest, RatiosComeFromTheResults) {
  json config = MadeConfig("gpt", 12, 16, 16);
  config["runs"] = {MadeRun("harmony", false, 1000, 30, 0.1), MadeRun("ondemand", false, 4000, 10, -0.2),
                    MadeRun("gpipe", false, 2000, 15, 0.0),   MadeRun("dp-swap", false, 3000, 20, 0.0),
                    MadeRun("harmony", true, 1000, 8, 0.1),   MadeRun("ondemand", true, 4000, 2, 0.0),
                    MadeRun("gpipe", true, 2000, 4, 0.0),     MadeRun("dp-swap", true, 3000, 4, 0.0)};
  json results = MadeResults(
      config, json::array({json{{"name", "c1"}, {"ok", true}, {"detail", ""}},
                           json{{"name", "c2"}, {"ok", false}, {"detail", "off"}}}));
  // Compute measured over profiled: 2 devices computed 2.5 s in all where
  // the profile planned 1.0 s each.
  config["runs"][4]["compute_s"] = 2.5;
  config["runs"][4]["planned_compute_s"] = 1.0;
  // Simulated again at that speed: 1.2 s against the measured 1 s.
  config["runs"][4]["simulated_at_measured_compute_s"] = 1.2;
  config["runs"][4]["simulator_error_at_measured_compute"] = 0.2;
  // At its slowest device's speed +5%; its devices waited for each other
  // 6.1% of their time.
  config["runs"][4]["simulator_error_at_slowest_device"] = 0.05;
  config["runs"][4]["peer_wait_share"] = 0.061;
  // Profiled again around the run: 0.95 s simulated, the run's
  // compute 1.04x those times, the profile after it 1.03x the one before;
  // on-demand's -8%, its profile after 1.40x the one before (unsteady).
  // Harmony's was timed again after a first timing 1.30x apart; on-demand's
  // three times, the second kept (the others 1.50x and 0.55x apart).
  config["runs"][4]["retimed"] = {{"simulated_s", 0.95}, {"simulator_error", -0.05},
                                  {"compute_ratio", 1.04}, {"planned_compute_s", 1.2},
                                  {"after_vs_before", 1.03}, {"kept_timing", 1}};
  config["runs"][4]["retimed"]["timings"] = {{{"after_vs_before", 1.3}, {"median_s", 1.2}},
                                             {{"after_vs_before", 1.03}, {"median_s", 1.0}}};
  config["runs"][5]["retimed"] = {{"simulated_s", 0.92}, {"simulator_error", -0.08},
                                  {"compute_ratio", 0.98}, {"planned_compute_s", 1.0},
                                  {"after_vs_before", 1.4}, {"kept_timing", 1}};
  config["runs"][5]["retimed"]["timings"] = {{{"after_vs_before", 1.5}, {"median_s", 1.1}},
                                             {{"after_vs_before", 1.4}, {"median_s", 1.0}},
                                             {{"after_vs_before", 0.55}, {"median_s", 0.9}}};
  results["schedules"]["configs"][0] = config;
  const std::string headline = Headline(results);
  EXPECT_NE(headline.find("compute per device was 1.25x the profile's"), std::string::npos)
      << headline;
  EXPECT_NE(headline.find("ondemand 4.0x"), std::string::npos) << headline;
  EXPECT_NE(headline.find("2.0x the lower bound"), std::string::npos) << headline;
  EXPECT_NE(headline.find("ondemand 3.0x"), std::string::npos) << headline;  // 30 / 10.
  EXPECT_NE(headline.find("ondemand 4.0x, gpipe 2.0x, dp-swap 2.0x"), std::string::npos)
      << headline;  // Emulated: 8/2, 8/4, 8/4.

  char dir[] = "/tmp/report_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_TRUE(WriteReport(results, dir).ok());
  auto md = common::ReadFileToString(std::string(dir) + "/REPORT.md");
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("1 passed, 1 failed"), std::string::npos);
  EXPECT_NE(md->find("- c2: off"), std::string::npos);
  EXPECT_NE(md->find("**emulated**"), std::string::npos);
  EXPECT_NE(md->find("+10%"), std::string::npos);  // Harmony's simulator error.
  // Emulated Harmony.
  EXPECT_NE(md->find("| +10% | 1.25 | 950.0 ms (-5%; after ÷ before 1.03; timing 2 of 2) | "
                     "1.04 | +20% (1.20 s) (+5%) | 6.1% |"),
            std::string::npos)
      << *md;
  EXPECT_NE(md->find("| +10% | n/a | n/a | n/a | n/a |"), std::string::npos) << *md;  // None.
  EXPECT_NE(md->find("| ondemand | 1.00 s | 1.00 s | +0% | n/a | 920.0 ms (-8%; after ÷ before "
                     "1.40, **unsteady**; timing 2 of 3) | 0.98 | n/a |"),
            std::string::npos)
      << *md;
  EXPECT_NE(headline.find("2 of 2 runs timed again, the profiles around them more than 15% "
                          "apart, the run's compute outside 0.80-1.25x their times or its "
                          "slowest iteration over 1.30x its fastest (up to 3 timings, the "
                          "steadiest kept)"),
            std::string::npos)
      << headline;
  // The unsteady run is left out of the median of those the machine held
  // its speed through.
  EXPECT_NE(headline.find("in the runs the machine's speed held through (the profiles before "
                          "and after within 15% of each other), 1 of 2 emulated: median "
                          "|error| 5% (Harmony's 5%)"),
            std::string::npos)
      << headline;
  EXPECT_NE(headline.find("profiled again at the plan's sizes around each run: median "
                          "|error| 6% (5%–8%) emulated (Harmony's 5%), the runtime's compute "
                          "1.01x (0.98x–1.04x) those times"),
            std::string::npos)
      << headline;
  EXPECT_NE(headline.find("simulated again at the compute speed each run measured: median "
                          "|error| 20% emulated"),
            std::string::npos)
      << headline;
  EXPECT_NE(headline.find("at the speed of each run's slowest device: median |error| 5% "
                          "emulated (Harmony's 5%), Harmony's devices waiting for each other "
                          "6.1% of their time"),
            std::string::npos)
      << headline;
  EXPECT_TRUE(common::ReadFileToString(std::string(dir) + "/swap_bytes_gpt.svg").ok());
  EXPECT_TRUE(common::ReadFileToString(std::string(dir) + "/speedup_emulated.svg").ok());
}

// The full form runs with the emulated link only: bytes (a property of the
// plan) then come from the emulated runs, and the headline leaves out the
// link mode that has no runs instead of printing "n/a".
TEST(ReportTest, EmulatedOnlyResultsStillShowBytes) {
  json config = MadeConfig("vgg", 32, 64, 98);
  json harmony = MadeRun("harmony", true, 1000, 8, 0.1);
  harmony["swap_bytes"]["peer"] = 2048;  // Weights copied from device 0.
  config["runs"] = {harmony, MadeRun("ondemand", true, 5000, 2, 0.0),
                    MadeRun("gpipe", true, 2000, 4, 0.0), MadeRun("dp-swap", true, 3000, 4, 0.0)};
  json results = MadeResults(config, json::array());
  const std::string headline = Headline(results);
  EXPECT_NE(headline.find("ondemand 5.0x, gpipe 2.0x, dp-swap 3.0x"), std::string::npos)
      << headline;
  EXPECT_NE(headline.find("2.0x the lower bound"), std::string::npos) << headline;
  EXPECT_EQ(headline.find("no link emulation"), std::string::npos) << headline;
  EXPECT_EQ(headline.find("n/a"), std::string::npos) << headline;
  char dir[] = "/tmp/report_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_TRUE(WriteReport(results, dir).ok());
  auto md = common::ReadFileToString(std::string(dir) + "/REPORT.md");
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("| 2 | 64 | 1000 B (u=4), +2.00 KiB device to device | 4.88 KiB (u=4)"),
            std::string::npos)
      << *md;
}

// The large minibatch run again in one pass (results.json
// "harmony_one_pass"): its own row in the bounds table, and its weight and
// gradient ratio against on-demand in the headline.
TEST(ReportTest, OnePassRowBesideTheSearchsWaves) {
  json config = MadeConfig("gpt", 26, 256, 30);
  config["bound_s"] = 0.5;
  json harmony = MadeRun("harmony", true, 1000, 8, 0.1);
  harmony["plan_bound_s"] = 0.8;
  harmony["waves"] = 4;
  harmony["activations"] = {"recompute"};
  json one_pass = MadeRun("harmony", true, 1200, 8, -0.05);
  one_pass["swap_bytes"]["weights_in"] = 100;  // On-demand's: 2500.
  one_pass["iteration_s"]["median"] = 0.25;
  one_pass["plan_bound_s"] = 0.2;
  one_pass["one_pass"] = true;
  one_pass["activations"] = {"recompute"};
  config["runs"] = {harmony, MadeRun("ondemand", true, 5000, 2, 0.0)};
  config["harmony_one_pass"] = one_pass;
  json results = MadeResults(config, json::array());
  const std::string headline = Headline(results);
  EXPECT_NE(headline.find("in one pass 25.0x (samples/s 4.00x on-demand's)"), std::string::npos)
      << headline;
  char dir[] = "/tmp/report_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_TRUE(WriteReport(results, dir).ok());
  auto md = common::ReadFileToString(std::string(dir) + "/REPORT.md");
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find(", in one pass | 250.0 ms | 500.0 ms (0.50x) | 200.0 ms (1.25x) | -5% | "
                     "0 of 1 keep | 25.0x |"),
            std::string::npos)
      << *md;
  EXPECT_NE(md->find("| +10% | 0 of 1 keep, 4 waves | 5.0x |"), std::string::npos) << *md;
}

// The large minibatch again on smaller devices (results.json
// "smaller_devices"): its rows name their device memory, in the swap table
// under the model's heading (which names the main configs') and wherever a
// configuration is named.
TEST(ReportTest, SmallerDevicesRowsNameTheirMemory) {
  json main = MadeConfig("gpt", 26, 256, 30);
  main["runs"] = {MadeRun("harmony", true, 1000, 8, 0.1), MadeRun("ondemand", true, 5000, 2, 0.0)};
  json smaller = main;
  smaller["device_memory"] = 3 << 18;  // 768 KiB.
  smaller["smaller_devices"] = true;
  smaller["runs"] = {MadeRun("harmony", true, 1000, 7, 0.1),
                     MadeRun("ondemand", true, 9000, 1, 0.0)};
  json results = MadeResults(main, json::array());
  results["schedules"]["configs"].push_back(smaller);
  char dir[] = "/tmp/report_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_TRUE(WriteReport(results, dir).ok());
  auto md = common::ReadFileToString(std::string(dir) + "/REPORT.md");
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("devices of 1.00 MiB)"), std::string::npos) << *md;  // The heading.
  EXPECT_NE(md->find("| 2 | 256 | 1000 B (u=4)"), std::string::npos) << *md;
  EXPECT_NE(md->find("| 2 of 768.00 KiB | 256 | 1000 B (u=4) | 8.79 KiB (u=4)"),
            std::string::npos)
      << *md;
  EXPECT_NE(md->find("| gpt N=2 D=256 on 768.00 KiB | **emulated** | 7.0"), std::string::npos)
      << *md;
  EXPECT_NE(md->find("| 7.00x |"), std::string::npos) << *md;  // 7 / 1 samples/s.
  auto svg = common::ReadFileToString(std::string(dir) + "/swap_bytes_gpt.svg");
  ASSERT_TRUE(svg.ok());
  EXPECT_NE(svg->find("N=2 D=256 on 768.00 KiB"), std::string::npos);
  // Weights in: 500 B against on-demand's 4500 B (no gradients counted here).
  const std::string headline = Headline(results);
  EXPECT_NE(headline.find("(gpt N=2 D=256 on 768.00 KiB 9.0x (samples/s 1.00x on-demand's))"),
            std::string::npos)
      << headline;
}

// The denormal section: both policies in one table, and the policy the
// run computed under in the machine line.
TEST(ReportTest, DenormalsBothWays) {
  json config = MadeConfig("vgg", 32, 64, 98);
  config["runs"] = {MadeRun("harmony", true, 1000, 8, 0.1)};
  json results = MadeResults(config, json::array());
  results["flush_denormal"] = true;
  auto run = [](bool flush, double measured, double simulated, double ratio, double plain) {
    return json{{"flush_denormal", flush},
                {"iteration_s", {{"median", measured}, {"min", measured}, {"max", measured},
                                 {"runs", 3}}},
                {"simulated_s", simulated},
                {"simulator_error", (simulated - measured) / measured},
                {"compute_ratio", ratio},
                {"retimed", {{"simulated_s", simulated * 1.1}, {"simulator_error", 0.05},
                             {"compute_ratio", 0.97}}},
                {"plain_loop_iteration_s",
                 {{"median", plain}, {"min", plain}, {"max", plain}, {"runs", 3}}}};
  };
  results["denormals"] = {{"model", "vgg"}, {"devices", 2}, {"minibatch", 64},
                          {"cpu_model", "Intel Xeon"},
                          {"runs", json::array({run(false, 4.0, 3.6, 1.1, 6.8),
                                                run(true, 1.0, 0.95, 1.02, 0.7)})}};
  results["denormals"]["runs"][0]["simulator_error_at_measured_compute"] = -0.03;
  char dir[] = "/tmp/report_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_TRUE(WriteReport(results, dir).ok());
  auto md = common::ReadFileToString(std::string(dir) + "/REPORT.md");
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("Denormal floats flushed to zero on every thread"), std::string::npos) << *md;
  EXPECT_NE(md->find("## Denormal numbers"), std::string::npos) << *md;
  EXPECT_NE(md->find("on Intel Xeon"), std::string::npos) << *md;
  EXPECT_NE(md->find("| computed | 4.00 s"), std::string::npos) << *md;
  // At the run's own compute speed where recorded, else n/a.
  EXPECT_NE(md->find("| -10% | 1.10x | 3.96 s (+5%) | 0.97 | -3% | 6.80 s"), std::string::npos)
      << *md;
  EXPECT_NE(md->find("| 0.97 | n/a | 700.0 ms"), std::string::npos) << *md;
  EXPECT_NE(md->find("| flushed | 1.00 s"), std::string::npos) << *md;
}

// The headline counts the rows within the accuracy bar in each of the three
// readings and names those that missed: Harmony's limit is tighter than the
// baselines', and a run that computed outside 0.80-1.25x the profile's
// misses whatever its error.
TEST(ReportTest, AccuracyBarCountsRowsAndNamesTheMisses) {
  json config = MadeConfig("vgg", 32, 64, 98);
  config["runs"] = {MadeRun("harmony", true, 1000, 8, 0.27),
                    MadeRun("ondemand", true, 4000, 2, -0.18),
                    MadeRun("gpipe", true, 2000, 4, -0.22)};
  auto compute = [&](int i, double ratio) {
    config["runs"][i]["compute_s"] = 2 * ratio;  // 2 devices.
    config["runs"][i]["planned_compute_s"] = 1.0;
  };
  compute(0, 0.78);  // The machine faster than profiled: out of the bar at +27%.
  compute(1, 1.0);   // A baseline 18% off: within its 20%.
  compute(2, 1.1);   // 22% off: out.
  // Profiled around the runs: Harmony -14% at 1.06 (in), gpipe -12% at
  // 1.30 (the run computed outside the range: out).
  config["runs"][0]["retimed"] = {{"simulator_error", -0.14}, {"compute_ratio", 1.06}};
  config["runs"][2]["retimed"] = {{"simulator_error", -0.12}, {"compute_ratio", 1.30}};
  // At its own compute speed: Harmony -9%; on-demand +21% (out).
  config["runs"][0]["simulator_error_at_measured_compute"] = -0.09;
  config["runs"][1]["simulator_error_at_measured_compute"] = 0.21;
  // In one pass, 16% off: within a baseline's limit, not Harmony's.
  config["harmony_one_pass"] = MadeRun("harmony", true, 900, 7, 0.16);
  config["harmony_one_pass"]["compute_s"] = 2.0;
  config["harmony_one_pass"]["planned_compute_s"] = 1.0;
  json results = MadeResults(config, json::array());
  results["denormals"] = {
      {"runs", json::array({json{{"flush_denormal", false}, {"simulator_error", -0.09},
                                 {"compute_ratio", 1.09}},
                            json{{"flush_denormal", true}, {"simulator_error", 0.02},
                                 {"compute_ratio", 0.79}}})}};
  const std::string headline = Headline(results);
  EXPECT_NE(headline.find(
                "- **Accuracy bar** (the runtime's compute 0.80-1.25x the profile's and the "
                "simulated iteration within ±15% of the measured for Harmony, ±20% for the "
                "baselines): against the profile the plans were made from, 2 of 6 rows (missed: "
                "vgg N=2 D=64 harmony +27% at compute 0.78x; vgg N=2 D=64 gpipe -22% at compute "
                "1.10x; vgg N=2 D=64 harmony in one pass +16% at compute 1.00x; denormals "
                "flushed +2% at compute 0.79x); against the profiles taken right before and "
                "after each run, 1 of 2 rows (missed: vgg N=2 D=64 gpipe -12% at compute 1.30x); "
                "at each run's own compute speed, 1 of 2 rows (missed: vgg N=2 D=64 ondemand "
                "+21%).\n"),
            std::string::npos)
      << headline;
  // Without timed rows there is no line.
  results.erase("schedules");
  results.erase("denormals");
  EXPECT_EQ(Headline(results).find("Accuracy bar"), std::string::npos);
}

}  // namespace
}  // namespace harmony::bench
