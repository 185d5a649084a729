// Token datasets through the real commands (harmony-plan, harmony-exec run)
// on the suite's LLaMA-style decoder (forward(tokens, targets) returns the
// loss; vocabulary 96, 12 tokens per sample):
//
//   - a memory-mapped uint16 token file trains bit for bit as the same
//     windows written as a torch.save file, and a .npy of the same tokens
//     evaluates as they do;
//   - random windows (--shuffle) are drawn from the seed and the sample's
//     place: a run resumed from a checkpoint draws the windows the straight
//     run drew, bit for bit;
//   - a token outside the vocabulary stops the run naming its offset;
//   - a 2 GiB token file trains with the process's peak resident memory far
//     below its size (printed).

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::RunCommand;

const char kPlan[] = "planner/harmony-plan";
const char kExec[] = "executor/harmony-exec";
const char kModel[] = "tests/suite/llama.pt";
const char kSample[] = "tests/suite/llama_data.pt";

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// Writes the token files of 40 windows of 12 + 1 tokens once: train.bin
// (uint16), tokens.npy (int64, the same ids) and windows.pt (the
// sequential windows as inputs and targets).
void WriteTokens() {
  static bool written = false;
  if (written) return;
  auto r = RunCommand(absl::StrCat(
      "/usr/bin/python3 -c \"import numpy as np, torch\n"
      "g = torch.Generator().manual_seed(3)\n"
      "t = torch.randint(0, 96, (12 * 40 + 1,), generator=g)\n"
      "t.numpy().astype(np.uint16).tofile('", Tmp("train.bin"), "')\n"
      "np.save('", Tmp("tokens.npy"), "', t.numpy().astype(np.int64))\n"
      "w = torch.stack([t[12 * j: 12 * j + 13] for j in range(40)])\n"
      "torch.save({'inputs': w[:, :12].clone(), 'targets': w[:, 1:].clone()}, '",
      Tmp("windows.pt"), "')\n"
      "bad = t.numpy().astype(np.uint16); bad[100] = 500; bad.tofile('", Tmp("bad.bin"),
      "')\""));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  written = true;
}

std::string Plan() {
  static std::string path;
  if (!path.empty()) return path;
  path = Tmp("tokens.pb");
  auto r = RunCommand(absl::StrCat(kPlan, " ", kModel, " --sample-input ", kSample,
                                   " --minibatch 8 --microbatch 2 --gpus 1 --device-memory 64MiB "
                                   "-o ", path));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return path;
}

struct Trained {
  std::vector<nlohmann::json> metrics;
  std::map<std::string, at::Tensor> weights;
  std::string output;
  int exit_code = 0;
};

Trained Train(const std::string& name, const std::string& flags) {
  Trained t;
  const std::string out = Tmp(name + ".pt"), metrics = Tmp(name + ".jsonl");
  auto r = RunCommand(absl::StrCat(kExec, " run ", Plan(), " --model ", kModel,
                                   " --devices cpu:1x64MiB --optimizer adamw --lr 0.01 --out ",
                                   out, " --metrics ", metrics, " ", flags));
  t.output = r.output;
  t.exit_code = r.exit_code;
  if (r.exit_code != 0) return t;
  absl::StatusOr<std::string> text = common::ReadFileToString(metrics);
  EXPECT_TRUE(text.ok()) << text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    t.metrics.push_back(nlohmann::json::parse(line));
  }
  torch::jit::Module m = torch::jit::load(out);
  for (const auto& p : m.named_parameters()) t.weights[p.name] = p.value.detach().clone();
  return t;
}

void ExpectSame(const Trained& a, const Trained& b, const std::string& what) {
  ASSERT_EQ(a.metrics.size(), b.metrics.size()) << what;
  for (size_t i = 0; i < a.metrics.size(); ++i) {
    EXPECT_EQ(a.metrics[i]["loss"].get<double>(), b.metrics[i]["loss"].get<double>())
        << what << ", iteration " << i;
    EXPECT_EQ(a.metrics[i].contains("eval"), b.metrics[i].contains("eval")) << what;
    if (a.metrics[i].contains("eval") && b.metrics[i].contains("eval")) {
      EXPECT_EQ(a.metrics[i]["eval"]["loss"].get<double>(),
                b.metrics[i]["eval"]["loss"].get<double>())
          << what << ", iteration " << i;
    }
  }
  ASSERT_EQ(a.weights.size(), b.weights.size()) << what;
  for (const auto& [name, w] : a.weights) {
    EXPECT_TRUE(at::equal(w, b.weights.at(name))) << what << ": " << name;
  }
}

