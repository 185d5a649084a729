// harmony-exec run --tensorboard writes event files that TensorBoard's
// reader accepts: tests/tensorboard_check.py checks every record's framing
// and CRCs and decodes every Event with Python's protobuf from
// proto/tensorboard.proto; every scalar tag is there, at every step.

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::RunCommand;

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(TensorBoardCliTest, ARunWritesEveryScalarAtEveryStep) {
  const std::string model = "tests/suite/llama.pt", data = "tests/suite/llama_data.pt";
  const std::string plan = Tmp("tb.pb"), dir = Tmp("tb");
  auto r = RunCommand(absl::StrCat("planner/harmony-plan ", model, " --sample-input ", data,
                                   " --minibatch 8 --microbatch 2 --gpus 1 --device-memory 64MiB "
                                   "-o ", plan));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(absl::StrCat("executor/harmony-exec run ", plan, " --model ", model, " --data ",
                              data, " --iterations 4 --devices cpu:1x64MiB --optimizer adamw "
                              "--clip-grad-norm 1 --eval-data ", data,
                              " --eval-every 2 --eval-iterations 1 --tensorboard ", dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("TensorBoard: " + dir + "/events.out.tfevents."), std::string::npos)
      << r.output;
  r = RunCommand(absl::StrCat("/usr/bin/python3 tests/tensorboard_check.py ", dir,
                              " proto/tensorboard.proto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json got = nlohmann::json::parse(r.output);
  EXPECT_EQ(got["file_version"], "brain.Event:2");
  for (const char* tag : {"train/loss", "train/lr", "train/grad_norm", "train/samples_per_s",
                          "swap/host_link_bytes", "device/peak_bytes", "swap/wait_s",
                          "swap/peer_wait_s"}) {
    ASSERT_TRUE(got["scalars"].contains(tag)) << tag << ": " << r.output;
    EXPECT_EQ(got["scalars"][tag].size(), 4u) << tag;  // Steps 1-4.
  }
  ASSERT_TRUE(got["scalars"].contains("eval/loss")) << r.output;
  EXPECT_EQ(got["scalars"]["eval/loss"].size(), 2u);  // After 2 and 4.
  EXPECT_TRUE(got["scalars"]["eval/loss"].contains("4"));
  EXPECT_GT(got["scalars"]["train/loss"]["1"].get<double>(), 0);
}

}  // namespace
}  // namespace harmony
