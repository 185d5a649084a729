// The runtime against the plain LibTorch loop (exactness), the plan's byte
// counts and memory caps, and bad input. Models come from the zoo, are
// profiled for real, and plans are built by the planner library.

#include "executor/runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/decomposer.h"
#include "common/files.h"
#include "executor/runtime/reference.h"
#include "executor/runtime/runtime_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/plan/plan_builder.h"
#include "planner/profile/profiler.h"
#include "planner/search/cost_model.h"
#include "planner/search/search.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"
#include "zoo/zoo.h"

namespace harmony::executor {
namespace {

using ::testing::HasSubstr;
using runtime_testing::Config;
using runtime_testing::ExpectLikeReference;
using runtime_testing::ExpectSameLosses;
using runtime_testing::GetFileModel;
using runtime_testing::GetModel;
using runtime_testing::kIterations;
using runtime_testing::kMinibatch;
using runtime_testing::MakeConfig;
using runtime_testing::MakePlan;
using runtime_testing::Mode;
using runtime_testing::Model;
using runtime_testing::Optimizer;
using runtime_testing::Options;
using runtime_testing::Reference;
using runtime_testing::RunPlan;
using runtime_testing::Schedule;
using runtime_testing::Tmp;
using runtime_testing::TrainingRun;
using runtime_testing::Zoo;

struct Case {
  std::string family;
  Mode mode;
  int devices;
  std::string optimizer;
  int fwd, bwd;  // Pack sizes.
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat(c.family, "_", c.mode == Mode::kVpp ? "vPP" : "vDP", "_", c.devices,
                      "dev_", c.optimizer, "_f", c.fwd, "b", c.bwd);
}

class ExactnessTest : public testing::TestWithParam<Case> {};

// The central test: per-iteration losses and final weights equal the plain
// loop's. Bit-identical in vPP and on one device (every sum in the same
// order); within 1e-6 relative in vDP on several devices, where gradients
// are summed per device and then across devices (a different order).
TEST_P(ExactnessTest, LossesAndWeightsEqualThePlainLoop) {
  const Case& c = GetParam();
  const Model& m = GetModel(c.family);
  const proto::Plan plan = MakePlan(m, MakeConfig(m, c.mode, c.devices, c.fwd, c.bwd, 2, 2));
  TrainingRun run = RunPlan(m, plan, Options(c.devices, 1ull << 30, Optimizer(c.optimizer)));
  ASSERT_EQ(run.losses.size(), static_cast<size_t>(kIterations));

  const bool same_order = c.mode == Mode::kVpp || c.devices == 1;
  // vDP keeps device 0's BatchNorm statistics: buffers only match in vPP.
  ExpectLikeReference(m, plan, run, Reference(c.optimizer), same_order ? 0 : 1e-6, same_order);
  // Training moved the weights.
  EXPECT_NE(run.losses.front(), run.losses.back());
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ExactnessTest,
    testing::Values(Case{"mlp", Mode::kVpp, 1, "sgd", 1, 2}, Case{"mlp", Mode::kVpp, 2, "adam", 2, 1},
                    Case{"mlp", Mode::kVpp, 4, "sgd", 1, 1}, Case{"mlp", Mode::kVdp, 2, "sgd", 2, 2},
                    Case{"mlp", Mode::kVdp, 4, "adam", 1, 2}, Case{"gpt", Mode::kVpp, 1, "adam", 2, 3},
                    Case{"gpt", Mode::kVpp, 2, "sgd", 2, 1}, Case{"gpt", Mode::kVpp, 4, "adam", 1, 2},
                    Case{"gpt", Mode::kVdp, 2, "adam", 2, 2}, Case{"bert", Mode::kVpp, 2, "sgd", 1, 2},
                    Case{"bert", Mode::kVpp, 4, "adam", 2, 1}, Case{"bert", Mode::kVdp, 4, "sgd", 2, 3},
                    Case{"resnet", Mode::kVpp, 2, "sgd", 1, 2},
                    Case{"resnet", Mode::kVpp, 4, "adam", 2, 1},
                    Case{"resnet", Mode::kVdp, 2, "sgd", 1, 1}),
    CaseName);

// Against torch::optim itself: the fused optimizer rounds as torch's
// separate passes do, so weights and losses are bit-identical.
TEST(RuntimeTest, MatchesTorchOptimBitForBit) {
  for (const std::string opt : {"sgd", "adam"}) {
    const Model& m = GetModel("gpt");
    const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 2, 2, 2, 2));
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer(opt)));
    ReferenceOptions ro = Reference(opt);
    ro.harmony_optimizer = false;
    ExpectLikeReference(m, plan, run, ro, 0, false);
  }
}