TEST(TokenDataTest, ATokenFileTrainsAsItsWindowsWrittenOut) {
  WriteTokens();
  const Trained tokens = Train(
      "from_tokens", absl::StrCat("--iterations 6 --data ", Tmp("train.bin"),
                                  " --token-dtype uint16 --seq-len 12 --eval-data ",
                                  Tmp("tokens.npy"), " --eval-every 3 --eval-iterations 2"));
  ASSERT_EQ(tokens.exit_code, 0) << tokens.output;
  const Trained windows =
      Train("from_windows", absl::StrCat("--iterations 6 --data ", Tmp("windows.pt"),
                                         " --eval-data ", Tmp("windows.pt"),
                                         " --eval-every 3 --eval-iterations 2"));
  ASSERT_EQ(windows.exit_code, 0) << windows.output;
  ExpectSame(tokens, windows, "token file vs torch.save windows");
  EXPECT_TRUE(tokens.metrics[2].contains("eval"));
}

TEST(TokenDataTest, RandomWindowsAreDrawnAgainAfterAResume) {
  WriteTokens();
  const std::string data =
      absl::StrCat("--data ", Tmp("train.bin"), " --token-dtype uint16 --seq-len 12 --shuffle "
                   "--seed 5 ");
  const Trained straight = Train("random_straight", data + "--iterations 6");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const std::string dir = Tmp("random_checkpoints");
  const Trained first =
      Train("random_first", absl::StrCat(data, "--iterations 3 --checkpoint-dir ", dir));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const Trained resumed = Train("random_resumed", absl::StrCat(data, "--iterations 6 --resume ",
                                                               dir, "/checkpoint-3.pt"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ExpectSame(straight, resumed, "straight vs resumed");
  // Not the sequential windows.
  const Trained sequential = Train(
      "sequential", absl::StrCat("--data ", Tmp("train.bin"),
                                 " --token-dtype uint16 --seq-len 12 --iterations 1"));
  ASSERT_EQ(sequential.exit_code, 0) << sequential.output;
  EXPECT_NE(sequential.metrics[0]["loss"].get<double>(), straight.metrics[0]["loss"].get<double>());
}

TEST(TokenDataTest, BadTokensAndMissingFlagsAreNamed) {
  WriteTokens();
  const Trained bad = Train("bad", absl::StrCat("--iterations 3 --data ", Tmp("bad.bin"),
                                                " --token-dtype uint16 --seq-len 12"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("token 100 (byte offset 200) is 500, outside the model's "
                            "vocabulary of 96"),
            std::string::npos)
      << bad.output;
  const Trained no_type =
      Train("no_type", absl::StrCat("--iterations 1 --data ", Tmp("train.bin"), " --seq-len 12"));
  EXPECT_NE(no_type.output.find("give --token-dtype uint16 or uint32"), std::string::npos)
      << no_type.output;
  const Trained no_len = Train(
      "no_len", absl::StrCat("--iterations 1 --data ", Tmp("train.bin"), " --token-dtype uint16"));
  EXPECT_NE(no_len.output.find("give --seq-len T"), std::string::npos) << no_len.output;
  const Trained other_len = Train("other_len", absl::StrCat("--iterations 1 --data ",
                                                            Tmp("train.bin"),
                                                            " --token-dtype uint16 --seq-len 16"));
  EXPECT_NE(other_len.output.find("the plan expects [N, 12]"), std::string::npos)
      << other_len.output;
}

// A 2 GiB token file (sparse: every id 0) read at random windows.
TEST(TokenDataTest, ALargeTokenFileTrainsInLittleMemory) {
  const std::string path = Tmp("large.bin");
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fseek(f, (2LL << 30) - 2, SEEK_SET), 0);
    const char zero[2] = {0, 0};
    ASSERT_EQ(std::fwrite(zero, 1, 2, f), 2u);
    std::fclose(f);
  }
  const Trained t = Train("large", absl::StrCat("--iterations 20 --data ", path,
                                                " --token-dtype uint16 --seq-len 12 --shuffle"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const size_t at = t.output.find("peak resident memory: ");
  ASSERT_NE(at, std::string::npos) << t.output;
  const std::string line = t.output.substr(at, t.output.find('\n', at) - at);
  std::printf("2 GiB token file, 20 iterations of random windows: %s\n", line.c_str());
  // "peak resident memory: 412.50 MiB (host store ...)": below 1 GiB.
  EXPECT_EQ(line.find("GiB ("), std::string::npos) << line;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace harmony
