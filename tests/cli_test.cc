// End to end through the command-line tools: harmony-zoo writes a model and
// data, harmony-train-reference trains it; bad input gives one clear line
// and a non-zero exit, never a crash or a backtrace.

#include <string>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::RunCommand;

const char kZoo[] = "zoo/harmony-zoo";
const char kTrain[] = "zoo/harmony-train-reference";

std::string Tmp(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(CliTest, ZooThenReferenceTraining) {
  testing::Result zoo = RunCommand(absl::StrCat(
      kZoo, " gpt --depth 2 --width 16 --heads 2 --vocab 32 --seq-len 8 ",
      "--samples 16 -o ", Tmp("gpt.pt"), " --data ", Tmp("gpt_data.pt")));
  ASSERT_EQ(zoo.exit_code, 0) << zoo.output;
  EXPECT_NE(zoo.output.find("wrote gpt model"), std::string::npos) << zoo.output;

  testing::Result train = RunCommand(absl::StrCat(kTrain, " ", Tmp("gpt.pt"), " --data ",
                                  Tmp("gpt_data.pt"),
                                  " --steps 3 --lr 0.1 --minibatch 8 --out ",
                                  Tmp("trained.pt")));
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find("step    3/3  loss"), std::string::npos)
      << train.output;

  // The trained model loads and its weights moved.
  torch::jit::Module before = torch::jit::load(Tmp("gpt.pt"));
  torch::jit::Module after = torch::jit::load(Tmp("trained.pt"));
  at::Tensor w0 = before.attr("lm_head").toModule().attr("weight").toTensor();
  at::Tensor w1 = after.attr("lm_head").toModule().attr("weight").toTensor();
  EXPECT_EQ(w0.sizes(), w1.sizes());
  EXPECT_FALSE(torch::equal(w0, w1));
}

TEST(CliTest, HelpListsFamiliesAndFlags) {
  testing::Result help = RunCommand(absl::StrCat(kZoo, " --help"));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("mlp, gpt, bert, resnet, vgg"), std::string::npos)
      << help.output;
  EXPECT_NE(help.output.find("--seq-len"), std::string::npos);
}

TEST(CliTest, UnknownFamilyIsOneClearLine) {
  testing::Result r = RunCommand(absl::StrCat(kZoo, " transformer -o ", Tmp("x.pt"),
                              " --data ", Tmp("x_data.pt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "harmony-zoo: unknown model family \"transformer\" (expected one "
            "of: mlp, gpt, bert, resnet, vgg)\n");
}

TEST(CliTest, MissingArgumentsAndBadFlagValues) {
  testing::Result r = RunCommand(absl::StrCat(kZoo, " gpt"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("need FAMILY, -o MODEL and --data DATA"),
            std::string::npos)
      << r.output;
  r = RunCommand(absl::StrCat(kZoo, " gpt --depth many -o a --data b"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("depth"), std::string::npos) << r.output;
}

TEST(CliTest, CorruptModelIsNamedWithoutBacktrace) {
  std::string model = Tmp("corrupt.pt");
  ASSERT_TRUE(common::WriteFileAtomically(model, "definitely not a zip").ok());
  testing::Result zoo = RunCommand(absl::StrCat(kZoo, " mlp -o ", Tmp("m.pt"), " --data ",
                                Tmp("m_data.pt")));
  ASSERT_EQ(zoo.exit_code, 0) << zoo.output;
  testing::Result r = RunCommand(absl::StrCat(kTrain, " ", model, " --data ", Tmp("m_data.pt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(model + ": not a TorchScript model"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Exception raised from"), std::string::npos)
      << r.output;
}

TEST(CliTest, DataOfTheWrongModelIsExplained) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --width 16 --seq-len 8 -o ",
                             Tmp("g.pt"), " --data ", Tmp("g_data.pt")))
                .exit_code,
            0);
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " resnet --width 4 --image-size 8 -o ",
                             Tmp("r.pt"), " --data ", Tmp("r_data.pt")))
                .exit_code,
            0);
  // Images given to a language model: forward rejects the shapes.
  testing::Result r = RunCommand(absl::StrCat(kTrain, " ", Tmp("g.pt"), " --data ",
                              Tmp("r_data.pt"), " --steps 1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("harmony-train-reference: forward: "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Exception raised from"), std::string::npos)
      << r.output;
  // A missing data file is named.
  r = RunCommand(absl::StrCat(kTrain, " ", Tmp("g.pt"), " --data ", Tmp("none.pt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(Tmp("none.pt")), std::string::npos) << r.output;
}

}  // namespace
}  // namespace harmony
