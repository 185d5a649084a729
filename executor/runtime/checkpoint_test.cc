// Checkpoints: K iterations straight equal K/2, a checkpoint
// written to disk and read back into a fresh runtime, and K/2 more, bit for
// bit (losses and every parameter and buffer), with SGD-momentum, Adam,
// dropout, BatchNorm and a shuffled sample order; on another plan (device
// count and mode) within 1e-6; bad checkpoints are refused by name.

#include "executor/runtime/checkpoint.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "executor/runtime/runtime.h"
#include "executor/runtime/runtime_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

using ::testing::HasSubstr;
using runtime_testing::GetModel;
using runtime_testing::MakeConfig;
using runtime_testing::MakePlan;
using runtime_testing::Mode;
using runtime_testing::Model;
using runtime_testing::Optimizer;
using runtime_testing::Options;
using runtime_testing::RelativeDifference;
using runtime_testing::Tmp;

constexpr int kSteps = 4;

std::unique_ptr<Runtime> Start(const Model& m, const proto::Plan& plan, const RuntimeOptions& o) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(plan, m.path, o);
  EXPECT_TRUE(rt.ok()) << rt.status();
  if (!rt.ok()) return nullptr;
  EXPECT_TRUE((*rt)->SetData(m.data).ok());
  return *std::move(rt);
}

// Runs `n` iterations; their losses.
std::vector<double> Train(Runtime& rt, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<IterationMetrics> it = rt.RunIteration();
    EXPECT_TRUE(it.ok()) << it.status();
    if (!it.ok()) break;
    losses.push_back(it->loss);
  }
  return losses;
}

// Every parameter and buffer of the model, from the runtime's host copy.
std::map<std::string, at::Tensor> Weights(const Model& m, const Runtime& rt) {
  std::map<std::string, at::Tensor> out;
  torch::jit::Module model = torch::jit::load(m.path);
  for (const auto& p : model.named_parameters()) out[p.name] = rt.HostTensor(p.name)->clone();
  for (const auto& b : model.named_buffers()) {
    absl::StatusOr<at::Tensor> t = rt.HostTensor(b.name);
    if (t.ok()) out[b.name] = t->clone();
  }
  return out;
}

// Trains kSteps straight on `first`; then kSteps/2 on `first`, a checkpoint
// through a file, and kSteps/2 on `second` in a fresh runtime. Expects the
// same losses and weights: bit for bit when `tolerance` is 0.
void ExpectResumeEqualsStraight(const Model& m, const proto::Plan& first,
                                const proto::Plan& second, RuntimeOptions o1,
                                RuntimeOptions o2, double tolerance) {
  std::unique_ptr<Runtime> straight = Start(m, first, o1);
  ASSERT_NE(straight, nullptr);
  const std::vector<double> want = Train(*straight, kSteps);
  const std::map<std::string, at::Tensor> want_weights = Weights(m, *straight);

  const std::string path = Tmp("resume/checkpoint-2.pt");
  {
    std::unique_ptr<Runtime> a = Start(m, first, o1);
    ASSERT_NE(a, nullptr);
    const std::vector<double> head = Train(*a, kSteps / 2);
    Checkpoint c = *a->MakeCheckpoint();
    EXPECT_EQ(c.iteration, kSteps / 2);
    EXPECT_FALSE(c.weights.empty());
    ASSERT_TRUE(WriteCheckpoint(c, path).ok());
    for (int i = 0; i < kSteps / 2; ++i) EXPECT_EQ(head[i], want[i]) << "iteration " << i;
  }
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  o2.seed = 12345;  // The checkpoint's seed wins: the dropout stream goes on.
  std::unique_ptr<Runtime> b = Start(m, second, o2);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->Restore(*read).ok());
  EXPECT_EQ(b->iterations_done(), kSteps / 2);
  const std::vector<double> tail = Train(*b, kSteps / 2);
  ASSERT_EQ(tail.size(), static_cast<size_t>(kSteps / 2));
  for (int i = 0; i < kSteps / 2; ++i) {
    const double w = want[kSteps / 2 + i];
    if (tolerance == 0) {
      EXPECT_EQ(tail[i], w) << "iteration " << kSteps / 2 + i;
    } else {
      EXPECT_NEAR(tail[i], w, tolerance * std::abs(w)) << "iteration " << kSteps / 2 + i;
    }
  }
  const std::map<std::string, at::Tensor> got = Weights(m, *b);
  ASSERT_EQ(got.size(), want_weights.size());
  for (const auto& [name, t] : want_weights) {
    if (tolerance == 0) {
      EXPECT_TRUE(at::equal(got.at(name), t))
          << name << " differs by " << RelativeDifference(got.at(name), t);
    } else if (at::isFloatingType(t.scalar_type())) {
      EXPECT_LE(RelativeDifference(got.at(name), t), tolerance) << name;
    }
  }
}

