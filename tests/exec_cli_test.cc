// harmony-exec run end to end: plan a model with harmony-plan, train it with
// the plan on virtual devices whose cap forces swapping, and check what a
// user gets (progress, metrics, trace, a trained TorchScript model); bad
// input gives one clear line and a non-zero exit before any training.


#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/decomposer.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::RunCommand;

const char kZoo[] = "zoo/harmony-zoo";
const char kPlan[] = "planner/harmony-plan";
const char kExec[] = "executor/harmony-exec";

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Profiles and plans `model` for 2 devices of `memory`; returns the plan path.
std::string Plan(const std::string& model, const std::string& data, const std::string& memory,
                 const std::string& name) {
  const std::string plan = Tmp(name + ".plan.pb");
  auto r = RunCommand(absl::StrCat(kPlan, " ", model, " --sample-input ", data,
                                   " --gpus 2 --device-memory ", memory,
                                   " --minibatch 8 -o ", plan));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return plan;
}

TEST(ExecCliTest, TrainsAPlannedZooModelWithSwapping) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 3 --width 32 --seq-len 16 --vocab 64 "
                                          "--samples 32 -o ", Tmp("g.pt"), " --data ",
                                    Tmp("g_data.pt")))
                .exit_code,
            0);
  const std::string plan = Plan(Tmp("g.pt"), Tmp("g_data.pt"), "1MiB", "g");
  auto r = RunCommand(absl::StrCat(
      kExec, " run ", plan, " --model ", Tmp("g.pt"), " --data ", Tmp("g_data.pt"),
      " --iterations 3 --devices cpu:2x1MiB --optimizer adam --lr 0.01 --out ",
      Tmp("g_trained.pt"), " --metrics ", Tmp("g.jsonl"), " --trace ", Tmp("g_trace.json")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "iter 1/3  loss ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "iter 3/3  loss ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "bytes moved per iteration equal the plan's")) << r.output;
  EXPECT_TRUE(Contains(r.output, "wrote the trained model")) << r.output;

  // Metrics: one JSON line per iteration; weights went in, gradients out,
  // and no device went over its 1 MiB.
  std::string text = *common::ReadFileToString(Tmp("g.jsonl"));
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  // What went device to device is printed when there is any, as the metrics count it.
  const uint64_t peer = nlohmann::json::parse(lines[0])["bytes"]["peer"].get<uint64_t>();
  EXPECT_EQ(Contains(r.output, "  device to device "), peer > 0) << r.output;
  for (const std::string& line : lines) {
    nlohmann::json m = nlohmann::json::parse(line);
    EXPECT_GT(m["bytes"]["weights_in"].get<uint64_t>(), 0u);
    EXPECT_GT(m["bytes"]["gradients_out"].get<uint64_t>(), 0u);
    for (uint64_t peak : m["device_peak_bytes"].get<std::vector<uint64_t>>()) {
      EXPECT_LE(peak, 1u << 20);
    }
    EXPECT_TRUE(std::isfinite(m["loss"].get<double>()));
  }
  nlohmann::json trace = nlohmann::json::parse(*common::ReadFileToString(Tmp("g_trace.json")));
  EXPECT_GT(trace["traceEvents"].size(), 10u);

  // The trained model opens as TorchScript and differs from the original.
  torch::jit::Module trained = torch::jit::load(Tmp("g_trained.pt"));
  torch::jit::Module original = torch::jit::load(Tmp("g.pt"));
  auto a = (*trained.named_parameters().begin()).value;
  auto b = (*original.named_parameters().begin()).value;
  EXPECT_FALSE(at::equal(a, b));
}

