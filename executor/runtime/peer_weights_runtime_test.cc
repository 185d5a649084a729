// vDP peer weights in the runtime (docs/DESIGN.md §6.3): devices that copy
// each pack's parameters from device 0 train as the plan without, and
// device 0 keeps within the plan's peak however far behind the copying
// devices run.

#include <chrono>
#include <string>
#include <thread>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "executor/runtime/runtime.h"
#include "executor/runtime/runtime_testing.h"
#include "gtest/gtest.h"
#include "planner/search/cost_model.h"
#include "zoo/zoo.h"

namespace harmony::executor {
namespace {

using runtime_testing::Config;
using runtime_testing::ExpectLikeReference;
using runtime_testing::GetModel;
using runtime_testing::MakeConfig;
using runtime_testing::MakePlan;
using runtime_testing::Mode;
using runtime_testing::Model;
using runtime_testing::Optimizer;
using runtime_testing::Options;
using runtime_testing::Reference;
using runtime_testing::RunPlan;
using runtime_testing::TrainingRun;

// vDP plans whose devices copy the parameters from device 0 instead of
// swapping them in each train bit for bit like the same plan without
// (BatchNorm's buffers, which device 0's forward updates, still come from
// the host), and so like the plain loop; move each parameter over the host
// link once per pass (the bytes are checked against the plan's in
// RunPlan); and peak no higher than planned, device 0 included, which
// keeps its copy until the others have theirs.
TEST(PeerWeightsRuntimeTest, TrainTheSame) {
  for (const std::string family : {"gpt", "resnet"}) {
    for (int devices : {2, 3}) {
      const Model& m = GetModel(family);
      SCOPED_TRACE(absl::StrCat(family, " on ", devices, " devices"));
      Config c = MakeConfig(m, Mode::kVdp, devices, 1, 1, 2, 2);
      const proto::Plan own_plan = MakePlan(m, c);
      c.peer_weights = true;
      const proto::Plan plan = MakePlan(m, c);
      EXPECT_TRUE(plan.config().peer_weights());
      const RuntimeOptions options = Options(devices, 1ull << 30, Optimizer("sgd"));
      TrainingRun own = RunPlan(m, own_plan, options);
      TrainingRun run = RunPlan(m, plan, options);
      ASSERT_TRUE(own.runtime && run.runtime);
      EXPECT_EQ(run.losses, own.losses);
      for (const auto& p : torch::jit::load(m.path).named_parameters()) {
        absl::StatusOr<at::Tensor> a = run.runtime->HostTensor(p.name);
        absl::StatusOr<at::Tensor> b = own.runtime->HostTensor(p.name);
        ASSERT_TRUE(a.ok() && b.ok()) << p.name;
        EXPECT_TRUE(at::equal(*a, *b)) << p.name;
      }
      if (devices == 2) ExpectLikeReference(m, plan, run, Reference("sgd"), 1e-6, false);
      ASSERT_FALSE(run.metrics.empty());
      // Device 0 swaps every parameter in; the others, buffers only.
      const uint64_t params = m.cost->WeightBytes(0, m.cost->num_layers()) -
                              m.cost->BufferBytes(0, m.cost->num_layers());
      const uint64_t own_in = own.metrics.back().bytes.weights_in;
      const uint64_t copied = run.metrics.back().bytes.peer - own.metrics.back().bytes.peer;
      EXPECT_LT(run.metrics.back().bytes.weights_in, own_in);
      EXPECT_EQ(own_in - run.metrics.back().bytes.weights_in, copied);
      EXPECT_GE(copied, params * (devices - 1));
      for (size_t d = 0; d < run.metrics.back().device_peak_bytes.size(); ++d) {
        EXPECT_LE(run.metrics.back().device_peak_bytes[d],
                  plan.estimates().device_peak_bytes(static_cast<int>(d)))
            << "device " << d << " at " << run.metrics.back().device_peak_activity[d];
      }
    }
  }
}

// Device 1 runs behind device 0 (a pause before each of its tasks, as a
// device starved of a core does). Device 0 publishes each pack's parameters
// and keeps them until device 1 has copied them; the plan counts the last
// forward pack's (four blocks, swapped in when its task starts) gone when
// the fused last pack computes, with its large head's gradients. So device
// 0 waits for device 1's copy before it computes; its peak stays within the
// plan's (RunPlan checks every iteration's; 1.5x over before it waited)
// and the run trains as without the pause.
TEST(PeerWeightsRuntimeTest, ACopyingDeviceBehindKeepsTheSourceWithinItsPeak) {
  zoo::ZooOptions z;
  z.family = "gpt";
  z.depth = 4;
  z.width = 128;
  z.vocab = 4096;  // The head: 2 MiB of parameters, as much again of gradients.
  z.seq_len = 4;
  z.dropout = 0;
  const std::string path = runtime_testing::Tmp("peer-lag-gpt.pt");
  ASSERT_TRUE(zoo::WriteZooModelAndData(z, path, path + ".data").ok());
  const Model& m = runtime_testing::GetFileModel(path, path + ".data");
  Config c = MakeConfig(m, Mode::kVdp, 2, 1, 1, 2, 2);
  c.peer_weights = true;
  c.forward_packs = {{0, 1}, {1, c.backward_packs.back().begin}};
  c.late_forward.assign(c.forward_packs.size(), true);
  c.device_memory = 2 * m.cost->WeightBytes(0, m.cost->num_layers());
  const proto::Plan plan = MakePlan(m, c);
  ASSERT_TRUE(plan.config().peer_weights());
  const RuntimeOptions prompt = Options(2, c.device_memory, Optimizer("sgd"));
  RuntimeOptions behind = prompt;
  behind.before_task = [](int device, int) {
    if (device == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  TrainingRun want = RunPlan(m, plan, prompt);
  TrainingRun run = RunPlan(m, plan, behind);
  ASSERT_TRUE(want.runtime && run.runtime);
  EXPECT_EQ(run.losses, want.losses);
  ASSERT_EQ(run.metrics.size(), want.metrics.size());
  for (const IterationMetrics& it : run.metrics) {
    EXPECT_LE(it.device_peak_bytes[0], plan.estimates().device_peak_bytes(0))
        << "device 0 at " << it.device_peak_activity[0];
  }
}

}  // namespace
}  // namespace harmony::executor