// Forward microbatches larger than backward ones: activations regroup
// through the host, and the recompute sees rows computed at another batch
// size (matrix kernels may round differently), so within 1e-6.
TEST(RuntimeTest, LargerForwardMicrobatches) {
  const Model& m = GetModel("mlp");  // Neither dropout nor batch statistics.
  for (Mode mode : {Mode::kVpp, Mode::kVdp}) {
    const proto::Plan plan = MakePlan(m, MakeConfig(m, mode, 2, 2, 2, 4, 1));
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("sgd")));
    ExpectLikeReference(m, plan, run, Reference("sgd"), 1e-6, false);
  }
}

// With dropout, the random stream is defined per (iteration, microbatch,
// vLayer): every mode and device count gives the losses and weights of the
// reference running the same vLayers in plain order with that seeding.
TEST(RuntimeTest, DropoutIsReplayedAndIndependentOfTheSchedule) {
  const Model& m = GetModel("gpt", 0.2);
  std::vector<std::vector<double>> all;
  for (auto [mode, devices] : std::vector<std::pair<Mode, int>>{
           {Mode::kVpp, 1}, {Mode::kVpp, 2}, {Mode::kVpp, 4}, {Mode::kVdp, 2}}) {
    const proto::Plan plan = MakePlan(m, MakeConfig(m, mode, devices, 2, 2, 2, 2));
    TrainingRun run = RunPlan(m, plan, Options(devices, 1ull << 30, Optimizer("adam")));
    ExpectLikeReference(m, plan, run, Reference("adam", true), mode == Mode::kVpp ? 0 : 1e-6,
                        false);
    all.push_back(run.losses);
  }
  for (const auto& losses : all) ExpectSameLosses(losses, all.front(), 1e-6);
  // The masks are really drawn: without dropout the losses differ.
  const Model& plain = GetModel("gpt");
  const proto::Plan plan = MakePlan(plain, MakeConfig(plain, Mode::kVpp, 2, 2, 2, 2, 2));
  TrainingRun run = RunPlan(plain, plan, Options(2, 1ull << 30, Optimizer("adam")));
  EXPECT_NE(run.losses.front(), all.front().front());
}

// Kept activations (Config::keep): the backward runs on what the forward
// saved, without a recompute; dropout's masks come from the forward. Two
// backward packs per forward pack (so a forward task keeps two packs, the
// second's live-ins made inside the task), in vPP on 1 and 2 devices and
// vDP: the reference's losses and weights, bit for bit where every sum runs
// in its order, and the bytes the plan says (RunPlan checks them).
TEST(RuntimeTest, KeptActivationsTrainLikeTheRecompute) {
  for (const std::string family : {"gpt", "resnet"}) {
    const Model& m = GetModel(family, family == "gpt" ? 0.2 : 0.0);
    for (auto [mode, devices] : std::vector<std::pair<Mode, int>>{
             {Mode::kVpp, 1}, {Mode::kVpp, 2}, {Mode::kVdp, 2}}) {
      Config c = MakeConfig(m, mode, devices, 2, 1, 2, 2);
      c.keep.assign(c.backward_packs.size(), true);
      c.keep.back() = false;
      const proto::Plan plan = MakePlan(m, c);
      SCOPED_TRACE(absl::StrCat(family, " ", planner::ModeName(mode), " on ", devices,
                                " device(s)"));
      ASSERT_EQ(plan.config().kept_packs_size(), c.backward_packs.size() - 1);
      EXPECT_GT(plan.estimates().swap().kept_out(), 0u);
      EXPECT_EQ(plan.estimates().swap().kept_in(), plan.estimates().swap().kept_out());
      EXPECT_EQ(plan.estimates().swap().stash_out(), 0u);
      TrainingRun run = RunPlan(m, plan, Options(devices, 1ull << 30, Optimizer("adam")));
      ExpectLikeReference(m, plan, run, Reference("adam", family == "gpt"),
                          mode == Mode::kVpp ? 0 : 1e-6, false);
    }
  }
}

