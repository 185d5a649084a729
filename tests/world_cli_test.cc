// End to end with harmony-exec run: several servers (ranks of one
// world, each its own process with its own virtual devices, on loopback) on
// their slices of the global minibatch train what one server trains on the
// whole of it; checkpoints move between world sizes; a world that is not one
// job, or that loses a server, fails with a clear reason.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/decomposer.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::FreePort;
using testing::RunCommand;

const char kZoo[] = "zoo/harmony-zoo";
const char kPlan[] = "planner/harmony-plan";
const char kExec[] = "executor/harmony-exec";

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<double> Losses(const std::string& metrics_path) {
  std::vector<double> out;
  const std::string text = *common::ReadFileToString(metrics_path);
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  }
  return out;
}

// A zoo model and its data under Tmp(name).
void Zoo(const std::string& family_and_flags, const std::string& name) {
  auto r = RunCommand(absl::StrCat(kZoo, " ", family_and_flags, " -o ", Tmp(name + ".pt"),
                                   " --data ", Tmp(name + "_data.pt")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// A plan of model `name` for 2 devices of `memory` at `minibatch`, with
// microbatches of 4 (so one server and a world split the same microbatches).
std::string Plan(const std::string& name, const std::string& memory, int minibatch) {
  const std::string plan = Tmp(absl::StrCat(name, minibatch, ".plan.pb"));
  auto r = RunCommand(absl::StrCat(kPlan, " ", Tmp(name + ".pt"), " --sample-input ",
                                   Tmp(name + "_data.pt"), " --gpus 2 --device-memory ", memory,
                                   " --minibatch ", minibatch, " --microbatch 4 -o ", plan));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return plan;
}

// Runs `ranks` processes of one world, rank r with `flags` and
// per_rank(r); returns each rank's output and exit code ("exit N" last).
std::vector<std::string> RunWorld(int ranks, const std::string& flags,
                                  const std::function<std::string(int)>& per_rank) {
  const std::string store = absl::StrCat("127.0.0.1:", FreePort());
  std::string command;
  for (int r = ranks - 1; r >= 0; --r) {
    absl::StrAppend(&command, "( ", kExec, " run ", flags, " --rank ", r, " --world-size ", ranks,
                    " --store ", store, " ", per_rank(r), " > ", Tmp(absl::StrCat("rank", r, ".log")),
                    " 2>&1; echo \"exit $?\" >> ", Tmp(absl::StrCat("rank", r, ".log")), " ) & ");
  }
  absl::StrAppend(&command, "wait");
  RunCommand(command);
  std::vector<std::string> out;
  for (int r = 0; r < ranks; ++r) {
    out.push_back(*common::ReadFileToString(Tmp(absl::StrCat("rank", r, ".log"))));
  }
  return out;
}

// "12.50 KiB" after `key` in `text`, in bytes; -1 when absent.
double BytesAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  std::vector<std::string> words =
      absl::StrSplit(text.substr(at + key.size(), 40), ' ', absl::SkipEmpty());
  double value = 0;
  if (words.size() < 2 || !absl::SimpleAtod(words[0], &value)) return -1;
  const std::map<std::string, double> units = {
      {"B", 1}, {"KiB", 1024}, {"MiB", 1 << 20}, {"GiB", 1 << 30}};
  const std::string unit = words[1].substr(0, words[1].find_first_of(",)"));
  return units.count(unit) ? value * units.at(unit) : -1;
}

// Each trained parameter of `got` against `want`'s: within 1e-6 of its norm
// and 1e-5 of the whole run's step (a rank's dropped gradients would be off
// by a third to a half of the step).
void ExpectNearTraining(const std::string& got_path, const std::string& want_path,
                        const std::string& initial_path) {
  torch::jit::Module got = torch::jit::load(got_path);
  torch::jit::Module want = torch::jit::load(want_path);
  torch::jit::Module initial = torch::jit::load(initial_path);
  int checked = 0;
  for (const auto& p : got.named_parameters()) {
    const at::Tensor w = *common::ResolveTensor(want, p.name);
    const double step = (w - *common::ResolveTensor(initial, p.name)).norm().item<double>();
    const double diff = (p.value - w).norm().item<double>();
    EXPECT_LE(diff, 1e-6 * std::max(w.norm().item<double>(), 1e-30)) << p.name;
    EXPECT_GT(step, 0) << p.name;
    EXPECT_LE(diff, 1e-5 * step) << p.name << ": " << diff << " of a step of " << step;
    ++checked;
  }
  EXPECT_GT(checked, 3);
}

void ExpectSameParameters(const std::string& a_path, const std::string& b_path) {
  torch::jit::Module a = torch::jit::load(a_path);
  torch::jit::Module b = torch::jit::load(b_path);
  for (const auto& p : a.named_parameters()) {
    EXPECT_TRUE(at::equal(p.value, *common::ResolveTensor(b, p.name))) << p.name;
  }
}

struct WorldCase {
  const char* name;
  const char* zoo;  // Family and flags.
  int ranks;
  const char* optimizer;  // Flags.
  bool shard;
};

class WorldTrainsAsOneServer : public ::testing::TestWithParam<WorldCase> {};

// 2 and 3 servers give the losses and trained weights of
// one server on the whole minibatch within 1e-6, with SGD-momentum and
// Adam, with and without sharded optimizer state; the ranks end identical.
// Adam is tested on an MLP: in a GPT, the key third of attn.c_attn.bias has
// a gradient that is zero in exact arithmetic (softmax ignores a constant
// per query), so what is computed is rounding noise in any summation order,
// and Adam's m / sqrt(v) turns noise into full steps of the learning rate.
TEST_P(WorldTrainsAsOneServer, WithinOneInAMillion) {
  const WorldCase& c = GetParam();
  const std::string name = c.name;
  Zoo(absl::StrCat(c.zoo, " --samples 48"), name);
  const std::string each = Plan(name, "1MiB", 8);
  const std::string whole = Plan(name, "1MiB", 8 * c.ranks);
  const std::string run = absl::StrCat(" --model ", Tmp(name + ".pt"), " --data ",
                                       Tmp(name + "_data.pt"), " --devices cpu:2x1MiB ",
                                       c.optimizer, " --iterations 4");
  std::vector<std::string> logs = RunWorld(
      c.ranks, absl::StrCat(each, run, c.shard ? " --shard-optimizer-state" : ""), [&](int r) {
        return absl::StrCat("--out ", Tmp(absl::StrCat(name, "_rank", r, ".pt")), " --metrics ",
                            Tmp(absl::StrCat(name, "_rank", r, ".jsonl")));
      });
  for (int r = 0; r < c.ranks; ++r) {
    ASSERT_TRUE(Contains(logs[r], "exit 0")) << logs[r];
    EXPECT_TRUE(Contains(logs[r], absl::StrCat("rank ", r, " of ", c.ranks))) << logs[r];
  }
  auto one = RunCommand(absl::StrCat(kExec, " run ", whole, run, " --out ",
                                     Tmp(name + "_one.pt"), " --metrics ",
                                     Tmp(name + "_one.jsonl")));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // The losses each rank reports are the world's: the single server's.
  const std::vector<double> want = Losses(Tmp(name + "_one.jsonl"));
  ASSERT_EQ(want.size(), 4u);
  for (int r = 0; r < c.ranks; ++r) {
    const std::vector<double> got = Losses(Tmp(absl::StrCat(name, "_rank", r, ".jsonl")));
    ASSERT_EQ(got.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << "rank " << r;
  }
  ExpectNearTraining(Tmp(name + "_rank0.pt"), Tmp(name + "_one.pt"), Tmp(name + ".pt"));
  for (int r = 1; r < c.ranks; ++r) {
    ExpectSameParameters(Tmp(name + "_rank0.pt"), Tmp(absl::StrCat(name, "_rank", r, ".pt")));
  }
  // Host memory per server: sharded, the ranks' optimizer state adds up to
  // one server's, and none holds all of it.
  const double full = BytesAfter(one.output, "(optimizer state ");
  ASSERT_GT(full, 0) << one.output;
  double sum = 0;
  for (int r = 0; r < c.ranks; ++r) {
    const double mine = BytesAfter(logs[r], "(optimizer state ");
    ASSERT_GE(mine, 0) << logs[r];
    if (c.shard) {
      EXPECT_LT(mine, full) << logs[r];
    } else {
      EXPECT_EQ(mine, full) << logs[r];
    }
    sum += mine;
  }
  if (c.shard) EXPECT_NEAR(sum, full, 0.02 * full);
}

INSTANTIATE_TEST_SUITE_P(
    Issue20, WorldTrainsAsOneServer,
    ::testing::Values(
        WorldCase{"gpt_sgdm", "gpt --depth 2 --width 32 --seq-len 16 --vocab 64 --dropout 0", 2,
                  "--optimizer sgd --momentum 0.9 --lr 0.05", false},
        WorldCase{"gpt_sgdm_sharded",
                  "gpt --depth 2 --width 32 --seq-len 16 --vocab 64 --dropout 0", 2,
                  "--optimizer sgd --momentum 0.9 --lr 0.05", true},
        WorldCase{"mlp_adam", "mlp --depth 3 --width 64", 3, "--optimizer adam --lr 0.01", false},
        WorldCase{"mlp_adam_sharded", "mlp --depth 3 --width 64", 3, "--optimizer adam --lr 0.01",
                  true},
        WorldCase{"mlp_sgdm_3", "mlp --depth 3 --width 64", 3,
                  "--optimizer sgd --momentum 0.9 --lr 0.05", true}),
    [](const ::testing::TestParamInfo<WorldCase>& info) { return std::string(info.param.name); });

// A checkpoint of a world resumes on another world size with the same global
// minibatch: 2 servers (sharded Adam state, gathered into rank 0's file) ->
// 1 server -> 2 servers (rank 0 reads the file and sends it), against one
// server straight through.
TEST(WorldCliTest, CheckpointsMoveBetweenWorldSizes) {
  Zoo("mlp --depth 3 --width 64 --samples 48", "ck");
  const std::string each = Plan("ck", "1MiB", 8);
  const std::string whole = Plan("ck", "1MiB", 16);
  const std::string run = absl::StrCat(" --model ", Tmp("ck.pt"), " --data ", Tmp("ck_data.pt"),
                                       " --devices cpu:2x1MiB --optimizer adam --lr 0.01 ");
  std::vector<std::string> logs =
      RunWorld(2, absl::StrCat(each, run, "--iterations 2 --shard-optimizer-state"), [](int r) {
        return absl::StrCat("--checkpoint-dir ", Tmp(absl::StrCat("ck_dir", r)));
      });
  for (const std::string& log : logs) ASSERT_TRUE(Contains(log, "exit 0")) << log;
  EXPECT_TRUE(Contains(logs[0], "checkpoint after iteration 2")) << logs[0];
  // Rank 0 writes the world's checkpoints; the others none.
  EXPECT_EQ(common::ReadFileToString(Tmp("ck_dir0/checkpoint-2.pt")).ok(), true);
  EXPECT_EQ(common::ReadFileToString(Tmp("ck_dir1/checkpoint-2.pt")).ok(), false);

  auto r = RunCommand(absl::StrCat(kExec, " run ", whole, run, "--iterations 3 --resume ",
                                   Tmp("ck_dir0"), " --checkpoint-dir ", Tmp("ck_one")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "resumed from")) << r.output;
  // Back to 2 servers; rank 1 is given a path that does not exist on its
  // "server": rank 0 sends it the checkpoint.
  logs = RunWorld(2, absl::StrCat(each, run, "--iterations 4"), [](int r) {
    return absl::StrCat("--resume ", r == 0 ? Tmp("ck_one") : Tmp("nowhere"), " --out ",
                        Tmp(absl::StrCat("ck_world", r, ".pt")));
  });
  for (const std::string& log : logs) ASSERT_TRUE(Contains(log, "exit 0")) << log;
  EXPECT_TRUE(Contains(logs[1], "resumed from")) << logs[1];
  r = RunCommand(absl::StrCat(kExec, " run ", whole, run, "--iterations 4 --out ",
                              Tmp("ck_straight.pt")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectNearTraining(Tmp("ck_world0.pt"), Tmp("ck_straight.pt"), Tmp("ck.pt"));
  ExpectSameParameters(Tmp("ck_world0.pt"), Tmp("ck_world1.pt"));

  // Another global minibatch is refused with the figures.
  logs = RunWorld(3, absl::StrCat(each, run, "--iterations 4 --resume ", Tmp("ck_one")),
                  [](int) { return std::string(); });
  EXPECT_TRUE(Contains(logs[0], "exit 1")) << logs[0];
  EXPECT_TRUE(Contains(logs[0], "trained with minibatch 16")) << logs[0];
  EXPECT_TRUE(Contains(logs[0], "this run's is 24 (3 servers x 8)")) << logs[0];
}

// Bad worlds: ranks that do not run the same job, a server that never comes,
// and a server killed mid-run end every other rank with the reason.
TEST(WorldCliTest, ServersThatDoNotAgreeOrLeaveEndTheJobWithTheReason) {
  Zoo("mlp --depth 3 --width 64 --samples 48", "bad");
  const std::string each = Plan("bad", "1MiB", 8);
  const std::string run = absl::StrCat(each, " --model ", Tmp("bad.pt"), " --data ",
                                       Tmp("bad_data.pt"), " --devices cpu:2x1MiB ");
  std::vector<std::string> logs = RunWorld(2, absl::StrCat(run, "--iterations 2"), [](int r) {
    return r == 1 ? "--lr 0.02" : "--lr 0.01";
  });
  for (const std::string& log : logs) {
    EXPECT_TRUE(Contains(log, "exit 1")) << log;
    EXPECT_TRUE(Contains(log, "the servers do not run the same job: rank 1 has optimizer=sgd lr "
                              "0.02"))
        << log;
  }
  // Another model on rank 1.
  Zoo("mlp --depth 2 --width 32 --samples 48", "bad_other");
  const std::string other = Plan("bad_other", "1MiB", 8);
  logs = RunWorld(2, "--iterations 2 --devices cpu:2x1MiB", [&](int r) {
    return r == 0 ? absl::StrCat(each, " --model ", Tmp("bad.pt"), " --data ", Tmp("bad_data.pt"))
                  : absl::StrCat(other, " --model ", Tmp("bad_other.pt"), " --data ",
                                 Tmp("bad_other_data.pt"));
  });
  for (const std::string& log : logs) {
    EXPECT_TRUE(Contains(log, "exit 1")) << log;
    EXPECT_TRUE(Contains(log, "the servers do not run the same job: rank 1 has model sha256="))
        << log;
  }
  // A global minibatch that does not divide among the servers.
  auto plan = RunCommand(absl::StrCat(kPlan, " ", Tmp("bad.pt"), " --sample-input ",
                                      Tmp("bad_data.pt"), " --gpus 2 --device-memory 1MiB "
                                      "--servers 2 --global-minibatch 15 -o ", Tmp("bad15.pb")));
  EXPECT_EQ(plan.exit_code, 2) << plan.output;
  EXPECT_TRUE(Contains(plan.output, "--global-minibatch 15 does not divide among 2 servers"))
      << plan.output;
  // Rank 0 alone in a world of 2.
  const auto start = std::chrono::steady_clock::now();
  auto r = RunCommand(absl::StrCat(kExec, " run ", run, "--iterations 2 --rank 0 --world-size 2 "
                                   "--world-timeout 2 --store 127.0.0.1:", FreePort()));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "within 2s")) << r.output;
  EXPECT_LT(waited, 30);
  // Rank 1 killed (SIGKILL) once training is under way: rank 0 fails
  // within the timeout (5 s) with the reason.
  const std::string store = absl::StrCat("127.0.0.1:", FreePort());
  const std::string world = absl::StrCat(" --iterations 100000 --world-timeout 5 --world-size 2 "
                                         "--store ", store);
  r = RunCommand(absl::StrCat(
      kExec, " run ", run, world, " --rank 1 --metrics ", Tmp("bad1.jsonl"), " > ",
      Tmp("bad1.log"), " 2>&1 & P=$!; ", kExec, " run ", run, world, " --rank 0 > ",
      Tmp("bad0.log"), " 2>&1 & Q=$!; while [ ! -s ", Tmp("bad1.jsonl"),
      " ]; do sleep 0.1; done; kill -9 $P; T=$(date +%s%N); wait $Q; echo \"rank 0 exit $?\"; "
      "echo \"after $(( ($(date +%s%N) - T) / 1000000 )) ms\""));
  const std::string log0 = *common::ReadFileToString(Tmp("bad0.log"));
  EXPECT_TRUE(Contains(r.output, "rank 0 exit 1")) << r.output << log0;
  EXPECT_TRUE(Contains(log0, "iteration ")) << log0;
  EXPECT_TRUE(Contains(log0, "failed: lost rank 1 (")) << log0;
  std::vector<std::string> after = absl::StrSplit(r.output.substr(r.output.find("after ") + 6), ' ');
  double ms = 1e9;
  ASSERT_TRUE(absl::SimpleAtod(after[0], &ms)) << r.output;
  EXPECT_LT(ms, (5 + 10) * 1000) << r.output;
  // Usage.
  r = RunCommand(absl::StrCat(kExec, " run ", run, " --iterations 1 --world-size 2"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "--world-size > 1 needs --store HOST:PORT")) << r.output;
}

}  // namespace
}  // namespace harmony