// The trained parameters of two TorchScript files, compared bit for bit.
void ExpectSameParameters(const std::string& a_path, const std::string& b_path) {
  torch::jit::Module a = torch::jit::load(a_path);
  torch::jit::Module b = torch::jit::load(b_path);
  int checked = 0;
  for (const auto& p : a.named_parameters()) {
    EXPECT_TRUE(at::equal(p.value, *common::ResolveTensor(b, p.name))) << p.name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

std::vector<double> Losses(const std::string& metrics_path) {
  std::vector<double> out;
  const std::string text = *common::ReadFileToString(metrics_path);
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  }
  return out;
}

// Checkpoints every K iterations (the latest N kept), a resumed run
// equal to one straight through bit for bit (Adam, dropout, shuffled order),
// and Ctrl-C stopping after the iteration under way with a checkpoint.
TEST(ExecCliTest, CheckpointsResumeAndCtrlCStopsWithOne) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 2 --width 32 --seq-len 16 --vocab 64 "
                                          "--dropout 0.1 --samples 32 -o ", Tmp("c.pt"),
                                    " --data ", Tmp("c_data.pt")))
                .exit_code,
            0);
  const std::string plan = Plan(Tmp("c.pt"), Tmp("c_data.pt"), "1MiB", "c");
  const std::string base = absl::StrCat(kExec, " run ", plan, " --model ", Tmp("c.pt"),
                                        " --data ", Tmp("c_data.pt"),
                                        " --devices cpu:2x1MiB --optimizer adam --lr 0.01 "
                                        "--shuffle --seed 3");
  auto r = RunCommand(absl::StrCat(base, " --iterations 6 --out ", Tmp("straight.pt"),
                                   " --metrics ", Tmp("straight.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const std::string dir = Tmp("ckpt");
  r = RunCommand(absl::StrCat(base, " --iterations 6 --checkpoint-dir ", dir,
                              " --checkpoint-every 2 --metrics ", Tmp("every.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "checkpoint after iteration 2: ")) << r.output;
  EXPECT_TRUE(Contains(r.output, "wrote checkpoint ")) << r.output;
  // The latest two stay.
  EXPECT_FALSE(common::ReadFileToString(dir + "/checkpoint-2.pt").ok());
  EXPECT_TRUE(common::ReadFileToString(dir + "/checkpoint-4.pt").ok());
  EXPECT_TRUE(common::ReadFileToString(dir + "/checkpoint-6.pt").ok());
  const std::string every = *common::ReadFileToString(Tmp("every.jsonl"));
  std::vector<std::string> lines = absl::StrSplit(every, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  nlohmann::json second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["checkpoint"]["path"], dir + "/checkpoint-2.pt");
  EXPECT_GE(second["checkpoint"]["copy_s"].get<double>(), 0);

  // Resumed from iteration 4: the same losses and weights as straight through.
  r = RunCommand(absl::StrCat(base, " --iterations 6 --resume ", dir, "/checkpoint-4.pt --out ",
                              Tmp("resumed.pt"), " --metrics ", Tmp("resumed.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "resumed from " + dir + "/checkpoint-4.pt at iteration 4 of 6"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "iter 5/6")) << r.output;
  EXPECT_FALSE(Contains(r.output, "iter 4/6")) << r.output;
  EXPECT_EQ(Losses(Tmp("resumed.jsonl")), Losses(Tmp("straight.jsonl")));
  ExpectSameParameters(Tmp("resumed.pt"), Tmp("straight.pt"));
  // Nothing left to train, and a directory resumes from its latest.
  r = RunCommand(absl::StrCat(base, " --iterations 6 --resume ", dir));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "checkpoint-6.pt is at iteration 6 already")) << r.output;

  // Ctrl-C: stops after the iteration under way, with a checkpoint (the
  // metrics file is flushed per iteration: sent once two are in).
  const std::string stop_dir = Tmp("stopped");
  const std::string stop_metrics = Tmp("stopped.jsonl");
  r = RunCommand(absl::StrCat(
      "sh -c '", base, " --iterations 1000000 --checkpoint-dir ", stop_dir, " --metrics ",
      stop_metrics, " > ", Tmp("stopped.log"), " 2>&1 & pid=$!; "
      "until [ \"$(cat ", stop_metrics, " 2>/dev/null | wc -l)\" -ge 2 ]; do sleep 0.05; done; "
      "kill -INT $pid; wait $pid; echo \"exit $?\"; cat ", Tmp("stopped.log"), "'"));
  EXPECT_TRUE(Contains(r.output, "exit 130")) << r.output;
  EXPECT_TRUE(Contains(r.output, "continue with --resume " + stop_dir + "/checkpoint-"))
      << r.output;
  const size_t at = r.output.find("stopped after iteration ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const int stopped = std::atoi(r.output.c_str() + at + strlen("stopped after iteration "));
  EXPECT_GE(stopped, 2);
  EXPECT_TRUE(common::ReadFileToString(absl::StrCat(stop_dir, "/checkpoint-", stopped, ".pt")).ok());
  r = RunCommand(absl::StrCat(base, " --iterations ", stopped + 1, " --resume ", stop_dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat("at iteration ", stopped, " of ", stopped + 1)))
      << r.output;
}

TEST(ExecCliTest, TrainsAModelScriptedInPython) {
  const std::string plan = Plan("tests/testdata/user_bert.pt",
                                "tests/testdata/user_bert_data.pt", "16MiB", "user_bert");
  // No --devices: the plan's.
  auto r = RunCommand(absl::StrCat(kExec, " run ", plan,
                                   " --model tests/testdata/user_bert.pt"
                                   " --data tests/testdata/user_bert_data.pt"
                                   " --iterations 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "devices: the plan's, cpu:2x16.00 MiB\n")) << r.output;
  EXPECT_TRUE(Contains(r.output, "iter 2/2")) << r.output;
  // Each of the 2 devices computes on half the host's hardware threads, as
  // harmony-plan profiled them (no note about a different count).
  const int share = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  EXPECT_TRUE(Contains(r.output, absl::StrCat(", ", share, " intra-op thread(s) per device, denormals flushed to zero, fp32\n")))
      << r.output;
  EXPECT_FALSE(Contains(r.output, "note: the plan was profiled on")) << r.output;

  // Another count, asked for: used, and the difference from the profile's
  // noted.
  r = RunCommand(absl::StrCat(kExec, " run ", plan,
                              " --model tests/testdata/user_bert.pt"
                              " --data tests/testdata/user_bert_data.pt"
                              " --iterations 1 --devices cpu:2x16MiB --threads-per-device ",
                              share + 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat(", ", share + 1, " intra-op thread(s) per device")))
      << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat("note: the plan was profiled on ", share,
                                              " intra-op thread(s) per device, this run uses ",
                                              share + 1)))
      << r.output;
}

TEST(ExecCliTest, BadInputIsOneClearLine) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " mlp --samples 16 -o ", Tmp("m.pt"), " --data ",
                                    Tmp("m_data.pt")))
                .exit_code,
            0);
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " mlp --width 8 --input-dim 8 --samples 16 -o ", Tmp("m2.pt"),
                                    " --data ", Tmp("m2_data.pt")))
                .exit_code,
            0);
  const std::string plan = Plan(Tmp("m.pt"), Tmp("m_data.pt"), "64MiB", "m");
  const std::string base = absl::StrCat(kExec, " run ", plan, " --iterations 1 ");

  auto r = RunCommand(absl::StrCat(base, "--model ", Tmp("m2.pt"), " --data ", Tmp("m_data.pt"),
                                   " --devices cpu:2x64MiB"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.output, "is not the one the plan was made for")) << r.output;

  r = RunCommand(absl::StrCat(base, "--model ", Tmp("m.pt"), " --data ", Tmp("m_data.pt"),
                              " --devices cpu:1x64MiB"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.output, "the plan needs 2 devices")) << r.output;

  r = RunCommand(absl::StrCat(base, "--model ", Tmp("m.pt"), " --data ", Tmp("m_data.pt"),
                              " --devices cpu:2x1MiB"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.output, "the plan was made for devices of 64.00 MiB")) << r.output;

  r = RunCommand(absl::StrCat(base, "--model ", Tmp("m.pt"), " --data ", Tmp("m2_data.pt"),
                              " --devices cpu:2x64MiB"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.output, "the plan expects")) << r.output;

  r = RunCommand(absl::StrCat(kExec, " run ", Tmp("m_data.pt"), " --model ", Tmp("m.pt"),
                              " --data ", Tmp("m_data.pt"), " --iterations 1 --devices cpu:2x1MiB"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.output, "m_data.pt")) << r.output;

  r = RunCommand(absl::StrCat(kExec, " run ", plan));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.output, "run needs PLAN")) << r.output;
  EXPECT_EQ(RunCommand(absl::StrCat(kExec, " fly")).exit_code, 2);
}

}  // namespace
}  // namespace harmony