// A kept pack needs its vLayers in one forward pack and equal microbatches.
TEST(RuntimeTest, KeptPacksThatCannotKeepAreRefused) {
  const Model& m = GetModel("mlp");
  Config across = MakeConfig(m, Mode::kVpp, 1, 1, 2, 2, 2);
  across.keep.assign(across.backward_packs.size(), true);
  across.keep.back() = false;
  absl::StatusOr<planner::TaskGraph> g = planner::BuildTaskGraph(*m.cost, across);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(absl::StrContains(g.status().message(), "no forward pack holds all its vLayers"))
      << g.status();
  Config unequal = MakeConfig(m, Mode::kVpp, 1, 1, 1, 4, 2);
  unequal.keep.assign(unequal.backward_packs.size(), false);
  unequal.keep.front() = true;
  g = planner::BuildTaskGraph(*m.cost, unequal);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(absl::StrContains(g.status().message(), "equal forward and backward microbatches"))
      << g.status();
}

// Models scripted in Python the way users write them (tests/testdata):
// a GPT with dropout, a torchvision-style ResNet with BatchNorm (which cannot
// train on one sample: the profile starts at 2), and a BERT
// on nn.TransformerEncoder, whose attention reads its in_proj_weight in two
// vLayers (a shared parameter: its two gradients are added on the host, in
// another order than autograd's, hence 1e-6 there).
TEST(RuntimeTest, ModelsScriptedInPython) {
  struct External {
    std::string name;
    double tolerance;
  };
  for (const External& e : {External{"user_gpt", 0}, External{"torchvision_resnet", 0},
                            External{"user_bert", 1e-6}}) {
    SCOPED_TRACE(e.name);
    const Model& m = GetFileModel(absl::StrCat("tests/testdata/", e.name, ".pt"),
                                  absl::StrCat("tests/testdata/", e.name, "_data.pt"));
    if (e.name == "torchvision_resnet") {
      EXPECT_EQ(m.cost->min_microbatch(), 2);
    }
    const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 1, 1, 2, 2));
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("sgd")));
    ExpectLikeReference(m, plan, run, Reference("sgd", true), e.tolerance, e.tolerance == 0);
  }
}

// The baselines run on the same runtime and train the same way, a weight
// tied to two uses (GPT-2's lm_head.weight = wte.weight) included.
TEST(RuntimeTest, BaselineSchedulesTrainTheSame) {
  for (const std::string family : {"gpt", "resnet", "gpt2_tied"}) {
    const Model& m = family == "gpt2_tied"
                         ? GetFileModel("tests/suite/gpt2_tied.pt", "tests/suite/gpt2_tied_data.pt")
                         : GetModel(family);
    for (Schedule s : {Schedule::kOndemand, Schedule::kGpipe, Schedule::kDpSwap}) {
      planner::SearchOptions so;
      so.num_devices = 2;
      so.device_memory = 1ull << 30;
      so.minibatch = kMinibatch;
      so.schedule = s;
      absl::StatusOr<planner::SearchResult> r = planner::PlanBaseline(*m.cost, so, 2);
      ASSERT_TRUE(r.ok()) << r.status();
      const proto::Plan plan = planner::BuildPlan(m.profile, r->graph, r->sim, std::nullopt);
      SCOPED_TRACE(absl::StrCat(family, " ", planner::ScheduleName(s)));
      TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("sgd")));
      ExpectLikeReference(m, plan, run, Reference("sgd"), 1e-6, false);
    }
  }
}

