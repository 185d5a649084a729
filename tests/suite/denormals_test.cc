// Denormal numbers computed, not flushed: the profile times what the
// runtime will compute. deep_convs (tests/suite/make_suite.py) is a 40-layer
// plain conv stack whose backward makes denormal gradients (its generator
// checks that over 10,000 of its parameter gradients are denormal after one
// backward, flushing off). On CPUs slow at denormals (an Intel Xeon: 5-7x
// in the bench's vgg) a profile timed on values that are not denormal
// predicted a fraction of the runtime's compute; harmony-plan now times
// each backward on the model's own gradients, under the plan's policy.
//
// Times are compared here, against the bound, because this is the
// check: the test runs alone (tagged exclusive), the plan and the training
// seconds apart; on an AMD EPYC the ratio was 1.01-1.30 over 5 runs.

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::RunCommand;

const char kPlan[] = "planner/harmony-plan";
const char kExec[] = "executor/harmony-exec";

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// One plan (profiled with flushing off) and 6 iterations of it: the median
// of the runtime's compute per iteration, after the first, over the plan's
// (the profile's for the same tasks), and harmony-exec's output. 0 after a
// failed expectation.
struct Measured {
  double ratio = 0;
  std::string output;
};
Measured ComputeOverProfile(const std::string& model, const std::string& data, int attempt) {
  const std::string plan_path = Tmp(absl::StrCat("dc", attempt, ".pb"));
  const std::string json_path = Tmp(absl::StrCat("dc", attempt, ".json"));
  const std::string metrics_path = Tmp(absl::StrCat("dc", attempt, ".metrics.jsonl"));
  auto planned = RunCommand(absl::StrCat(
      kPlan, " ", model, " --sample-input ", data,
      " --gpus 2 --device-memory 6MiB --minibatch 16 --flush-denormal off -o ", plan_path,
      " --json ", json_path));
  EXPECT_EQ(planned.exit_code, 0) << planned.output;
  absl::StatusOr<std::string> text = common::ReadFileToString(json_path);
  EXPECT_TRUE(text.ok()) << text.status();
  if (planned.exit_code != 0 || !text.ok()) return {};
  const nlohmann::json plan = nlohmann::json::parse(*text);
  EXPECT_EQ(plan["profile"]["flush_denormal"], false);
  EXPECT_FALSE(plan["profile"]["cpu_model"].get<std::string>().empty());
  const double planned_compute = plan["estimates"]["compute_s"].get<double>();
  EXPECT_GT(planned_compute, 0);
  EXPECT_NE(planned.output.find("device compute "), std::string::npos) << planned.output;

  auto trained = RunCommand(absl::StrCat(kExec, " run ", plan_path, " --model ", model,
                                         " --data ", data,
                                         " --iterations 6 --devices cpu:2x6MiB --metrics ",
                                         metrics_path));
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  // The plan's policy, by default.
  EXPECT_NE(trained.output.find("denormals computed"), std::string::npos) << trained.output;
  // harmony-exec says what it measured.
  EXPECT_NE(trained.output.find("device compute per iteration: "), std::string::npos)
      << trained.output;
  text = common::ReadFileToString(metrics_path);
  EXPECT_TRUE(text.ok()) << text.status();
  if (trained.exit_code != 0 || !text.ok() || planned_compute <= 0) return {};
  std::vector<double> compute;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) compute.push_back(nlohmann::json::parse(line)["compute_s"].get<double>());
  }
  EXPECT_EQ(compute.size(), 6u);
  if (compute.size() < 2) return {};
  compute.erase(compute.begin());  // The first iteration warms up.
  std::sort(compute.begin(), compute.end());
  const double ratio = compute[compute.size() / 2] / planned_compute;
  std::cout << "attempt " << attempt << ": the runtime's compute is " << ratio
            << "x the profile's\n"
            << trained.output;
  return {ratio, trained.output};
}

TEST(DenormalsTest, RuntimeComputesAtTheProfilesSpeedWithDenormalGradients) {
  const std::string model = "tests/suite/deep_convs.pt";
  const std::string data = "tests/suite/deep_convs_data.pt";
  // The runtime's compute over its 41 vLayers' forwards and backwards,
  // against the profile's for the same tasks, within 1.5x. A slow path the
  // profile missed is so on every attempt (5-7x on an Intel Xeon); this
  // VM's speed swings by up to 1.6x between the profile and the run seconds
  // later (an AMD EPYC, AVX2 only: 1.61 once, in CI), so a second plan and
  // run are made when the first is out of bounds, and it must be within.
  Measured m = ComputeOverProfile(model, data, 1);
  ASSERT_GT(m.ratio, 0);
  if (m.ratio > 1.5 || m.ratio < 1 / 1.5) {
    std::cout << "out of bounds: planning and training again\n";
    m = ComputeOverProfile(model, data, 2);
    ASSERT_GT(m.ratio, 0);
  }
  EXPECT_LE(m.ratio, 1.5) << m.output;
  EXPECT_GE(m.ratio, 1 / 1.5) << m.output;
  // Within bounds, harmony-exec does not warn of another speed.
  EXPECT_EQ(m.output.find("warning: the devices computed at"), std::string::npos) << m.output;
}

}  // namespace
}  // namespace harmony