TEST(CheckpointTest, ResumingEqualsTrainingStraightBitForBit) {
  struct Case {
    std::string family;
    double dropout;
    std::string optimizer;
    bool shuffle;
  };
  for (const Case& c : {Case{"gpt", 0, "sgd", false}, Case{"gpt", 0.2, "adam", true},
                        Case{"resnet", 0, "adam", false}}) {
    SCOPED_TRACE(absl::StrCat(c.family, " dropout ", c.dropout, " ", c.optimizer,
                              c.shuffle ? " shuffled" : ""));
    const Model& m = GetModel(c.family, c.dropout);
    const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 2, 2, 2, 2));
    RuntimeOptions o = Options(2, 1ull << 30, Optimizer(c.optimizer));
    o.shuffle = c.shuffle;
    ExpectResumeEqualsStraight(m, plan, plan, o, o, 0);
  }
}

TEST(CheckpointTest, ResumesOnAnotherDeviceCountAndMode) {
  const Model& m = GetModel("gpt", 0.2);
  const proto::Plan vpp2 = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 2, 2, 2, 2));
  const proto::Plan vdp4 = MakePlan(m, MakeConfig(m, Mode::kVdp, 4, 1, 3, 2, 2));
  ExpectResumeEqualsStraight(m, vpp2, vdp4, Options(2, 1ull << 30, Optimizer("adam")),
                             Options(4, 1ull << 30, Optimizer("adam")), 1e-6);
}

TEST(CheckpointTest, RefusesAnotherModelOptimizerOrMinibatch) {
  const Model& gpt = GetModel("gpt");
  const proto::Plan plan = MakePlan(gpt, MakeConfig(gpt, Mode::kVpp, 2, 2, 2, 2, 2));
  std::unique_ptr<Runtime> a = Start(gpt, plan, Options(2, 1ull << 30, Optimizer("adam")));
  ASSERT_NE(a, nullptr);
  Train(*a, 1);
  const Checkpoint c = *a->MakeCheckpoint();

  const Model& mlp = GetModel("mlp");
  std::unique_ptr<Runtime> other =
      Start(mlp, MakePlan(mlp, MakeConfig(mlp, Mode::kVpp, 2, 1, 1, 2, 2)),
            Options(2, 1ull << 30, Optimizer("adam")));
  ASSERT_NE(other, nullptr);
  absl::Status s = other->Restore(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the checkpoint is of another model"));

  std::unique_ptr<Runtime> sgd = Start(gpt, plan, Options(2, 1ull << 30, Optimizer("sgd")));
  s = sgd->Restore(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("holds adam state; this run's optimizer is sgd"));

  runtime_testing::Config sixteen = MakeConfig(gpt, Mode::kVpp, 2, 2, 2, 2, 2);
  sixteen.minibatch = 16;
  std::unique_ptr<Runtime> larger =
      Start(gpt, MakePlan(gpt, sixteen), Options(2, 1ull << 30, Optimizer("adam")));
  ASSERT_NE(larger, nullptr);
  s = larger->Restore(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("trained with minibatch 8; this run's is 16"));

  // A tensor missing: named, and nothing changed.
  Checkpoint missing = c;
  const std::string dropped = missing.weights.begin()->first;
  missing.weights.erase(missing.weights.begin());
  std::unique_ptr<Runtime> fresh = Start(gpt, plan, Options(2, 1ull << 30, Optimizer("adam")));
  s = fresh->Restore(missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr(dropped));
  EXPECT_EQ(fresh->iterations_done(), 0);
}

TEST(CheckpointTest, FilesAreCheckedListedAndPruned) {
  const std::string dir = Tmp("files");
  std::filesystem::remove_all(dir);
  Checkpoint c;
  c.model_sha256 = "abc";
  c.minibatch = 8;
  c.optimizer = "sgd";
  c.weights["w"] = at::arange(6, at::kFloat).view({2, 3});
  c.metrics = {"{\"iteration\": 0}"};
  for (int i : {1, 2, 3}) {
    c.iteration = i;
    ASSERT_TRUE(WriteCheckpoint(c, CheckpointPath(dir, i)).ok());
  }
  EXPECT_EQ(ListCheckpoints(dir).size(), 3u);
  EXPECT_EQ(*ResolveCheckpoint(dir), CheckpointPath(dir, 3));
  PruneCheckpoints(dir, 2);
  const auto left = ListCheckpoints(dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left.begin()->first, 2);
  absl::StatusOr<Checkpoint> back = ReadCheckpoint(CheckpointPath(dir, 3));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->iteration, 3);
  EXPECT_EQ(back->model_sha256, "abc");
  EXPECT_EQ(back->metrics, c.metrics);
  EXPECT_TRUE(at::equal(back->weights.at("w"), c.weights.at("w")));

  // Not a checkpoint, a truncated one, none at all.
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("junk.pt"), "not a checkpoint").ok());
  absl::StatusOr<Checkpoint> junk = ReadCheckpoint(Tmp("junk.pt"));
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(junk.status().message()), HasSubstr("not a Harmony checkpoint"));
  const std::string whole = *common::ReadFileToString(CheckpointPath(dir, 3));
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("cut.pt"), whole.substr(0, whole.size() / 2)).ok());
  EXPECT_EQ(ReadCheckpoint(Tmp("cut.pt")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadCheckpoint(Tmp("none.pt")).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::create_directories(Tmp("empty"));
  EXPECT_EQ(ResolveCheckpoint(Tmp("empty")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace harmony::executor