// Runs of one plan are bit for bit the same, however the devices' timing
// falls: the host sums each vLayer's gradients in the plan's order
// (plan::GradientSumOrder), not as they arrive. dp-swap on 2 devices sends
// every vLayer's gradients from both, once a round; a vPP plan summing on
// the host sends them after every microbatch.
TEST(RuntimeTest, RunsOfAPlanAreBitIdentical) {
  const Model& m = GetModel("gpt");
  planner::SearchOptions so;
  so.num_devices = 2;
  so.device_memory = 1ull << 30;
  so.minibatch = kMinibatch;
  so.schedule = Schedule::kDpSwap;
  absl::StatusOr<planner::SearchResult> r = planner::PlanBaseline(*m.cost, so, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  Config host_summed = MakeConfig(m, Mode::kVpp, 2, 2, 2, 1, 1);
  host_summed.host_sums.assign(host_summed.backward_packs.size(), true);
  const torch::jit::Module initial = torch::jit::load(m.path);
  for (const proto::Plan& plan : {planner::BuildPlan(m.profile, r->graph, r->sim, std::nullopt),
                                  MakePlan(m, host_summed)}) {
    SCOPED_TRACE(plan.config().host_summed_packs_size() > 0 ? "vPP summed on the host" : "dp-swap");
    const TrainingRun first = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("adam")));
    // Every send was summed into the host's store, on the thread that sent
    // it; what was kept aside for its turn is part of what was sent.
    for (const IterationMetrics& it : first.metrics) {
      EXPECT_GT(it.host_sum_s, 0);
      EXPECT_LE(it.host_sum_early_bytes, it.bytes.gradients_out);
    }
    for (int again = 0; again < 4; ++again) {
      const TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("adam")));
      EXPECT_EQ(run.losses, first.losses);
      for (const auto& p : initial.named_parameters()) {
        absl::StatusOr<at::Tensor> a = first.runtime->HostTensor(p.name);
        absl::StatusOr<at::Tensor> b = run.runtime->HostTensor(p.name);
        ASSERT_TRUE(a.ok() && b.ok()) << p.name;
        EXPECT_TRUE(at::equal(*a, *b)) << p.name << " differs between runs by "
                                       << runtime_testing::RelativeDifference(*b, *a);
      }
    }
  }
}

// Single-buffered plans (no prefetch: each task swaps its own weights in
// when it starts), and plans where only some packs' weights come late,
// train exactly like the plain loop, and the devices peak no higher than
// the plan says.
TEST(RuntimeTest, SingleBufferedAndLatePlansTrainTheSame) {
  const Model& m = GetModel("gpt");
  for (auto [mode, single] : std::vector<std::pair<Mode, bool>>{
           {Mode::kVpp, true}, {Mode::kVdp, true}, {Mode::kVpp, false}, {Mode::kVdp, false}}) {
    Config c = MakeConfig(m, mode, 2, 1, 1, 2, 2);
    c.prefetch = !single;
    if (!single) {
      // Every other pack late, the first backward pack among them.
      for (size_t p = 0; p < c.forward_packs.size(); ++p) c.late_forward.push_back(p % 2 == 1);
      for (size_t p = 0; p < c.backward_packs.size(); ++p) c.late_backward.push_back(p % 2 == 0);
    }
    const proto::Plan plan = MakePlan(m, c);
    EXPECT_EQ(plan.config().single_buffer(), single);
    // The plan carries the choice per pack, read back as it was given.
    absl::StatusOr<planner::TaskGraph> read = planner::TaskGraphFromPlan(plan);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->config.late_forward, c.late_forward);
    EXPECT_EQ(read->config.late_backward, c.late_backward);
    int prefetches = 0, expected = 0;
    for (const proto::DeviceSchedule& d : plan.devices()) {
      for (int i = 0; i < d.tasks_size(); ++i) {
        for (const proto::Transfer& x : d.tasks(i).transfers()) {
          prefetches += x.kind() == proto::PREFETCH_WEIGHTS;
        }
        if (i == 0) continue;
        const planner::Task& t = read->tasks[d.tasks(i).id()];
        const planner::Task& before = read->tasks[d.tasks(i - 1).id()];
        expected += !(before.vlayers == t.vlayers) && c.Prefetches(t.kind, t.pack);
      }
    }
    EXPECT_EQ(prefetches, expected);
    if (single) {
      EXPECT_EQ(prefetches, 0);
    } else {
      EXPECT_GT(prefetches, 0);
    }
    SCOPED_TRACE(absl::StrCat(planner::ModeName(mode), single ? " single-buffered" : " late"));
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("sgd")));
    ExpectLikeReference(m, plan, run, Reference("sgd"), 1e-6, false);
    ASSERT_FALSE(run.metrics.empty());
    EXPECT_GT(run.metrics.back().bytes.weights_in, 0u);
    for (size_t d = 0; d < run.metrics.back().device_peak_bytes.size(); ++d) {
      EXPECT_LE(run.metrics.back().device_peak_bytes[d],
                plan.estimates().device_peak_bytes(static_cast<int>(d)))
          << "device " << d;
    }
    // The evaluation swaps each pack in when it starts too, and gives the
    // loss the prefetching plan's evaluation gives after the same training.
    ASSERT_TRUE(run.runtime->SetEvalData(m.data).ok());
    absl::StatusOr<EvalMetrics> single = run.runtime->Evaluate(2);
    ASSERT_TRUE(single.ok()) << single.status();
    Config prefetching = MakeConfig(m, mode, 2, 1, 1, 2, 2);
    TrainingRun other =
        RunPlan(m, MakePlan(m, prefetching), Options(2, 1ull << 30, Optimizer("sgd")));
    ASSERT_TRUE(other.runtime->SetEvalData(m.data).ok());
    absl::StatusOr<EvalMetrics> prefetched = other.runtime->Evaluate(2);
    ASSERT_TRUE(prefetched.ok()) << prefetched.status();
    EXPECT_EQ(single->loss, prefetched->loss);
    EXPECT_GT(single->weights_in, 0u);
  }
}

