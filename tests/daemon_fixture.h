// The daemon tests' shared fixture (daemon_test.cc, daemon_security_test.cc):
// one model, its data, its profiles and plans made once per test binary,
// and helpers to start daemons and drive harmony-ctl against them.
//
// Thread-safety: the fixture's static members are set up before any test.

#ifndef HARMONY_TESTS_DAEMON_FIXTURE_H_
#define HARMONY_TESTS_DAEMON_FIXTURE_H_

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/script.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/files.h"
#include "common/plan_file.h"
#include "executor/client/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_process.h"
#include "tests/run_command.h"

namespace harmony::daemon_testing {

using testing::Daemon;
using testing::RunCommand;

inline constexpr char kZoo[] = "zoo/harmony-zoo";
inline constexpr char kPlan[] = "planner/harmony-plan";
inline constexpr char kExec[] = "executor/harmony-exec";
inline constexpr char kCtl[] = "executor/harmony-ctl";

// This run's own directory (testing::RunTempPath).
inline std::string Tmp(const std::string& name) { return testing::RunTempPath(name); }

inline executor::ClientOptions ClientFor(const Daemon& d) {
  executor::ClientOptions o;
  o.address = d.address();
  if (!d.token_file().empty()) {
    o.token = std::string(absl::StripAsciiWhitespace(*common::ReadFileToString(d.token_file())));
  }
  return o;
}

// harmony-ctl against `d` without its token (or with `token_file`).
inline std::string CtlAs(const Daemon& d, const std::string& args, const std::string& token_file = "") {
  return absl::StrCat(testing::kCtlBinary, " ", args, " --address ", d.address(),
                      token_file.empty() ? "" : " --token-file ", token_file);
}

class DaemonTest : public ::testing::Test {
 protected:
  // One model, its data, a profile and plans for every test.
  static void SetUpTestSuite() {
    ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 2 --width 32 --seq-len 16 --vocab 64 "
                                            "--samples 32 -o ", Tmp("g.pt"), " --data ",
                                      Tmp("g_data.pt")))
                  .exit_code,
              0);
    ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 2 --width 24 --seq-len 8 --vocab 64 "
                                            "--samples 32 -o ", Tmp("other.pt"), " --data ",
                                      Tmp("other_data.pt")))
                  .exit_code,
              0);
    auto r = RunCommand(absl::StrCat(kPlan, " profile ", Tmp("g.pt"), " --sample-input ",
                                     Tmp("g_data.pt"), " --devices cpu:2x256MiB "
                                     "--max-microbatch 8 --profile-out ", Tmp("g.profile.json")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const auto& [name, gpus, memory] :
         std::vector<std::tuple<std::string, int, std::string>>{
             {"plan2", 2, "1MiB"}, {"plan1", 1, "1MiB"}, {"plan4", 4, "1MiB"},
             {"plan_big", 2, "4MiB"}}) {
      r = RunCommand(absl::StrCat(kPlan, " ", Tmp("g.pt"), " --profile ", Tmp("g.profile.json"),
                                  " --gpus ", gpus, " --device-memory ", memory,
                                  " --minibatch 8 -o ", Tmp(name + ".pb")));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    // A bf16 plan, from a bf16 profile.
    r = RunCommand(absl::StrCat(kPlan, " profile ", Tmp("g.pt"), " --sample-input ",
                                Tmp("g_data.pt"), " --devices cpu:2x256MiB --precision bf16 "
                                "--max-microbatch 8 --repeats 1 --profile-out ",
                                Tmp("g.bf16.profile.json")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = RunCommand(absl::StrCat(kPlan, " ", Tmp("g.pt"), " --profile ",
                                Tmp("g.bf16.profile.json"),
                                " --gpus 2 --device-memory 1MiB --minibatch 8 -o ",
                                Tmp("plan2_bf16.pb")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_TRUE(absl::StrContains(r.output, "precision: bf16")) << r.output;
  }

  // harmony-ctl submit of the test model with `plan` and extra flags.
  static std::string Submit(const Daemon& d, const std::string& plan, const std::string& flags) {
    return d.Ctl(absl::StrCat("submit ", Tmp(plan + ".pb"), " --model ", Tmp("g.pt"),
                              " --data ", Tmp("g_data.pt"), " ", flags));
  }

  static std::string StartFlags(const std::string& state, const std::string& devices) {
    return absl::StrCat("--listen 127.0.0.1:0 --devices ", devices, " --state-dir ", Tmp(state),
                        " --allow-path ", ::testing::TempDir(), " --allow-path .");
  }

  // Blocks (no sleeping) until the job has reported iteration `iteration`.
  static void WaitUntilTraining(const Daemon& d, const std::string& id, int iteration = 1) {
    auto client = executor::ExecutorClient::Create(ClientFor(d));
    bool trained = false;
    absl::Status s = client->Watch(id, [&](const proto::JobEvent& e) {
      trained = e.has_progress() && e.progress().iteration() >= iteration;
      return !trained;
    });
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(trained);
  }

  static nlohmann::json Json(const std::string& command) {
    auto r = RunCommand(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
    return nlohmann::json::parse(r.output);
  }
};

inline std::string FirstLine(const std::string& text) {
  return std::string(text.substr(0, text.find('\n')));
}

// A job on a memory-mapped token file (random windows from its seed)

}  // namespace harmony::daemon_testing

#endif  // HARMONY_TESTS_DAEMON_FIXTURE_H_