namespace harmony {
namespace {

// What a PyTorch user trains first, end to end with the two tools: a word
// LSTM language model whose embedding is tied to its decoder, and a model
// returning (loss, logits) as Hugging Face models do. Scripted in Python
// (tests/suite/make_suite.py).
TEST(ExecCliTest, LstmLanguageModelAndTupleOutputTrainEndToEnd) {
  struct Case {
    std::string name, memory, loss_note;
  };
  for (const Case& c :
       {Case{"lstm_lm", "512KiB", ""},
        Case{"hf_tuple", "64KiB", "training on its element 0, the first scalar"}}) {
    SCOPED_TRACE(c.name);
    const std::string model = "tests/suite/" + c.name + ".pt";
    const std::string data = "tests/suite/" + c.name + "_data.pt";
    const std::string plan = Tmp(c.name + ".plan.pb");
    auto planned = RunCommand(absl::StrCat(kPlan, " ", model, " --sample-input ", data,
                                           " --gpus 2 --device-memory ", c.memory,
                                           " --minibatch 8 -o ", plan));
    ASSERT_EQ(planned.exit_code, 0) << planned.output;
    if (!c.loss_note.empty()) {
      EXPECT_TRUE(Contains(planned.output, c.loss_note)) << planned.output;
    }
    const std::string trained = Tmp(c.name + "_trained.pt");
    auto r = RunCommand(absl::StrCat(kExec, " run ", plan, " --model ", model, " --data ", data,
                                     " --iterations 3 --devices cpu:2x", c.memory,
                                     " --lr 0.5 --out ", trained));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, "iter 3/3  loss ")) << r.output;
    EXPECT_TRUE(Contains(r.output, "bytes moved per iteration equal the plan's")) << r.output;
    torch::jit::Module out = torch::jit::load(trained);
    torch::jit::Module before = torch::jit::load(model);
    int changed = 0;
    for (const auto& p : before.named_parameters()) {
      absl::StatusOr<at::Tensor> now = common::ResolveTensor(out, p.name);
      ASSERT_TRUE(now.ok()) << now.status();
      if (!at::equal(p.value, *now)) {
        ++changed;
      }
    }
    EXPECT_GT(changed, 0);
    if (c.name == "lstm_lm") {
      // The saved model keeps the tie: one tensor under both names.
      EXPECT_TRUE(out.attr("decoder").toModule().attr("weight").toTensor().is_same(
          out.attr("emb").toModule().attr("weight").toTensor()));
    }
  }
  // A wrong --loss-output is one clear line before any profiling.
  auto bad = RunCommand(absl::StrCat(kPlan, " tests/suite/hf_tuple.pt --sample-input ",
                                     "tests/suite/hf_tuple_data.pt --gpus 2 --device-memory 64KiB",
                                     " --minibatch 8 --loss-output logits -o ", Tmp("bad.pb")));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(Contains(bad.output, "forward returns Tuple[Tensor, Tensor], which has no element "
                                   "'logits' (it has elements 0-1)"))
      << bad.output;
}

}  // namespace
}  // namespace harmony