// vDP plans that keep the activations between a device's packs on it train
// exactly like the plain loop (a residual net's skips and a GPT's stream
// alike), move no activations over the host link, and peak no higher than
// planned.
TEST(RuntimeTest, LocalActivationsTrainTheSame) {
  for (const std::string family : {"gpt", "resnet"}) {
    const Model& m = GetModel(family);
    Config c = MakeConfig(m, Mode::kVdp, 2, 1, 1, 2, 2);
    c.local_activations = true;
    const proto::Plan plan = MakePlan(m, c);
    EXPECT_TRUE(plan.config().local_activations());
    SCOPED_TRACE(family);
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("sgd")));
    ExpectLikeReference(m, plan, run, Reference("sgd"), 1e-6, false);
    ASSERT_FALSE(run.metrics.empty());
    EXPECT_EQ(run.metrics.back().bytes.activations_in, 0u);
    EXPECT_EQ(run.metrics.back().bytes.activations_out, 0u);
    EXPECT_GT(run.metrics.back().bytes.stash_in, 0u);
    for (size_t d = 0; d < run.metrics.back().device_peak_bytes.size(); ++d) {
      EXPECT_LE(run.metrics.back().device_peak_bytes[d],
                plan.estimates().device_peak_bytes(static_cast<int>(d)))
          << "device " << d << " at " << run.metrics.back().device_peak_activity[d];
    }
  }
}

// Backward packs at microbatches of their own (plan::Config::
// backward_pack_microbatch) train like the plain loop over the last pack's
// microbatches, within 1e-6 of the step: a pack at 4 sums its weights'
// gradients over 4 samples in one product where the loop adds two of 2
// (the same values in another order). Gradients between packs of
// different sizes are cut and joined on the host; peaks stay as planned.
TEST(RuntimeTest, BackwardPacksAtTheirOwnMicrobatchesTrainLikeThePlainLoop) {
  for (Mode mode : {Mode::kVpp, Mode::kVdp}) {
    SCOPED_TRACE(mode == Mode::kVpp ? "vPP" : "vDP");
    const Model& m = GetModel("gpt");
    Config c = MakeConfig(m, mode, 2, 2, 3, 4, 2);
    c.backward_pack_microbatch = {4, 4, 2};
    const proto::Plan plan = MakePlan(m, c);
    ASSERT_EQ(plan.config().backward_pack_microbatches_size(), 3);
    int at_four = 0;  // Backward tasks of packs 0 and 1 run microbatches of 4.
    for (const proto::DeviceSchedule& device : plan.devices()) {
      for (const proto::Task& t : device.tasks()) {
        if (t.kind() != proto::BACKWARD || t.microbatches_size() == 0) continue;
        EXPECT_EQ(t.microbatches(0).size(), t.pack() < 2 ? 4u : 2u) << "pack " << t.pack();
        at_four += t.pack() < 2 ? 1 : 0;
      }
    }
    EXPECT_GT(at_four, 0);
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("adam")));
    ExpectLikeReference(m, plan, run, Reference("adam"), 1e-6, false);
    ASSERT_FALSE(run.metrics.empty());
    for (size_t d = 0; d < run.metrics.back().device_peak_bytes.size(); ++d) {
      EXPECT_LE(run.metrics.back().device_peak_bytes[d],
                plan.estimates().device_peak_bytes(static_cast<int>(d)))
          << "device " << d << " at " << run.metrics.back().device_peak_activity[d];
    }
  }
}

// A minibatch in waves (plan::Config::waves) trains like the plain loop
// over the same microbatches, as vDP does (its sums are in another order:
// each device's, then across devices, then across waves on the host), with
// dropout replayed and BatchNorm; every wave swaps the weights in and the
// gradients out again (the bytes checked against the plan's in RunPlan),
// and a device holds no more than planned.
TEST(RuntimeTest, WavesTrainLikeThePlainLoop) {
  for (const std::string family : {"gpt", "resnet"}) {
    SCOPED_TRACE(family);
    const Model& m = GetModel(family, family == "gpt" ? 0.2 : 0.0);
    Config c = MakeConfig(m, Mode::kVdp, 2, 1, 1, 2, 2);
    c.local_activations = true;
    const proto::Plan one = MakePlan(m, c);
    c.waves = 2;
    const proto::Plan plan = MakePlan(m, c);
    ASSERT_EQ(plan.config().waves(), 2u);
    // Again per wave, but for the first pack's, which stay on the devices
    // from a wave's last backward into the next wave's first forward.
    EXPECT_GT(plan.estimates().swap().weights_in(), one.estimates().swap().weights_in());
    EXPECT_LT(plan.estimates().swap().weights_in(), 2 * one.estimates().swap().weights_in());
    EXPECT_EQ(plan.estimates().swap().gradients_out(),
              2 * one.estimates().swap().gradients_out());
    TrainingRun run = RunPlan(m, plan, Options(2, 1ull << 30, Optimizer("adam")));
    ExpectLikeReference(m, plan, run, Reference("adam", family == "gpt"), 1e-6, false);
    ASSERT_FALSE(run.metrics.empty());
    EXPECT_EQ(run.metrics.back().bytes.activations_in, 0u);
    for (size_t d = 0; d < run.metrics.back().device_peak_bytes.size(); ++d) {
      EXPECT_LE(run.metrics.back().device_peak_bytes[d],
                plan.estimates().device_peak_bytes(static_cast<int>(d)))
          << "device " << d << " at " << run.metrics.back().device_peak_activity[d];
    }
  }
}

// A searched plan under a cap that forces swapping: the measured peak stays
// under the cap; a quarter of the cap gives the out-of-memory error.
TEST(RuntimeTest, PeaksStayUnderTheCapAndTooLittleMemoryIsAnError) {
  const Model& m = GetModel("gpt");
  const uint64_t total = m.cost->WeightBytes(0, m.cost->num_layers()) * 4;
  const uint64_t cap = total / 2;
  planner::SearchOptions so;
  so.num_devices = 2;
  so.device_memory = cap * 9 / 10;  // harmony-plan's default 10% reserve.
  so.minibatch = kMinibatch;
  absl::StatusOr<planner::SearchResult> r = planner::SearchSchedule(*m.cost, so);
  ASSERT_TRUE(r.ok()) << r.status();
  r->graph.config.device_memory = cap;
  const proto::Plan plan = planner::BuildPlan(m.profile, r->graph, r->sim, std::nullopt);
  TrainingRun run = RunPlan(m, plan, Options(2, cap, Optimizer("sgd")));
  ASSERT_EQ(run.metrics.size(), static_cast<size_t>(kIterations));
  EXPECT_GT(run.metrics.back().bytes.weights_in, 0u);

  RuntimeOptions small = Options(2, cap / 16, Optimizer("sgd"));
  EXPECT_EQ(Runtime::Create(plan, m.path, small).status().code(),
            absl::StatusCode::kFailedPrecondition);
  small.check_device_memory = false;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(plan, m.path, small);
  ASSERT_TRUE(rt.ok()) << rt.status();
  ASSERT_TRUE((*rt)->SetData(m.data).ok());
  absl::StatusOr<IterationMetrics> it = (*rt)->RunIteration();
  EXPECT_EQ(it.status().code(), absl::StatusCode::kResourceExhausted) << it.status();
  EXPECT_THAT(std::string(it.status().message()), HasSubstr("out of memory on device cpu:"));
  EXPECT_THAT(std::string(it.status().message()), HasSubstr("task "));
  // The runtime can still report, and a second attempt fails the same way.
  EXPECT_EQ((*rt)->RunIteration().status().code(), absl::StatusCode::kResourceExhausted);
}

// Planned peaks hold in the runtime for Harmony and every
// baseline, at the default reserve, on caps down to a fraction of the
// weights (RunPlan checks each device's measured peak against the plan's and
// the cap; a plan that does not fit is not run).
TEST(RuntimeTest, PlannedPeaksHoldForEveryScheduleOnTinyCaps) {
  int ran = 0;
  for (const std::string family : {"gpt", "resnet"}) {
    const Model& m = GetModel(family);
    const uint64_t weights = m.cost->WeightBytes(0, m.cost->num_layers());
    for (double f : {0.5, 1.0, 2.0, 4.0}) {
      const uint64_t cap = static_cast<uint64_t>(weights * f);
      for (Schedule s : {Schedule::kHarmony, Schedule::kOndemand, Schedule::kGpipe,
                         Schedule::kDpSwap}) {
        planner::SearchOptions so;
        so.num_devices = 2;
        so.device_memory = cap * 9 / 10;  // harmony-plan's default 10% reserve.
        so.minibatch = kMinibatch;
        so.schedule = s;
        absl::StatusOr<planner::SearchResult> r = absl::ResourceExhaustedError("none");
        if (s == Schedule::kHarmony) {
          r = planner::SearchSchedule(*m.cost, so);
        } else {
          for (int u = 8; u >= 1; u /= 2) {  // The largest that fits, as users pick.
            r = planner::PlanBaseline(*m.cost, so, u);
            if (r.ok() && r->sim.fits) break;
          }
        }
        if (!r.ok() || !r->sim.fits) continue;
        r->graph.config.device_memory = cap;
        const proto::Plan plan = planner::BuildPlan(m.profile, r->graph, r->sim, std::nullopt);
        SCOPED_TRACE(absl::StrCat(family, " ", planner::ScheduleName(s), " on 2 x ", cap, " B"));
        TrainingRun run = RunPlan(m, plan, Options(2, cap, Optimizer("sgd")));
        EXPECT_EQ(run.metrics.size(), static_cast<size_t>(kIterations));
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 6);  // 7 of 16 fit today: the smallest caps leave only some.
}

TEST(RuntimeTest, BadInputIsRefusedBeforeTraining) {
  const Model& m = GetModel("mlp");
  const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 1, 1, 2, 2));
  const RuntimeOptions ok = Options(2, 1ull << 30, Optimizer("sgd"));

  // Another model (or a corrupt file): its hash differs from the plan's.
  const std::string other = Tmp("other.pt");
  ASSERT_TRUE(common::WriteFileAtomically(other, "not a model").ok());
  absl::Status s = Runtime::Create(plan, other, ok).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not the one the plan was made for"));
  EXPECT_FALSE(Runtime::Create(plan, Tmp("missing.pt"), ok).ok());

  // Too few devices.
  s = Runtime::Create(plan, m.path, Options(1, 1ull << 30, Optimizer("sgd"))).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs 2 devices"));

  // Too little host memory for the plan's store.
  RuntimeOptions tiny_host = ok;
  tiny_host.host_memory_limit = 1024;
  s = Runtime::Create(plan, m.path, tiny_host).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("of host memory"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("1.00 KiB is available"));

  // Data of the wrong shape.
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(plan, m.path, ok);
  ASSERT_TRUE(rt.ok()) << rt.status();
  common::TrainingData bad = m.data;
  bad.inputs[0] = at::zeros({24, 5});
  s = (*rt)->SetData(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("[24, 5]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("[N, 8]"));
  EXPECT_EQ((*rt)->RunIteration().status().code(), absl::StatusCode::kFailedPrecondition);
  // The right data still works afterwards.
  ASSERT_TRUE((*rt)->SetData(m.data).ok());
  EXPECT_TRUE((*rt)->RunIteration().ok());
}

TEST(RuntimeTest, SavedModelLoadsWithTheTrainedWeights) {
  const Model& m = GetModel("bert");
  const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 2, 2, 2, 2));
  RuntimeOptions o = Options(2, 1ull << 30, Optimizer("adam"));
  o.trace = true;
  TrainingRun run = RunPlan(m, plan, o);
  const std::string out = Tmp("trained.pt");
  ASSERT_TRUE(run.runtime->SaveModel(out).ok());
  torch::jit::Module trained = torch::jit::load(out);
  int checked = 0;
  for (const auto& p : trained.named_parameters()) {
    EXPECT_TRUE(at::equal(p.value, *run.runtime->HostTensor(p.name))) << p.name;
    ++checked;
  }
  EXPECT_GT(checked, 0);
  torch::jit::Module original = torch::jit::load(m.path);
  const std::string first = (*trained.named_parameters().begin()).name;
  EXPECT_FALSE(at::equal(*common::ResolveTensor(original, first),
                         *common::ResolveTensor(trained, first)));
  const std::string trace = run.runtime->ChromeTrace();
  EXPECT_THAT(trace, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(trace, HasSubstr("forward+loss+backward"));
  EXPECT_THAT(trace, HasSubstr("update "));
  EXPECT_THAT(MetricsJson(run.metrics[0]), HasSubstr("\"weights_in\""));
}

TEST(RuntimeTest, EmulatedHostLinkIsSlowerAndLabelled) {
  const Model& m = GetModel("mlp");
  const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 1, 1, 2, 2));
  RuntimeOptions o = Options(2, 1ull << 30, Optimizer("sgd"));
  TrainingRun fast = RunPlan(m, plan, o);
  const uint64_t moved = fast.metrics[0].bytes.to_device() + fast.metrics[0].bytes.to_host();
  // A link that needs at least 0.2 s for the iteration's traffic.
  o.emulate_host_link = static_cast<double>(moved) / 0.4;
  TrainingRun slow = RunPlan(m, plan, o);
  EXPECT_TRUE(slow.metrics[0].emulated_link);
  EXPECT_FALSE(fast.metrics[0].emulated_link);
  EXPECT_GE(slow.metrics[1].seconds, 0.2);
  ExpectSameLosses(slow.losses, fast.losses, 0);
}

TEST(RuntimeTest, DevicesInStepCountTheirWaitsForEachOther) {
  // vDP: each backward pack's gradients are summed across the devices, so
  // a device that hands its own over waits at least for the sum.
  const Model& m = GetModel("mlp");
  RuntimeOptions o = Options(2, 1ull << 30, Optimizer("sgd"));
  TrainingRun vdp = RunPlan(m, MakePlan(m, MakeConfig(m, Mode::kVdp, 2, 2, 2, 2, 2)), o);
  for (const IterationMetrics& it : vdp.metrics) {
    ASSERT_EQ(it.device_compute_s.size(), 2u);
    EXPECT_GT(it.device_compute_s[0], 0);
    EXPECT_GT(it.device_compute_s[1], 0);
    EXPECT_NEAR(it.device_compute_s[0] + it.device_compute_s[1], it.compute_s, 1e-6);
    EXPECT_GT(it.peer_wait_s, 0);
    EXPECT_LE(it.peer_wait_s, it.swap_wait_s);
  }
  // vPP: the devices pass activations, and never wait for each other's
  // gradients or weights.
  TrainingRun vpp = RunPlan(m, MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 1, 1, 2, 2)), o);
  for (const IterationMetrics& it : vpp.metrics) {
    ASSERT_EQ(it.device_compute_s.size(), 2u);
    EXPECT_EQ(it.peer_wait_s, 0);
  }
}

TEST(RuntimeTest, CancelStopsAtATaskBoundary) {
  const Model& m = GetModel("mlp");
  const proto::Plan plan = MakePlan(m, MakeConfig(m, Mode::kVpp, 2, 1, 1, 2, 2));
  RuntimeOptions o = Options(2, 1ull << 30, Optimizer("sgd"));
  auto calls = std::make_shared<std::atomic<int>>(0);
  o.cancelled = [calls] { return ++*calls > 3; };
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(plan, m.path, o);
  ASSERT_TRUE(rt.ok());
  ASSERT_TRUE((*rt)->SetData(m.data).ok());
  EXPECT_EQ((*rt)->RunIteration().status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace harmony::executor
