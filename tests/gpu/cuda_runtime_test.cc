// The runtime on CUDA devices (executor/runtime/cuda_device.h), on a real
// GPU: built and run by scripts/gpu-check.sh, never by the CPU build.
//
// Exactness: the plain loop (TrainReferenceForPlan on the GPU: the same
// vLayers in plain order, the same microbatches, master weights and the
// optimizer on the host) against the runtime on partitions of the GPU. The
// same kernels run on the same shapes in the same order, so vPP is bit for
// bit; vDP sums gradients in another order (1e-6), as on the CPU. Also: the
// plan's byte counts, peaks under each partition's cap, the out-of-memory
// error, and bad specs.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/cuda_warm_up.h"
#include "common/decomposer.h"
#include "common/files.h"
#include "common/device_spec.h"
#include "executor/runtime/device.h"
#include "executor/runtime/reference.h"
#include "executor/runtime/runtime.h"
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

using planner::Config;
using planner::Mode;
using planner::Packing;

constexpr int kMinibatch = 8;
constexpr int kIterations = 3;

struct Model {
  std::string path;
  common::TrainingData data;
  proto::ProfileFile profile;
  std::shared_ptr<const planner::CostModel> cost;
};

std::string Tmp(const std::string& name) { return testing::TempDir() + "/" + name; }

// Profiled on the host (the plan's figures; the runtime does not depend
// on them being the GPU's).
const Model& GetModel(const std::string& family, double dropout = 0) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Model>>();
  const std::string path = Tmp(absl::StrCat(family, "-", dropout, ".pt"));
  auto& slot = (*cache)[path];
  if (slot) return *slot;
  zoo::ZooOptions o;
  o.family = family;
  o.depth = family == "resnet" ? 1 : 3;
  o.width = 16;
  o.heads = 2;
  o.seq_len = 8;
  o.vocab = 32;
  o.image_size = 8;
  o.input_dim = 8;
  o.samples = 24;
  o.dropout = dropout;
  EXPECT_TRUE(zoo::WriteZooModelAndData(o, path, path + ".data").ok());
  auto m = std::make_unique<Model>();
  m->path = path;
  m->data = *common::LoadTrainingData(path + ".data");
  planner::ProfilerOptions p;
  p.devices.count = 1;
  p.devices.capacity = 1ull << 30;
  p.max_microbatch = 8;
  p.repeats = 1;
  absl::StatusOr<proto::ProfileFile> profile = planner::ProfileModel(m->path, m->data, p);
  EXPECT_TRUE(profile.ok()) << profile.status();
  m->profile = *profile;
  m->cost = *planner::CostModel::Create(m->profile);
  slot = std::move(m);
  return *slot;
}

Packing Chunks(int begin, int end, int size) {
  Packing out;
  for (int at = begin; at < end; at += size) out.push_back({at, std::min(end, at + size)});
  return out;
}

// Packs of `pack` vLayers (forward packs of `forward_pack`, if given). With
// `keep`, every backward pack but the last (fused) keeps its forward's
// activations instead of recomputing them (Config::keep).
proto::Plan MakePlan(const Model& m, Mode mode, int devices, int pack, int microbatch,
                     bool keep = false, int forward_pack = 0) {
  Config c;
  c.mode = mode;
  c.num_devices = devices;
  c.device_memory = 1ull << 30;
  c.minibatch = kMinibatch;
  c.forward_microbatch = microbatch;
  c.backward_microbatch = microbatch;
  c.backward_packs = Chunks(0, m.cost->num_layers(), pack);
  c.forward_packs =
      Chunks(0, c.backward_packs.back().begin, forward_pack > 0 ? forward_pack : pack);
  if (keep) {
    c.keep.assign(c.backward_packs.size(), true);
    c.keep.back() = false;
  }
  absl::StatusOr<planner::TaskGraph> g = planner::BuildTaskGraph(*m.cost, c);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<planner::SimResult> sim = planner::Simulate(*m.cost, *g, false);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return planner::BuildPlan(m.profile, *g, *sim, std::nullopt);
}

optim::OptimizerOptions Optimizer(const std::string& kind) {
  optim::OptimizerOptions o;
  if (kind == "adam") {
    o.kind = optim::OptimizerKind::kAdam;
    o.learning_rate = 0.01;
    o.weight_decay = 0.01;
  } else {
    o.kind = optim::OptimizerKind::kSgd;
    o.learning_rate = 0.05;
    o.momentum = 0.9;
    o.weight_decay = 0.001;
  }
  return o;
}

RuntimeOptions Options(const std::string& devices, const std::string& optimizer) {
  RuntimeOptions o;
  o.devices = *common::ParseDeviceSpec(devices);
  o.optimizer = Optimizer(optimizer);
  o.seed = 7;
  return o;
}

double RelativeDifference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.norm().item<double>(), 1e-30);
  return (a - b).norm().item<double>() / scale;
}

// Trains the plan on `devices` and the reference on the GPU; compares
// losses, every parameter and buffer (bit for bit when `tolerance` is 0),
// and the bytes moved with the plan's. With a tolerance (vDP: gradients summed
// per device, then across devices), also each parameter's update against
// the reference's relative to the update's size (a dropped gradient is off
// by 1e-2 or more), and no buffers (vDP keeps device 0's BatchNorm
// statistics, as on the CPU).
void ExpectLikeReference(const Model& m, const proto::Plan& plan, const std::string& devices,
                         const std::string& optimizer, double tolerance,
                         int iterations = kIterations) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt =
      Runtime::Create(plan, m.path, Options(devices, optimizer));
  ASSERT_TRUE(rt.ok()) << rt.status();
  ASSERT_TRUE((*rt)->SetData(m.data).ok());
  std::vector<double> losses;
  const proto::SwapBytes& want = plan.estimates().swap();
  for (int i = 0; i < iterations; ++i) {
    absl::StatusOr<IterationMetrics> it = (*rt)->RunIteration();
    ASSERT_TRUE(it.ok()) << it.status();
    losses.push_back(it->loss);
    EXPECT_EQ(it->bytes.weights_in, want.weights_in());
    EXPECT_EQ(it->bytes.gradients_out, want.gradients_out());
    EXPECT_EQ(it->bytes.stash_out, want.stash_out());
    EXPECT_EQ(it->bytes.peer, want.peer());
    for (uint64_t peak : it->device_peak_bytes) EXPECT_GT(peak, 0u);
  }
  torch::jit::Module model = torch::jit::load(m.path);
  const torch::jit::Module initial = torch::jit::load(m.path);
  model.train();
  ReferenceOptions ro;
  ro.optimizer = Optimizer(optimizer);
  ro.harmony_optimizer = true;
  ro.vlayer_dropout = true;
  ro.seed = 7;
  ro.iterations = iterations;
  ro.device = at::Device(at::kCUDA, 0);
  absl::StatusOr<std::vector<double>> ref = TrainReferenceForPlan(plan, model, m.data, ro);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    if (tolerance == 0) {
      EXPECT_EQ(losses[i], (*ref)[i]) << "iteration " << i;
    } else {
      EXPECT_NEAR(losses[i], (*ref)[i], tolerance * std::abs((*ref)[i])) << "iteration " << i;
    }
  }
  int checked = 0;
  double worst_step = 0;
  for (const auto& p : model.named_parameters()) {
    absl::StatusOr<at::Tensor> got = (*rt)->HostTensor(p.name);
    ASSERT_TRUE(got.ok()) << got.status();
    if (tolerance == 0) {
      EXPECT_TRUE(at::equal(*got, p.value))
          << p.name << " differs by " << RelativeDifference(*got, p.value);
    } else {
      EXPECT_LE(RelativeDifference(*got, p.value), tolerance) << p.name;
      const at::Tensor step = p.value - *common::ResolveTensor(initial, p.name);
      const double size = step.norm().item<double>();
      if (size > 0) {
        const double off = (*got - p.value).norm().item<double>() / size;
        worst_step = std::max(worst_step, off);
        EXPECT_LE(off, 1e-4) << p.name << ": the update differs from the reference's";
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
  if (tolerance > 0) {
    std::printf("  %s: largest update difference %.3g of the update\n", devices.c_str(), worst_step);
    return;
  }
  for (const auto& b : model.named_buffers()) {
    absl::StatusOr<at::Tensor> got = (*rt)->HostTensor(b.name);
    if (!got.ok()) continue;
    if (tolerance == 0 || !at::isFloatingType(b.value.scalar_type())) {
      EXPECT_TRUE(at::equal(*got, b.value)) << b.name;
    } else {
      EXPECT_LE(RelativeDifference(*got, b.value), tolerance) << b.name;
    }
  }
}

// A plan's mode and devices, the partitions it trains on, and how close to
// the plain loop it must come (vDP sums gradients in another order).
struct GpuRun {
  Mode mode;
  int devices;
  const char* spec;
  double tolerance;
};
// vPP on one and two partitions, vDP on two.
const std::vector<GpuRun> kPartitionRuns = {GpuRun{Mode::kVpp, 1, "cuda:1x2GiB", 0},
                                            GpuRun{Mode::kVpp, 2, "cuda:2x1GiB", 0},
                                            GpuRun{Mode::kVdp, 2, "cuda:2x1GiB", 1e-6}};

TEST(CudaRuntimeTest, ExactAgainstThePlainLoopOnTheGpu) {
  struct Case {
    std::string family;
    double dropout;
    std::string optimizer;
  };
  for (const Case& c : {Case{"mlp", 0, "sgd"}, Case{"gpt", 0.2, "adam"}, Case{"resnet", 0, "sgd"},
                        Case{"gpt", 0, "sgd"}}) {
    const Model& m = GetModel(c.family, c.dropout);
    std::vector<GpuRun> runs = kPartitionRuns;
    runs.push_back(GpuRun{Mode::kVpp, 1, "cuda", 0});  // The whole GPU.
    for (const GpuRun& r : runs) {
      SCOPED_TRACE(absl::StrCat(c.family, " dropout ", c.dropout, " ", c.optimizer, " ",
                                r.mode == Mode::kVpp ? "vPP" : "vDP", " on ", r.spec));
      const proto::Plan plan = MakePlan(m, r.mode, r.devices, 2, 2);
      // vDP: one step, so the update check sees each gradient (BatchNorm
      // nets amplify a reordered sum's rounding over further steps).
      ExpectLikeReference(m, plan, r.spec, c.optimizer, r.tolerance,
                          r.mode == Mode::kVdp ? 1 : kIterations);
    }
  }
}

// Kept activations on the GPU: the backward runs on what the forward saved
// (to the host and back: KEPT_OUT, KEPT_IN), without a recompute, and
// dropout's masks come from the forward. Bit for bit in vPP, as on the CPU
// (runtime_test's KeptActivationsTrainLikeTheRecompute); ExpectLikeReference
// checks the bytes moved against the plan's.
TEST(CudaRuntimeTest, KeptActivationsTrainLikeThePlainLoopOnTheGpu) {
  struct Case {
    std::string family;
    double dropout;
  };
  for (const Case& c : {Case{"gpt", 0.2}, Case{"resnet", 0}}) {
    const Model& m = GetModel(c.family, c.dropout);
    for (const GpuRun& r : kPartitionRuns) {
      SCOPED_TRACE(absl::StrCat(c.family, " dropout ", c.dropout, " kept, ",
                                r.mode == Mode::kVpp ? "vPP" : "vDP", " on ", r.spec));
      // Two backward packs per forward pack, as runtime_test's: a forward
      // task keeps two packs, the second's live-ins made inside it.
      const proto::Plan plan =
          MakePlan(m, r.mode, r.devices, 1, 2, /*keep=*/true, /*forward_pack=*/2);
      ASSERT_GT(plan.config().kept_packs_size(), 0);
      EXPECT_GT(plan.estimates().swap().kept_out(), 0u);
      EXPECT_EQ(plan.estimates().swap().kept_in(), plan.estimates().swap().kept_out());
      ExpectLikeReference(m, plan, r.spec, "adam", r.tolerance,
                          r.mode == Mode::kVdp ? 1 : kIterations);
    }
  }
}

// A plan that swaps: peaks stay under each partition's cap, and a cap too
// small fails the iteration with the device, the task and the bytes.
TEST(CudaRuntimeTest, PartitionCapsHold) {
  const Model& m = GetModel("gpt");
  const proto::Plan plan = MakePlan(m, Mode::kVpp, 2, 1, 2);
  const uint64_t peak = *std::max_element(plan.estimates().device_peak_bytes().begin(),
                                          plan.estimates().device_peak_bytes().end());
  RuntimeOptions o = Options(absl::StrCat("cuda:2x", peak * 4), "sgd");
  o.check_device_memory = false;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(plan, m.path, o);
  ASSERT_TRUE(rt.ok()) << rt.status();
  ASSERT_TRUE((*rt)->SetData(m.data).ok());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<IterationMetrics> it = (*rt)->RunIteration();
    ASSERT_TRUE(it.ok()) << it.status();
    EXPECT_GT(it->bytes.weights_in, 0u);
    for (size_t d = 0; d < it->device_peak_bytes.size(); ++d) {
      std::printf("partition %zu: peak %llu B (simulated %llu B on the host profile), "
                  "%llu allocations, %llu reused\n",
                  d, static_cast<unsigned long long>(it->device_peak_bytes[d]),
                  static_cast<unsigned long long>(plan.estimates().device_peak_bytes(d)),
                  static_cast<unsigned long long>(it->device_allocations[d]),
                  static_cast<unsigned long long>(it->device_reused[d]));
      EXPECT_GT(it->device_peak_bytes[d], 0u);
      EXPECT_LE(it->device_peak_bytes[d], peak * 4);
      if (i > 0) EXPECT_LT(it->device_allocations[d], it->device_reused[d]);
    }
  }
  RuntimeOptions tiny = Options(absl::StrCat("cuda:2x", peak / 16), "sgd");
  tiny.check_device_memory = false;
  rt = Runtime::Create(plan, m.path, tiny);
  ASSERT_TRUE(rt.ok()) << rt.status();
  ASSERT_TRUE((*rt)->SetData(m.data).ok());
  absl::StatusOr<IterationMetrics> it = (*rt)->RunIteration();
  EXPECT_EQ(it.status().code(), absl::StatusCode::kResourceExhausted) << it.status();
  EXPECT_NE(std::string(it.status().message()).find("out of memory on device cuda:0."),
            std::string::npos)
      << it.status();
  // Checked before anything runs, as on the CPU.
  EXPECT_EQ(Runtime::Create(plan, m.path, Options(absl::StrCat("cuda:2x", peak / 16), "sgd"))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CudaRuntimeTest, SpecsTheMachineCannotGiveAreRefused) {
  const Model& m = GetModel("mlp");
  const proto::Plan plan = MakePlan(m, Mode::kVpp, 2, 2, 2);
  const int gpus = static_cast<int>(c10::cuda::device_count());
  absl::Status s =
      Runtime::Create(plan, m.path, Options(absl::StrCat("cuda:", gpus + 1), "sgd")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  s = Runtime::Create(plan, m.path, Options("cuda:1x1GiB", "sgd")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message()).find("needs 2 devices"), std::string::npos) << s;
  s = Runtime::Create(plan, m.path, Options("cuda:2x100000GiB", "sgd")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  std::printf("refusals read: %s\n", std::string(s.message()).c_str());
}

// The runtime's compute threads and the profiler's compute scopes run their
// own backward (common/cuda_warm_up.h): by default LibTorch runs a GPU
// backward on its one thread for the GPU, whoever calls it.
TEST(CudaRuntimeTest, BackwardRunsOnTheThreadThatCallsIt) {
  const auto o = at::TensorOptions().device(at::kCUDA, 0);
  auto thread_of_backward = [&] {
    at::Tensor x = at::ones({8, 8}, o).requires_grad_(true);
    at::Tensor y = at::mm(x, x);
    std::thread::id ran;
    y.register_hook([&ran](const at::Tensor&) { ran = std::this_thread::get_id(); });
    y.sum().backward();
    return ran;
  };
  const std::thread::id here = std::this_thread::get_id();
  EXPECT_NE(thread_of_backward(), here);
  {
    common::BackwardOnThisThread on_this_thread;
    EXPECT_EQ(thread_of_backward(), here);
  }
  EXPECT_NE(thread_of_backward(), here);  // The thread's setting came back.
}

// harmony-plan profile --devices cuda...: the vLayers timed and their peaks
// read on a partition of the GPU, bandwidths with pinned buffers.
TEST(CudaRuntimeTest, ProfilesOnTheGpu) {
  const Model& m = GetModel("gpt");
  planner::ProfilerOptions p;
  p.devices = *common::ParseDeviceSpec("cuda:2x1GiB");
  p.max_microbatch = 16;
  p.repeats = 3;
  absl::StatusOr<proto::ProfileFile> file = planner::ProfileModel(m.path, m.data, p);
  ASSERT_TRUE(file.ok()) << file.status();
  const proto::Profile& g = file->profile();
  std::printf("%s", planner::ProfileSummary(*file).c_str());
  EXPECT_EQ(g.device_kind(), "cuda");
  EXPECT_NE(g.device_name().find("partitions of 1.00 GiB"), std::string::npos) << g.device_name();
  EXPECT_EQ(g.device_memory_bytes(), 1ull << 30);
  EXPECT_EQ(g.num_devices(), 2u);
  EXPECT_EQ(g.max_backward_microbatch(), 16u);
  for (const proto::VLayerProfile& v : g.vlayers()) {
    for (const proto::MicrobatchProfile& r : v.by_microbatch()) {
      EXPECT_TRUE(r.forward_fits() && r.backward_fits());
      EXPECT_GT(r.forward_time_s(), 0);
      EXPECT_GT(r.backward_time_s(), 0);
      EXPECT_GT(r.forward_time_busy_s(), 0);
      EXPECT_GT(r.backward_peak_bytes(), 0u) << "vLayer " << v.vlayer() << " u " << r.size();
    }
    // Activations grow with the microbatch.
    EXPECT_GT(v.by_microbatch(v.by_microbatch_size() - 1).backward_peak_bytes(),
              v.by_microbatch(0).backward_peak_bytes());
  }
  const proto::Bandwidths& bw = g.bandwidths();
  EXPECT_GT(bw.host_to_device_bytes_per_s(), 1e9);
  EXPECT_GT(bw.device_to_host_bytes_per_s(), 1e9);
  EXPECT_GT(bw.both_directions_bytes_per_s(), 1e9);
  EXPECT_GT(bw.host_link_all_devices_bytes_per_s(), 1e9);
  EXPECT_GT(bw.peer_bytes_per_s(), bw.host_to_device_bytes_per_s());
  EXPECT_GT(bw.transfer_latency_s(), 0);
  // A partition too small for the larger microbatches: probed down, as on
  // the CPU, from the peaks the caching allocator saw.
  uint64_t peak8 = 0;
  for (const proto::VLayerProfile& v : g.vlayers()) {
    for (const proto::MicrobatchProfile& r : v.by_microbatch()) {
      if (r.size() == 8) peak8 = std::max(peak8, r.backward_peak_bytes());
    }
  }
  p.devices = *common::ParseDeviceSpec(absl::StrCat("cuda:2x", peak8, "B"));
  p.repeats = 1;
  file = planner::ProfileModel(m.path, m.data, p);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_GE(file->profile().max_backward_microbatch(), 4u);
  EXPECT_LT(file->profile().max_backward_microbatch(), 16u);
}

// The daemon's view of cuda:NxSIZE (DescribeDevices): partitions named by
// their GPU, in turn.
TEST(CudaRuntimeTest, PartitionsAreDescribed) {
  absl::StatusOr<std::vector<DeviceInfo>> d =
      DescribeDevices(*common::ParseDeviceSpec("cuda:4x11GiB"));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 4u);
  const int gpus = static_cast<int>(c10::cuda::device_count());
  EXPECT_EQ((*d)[1].name, gpus == 1 ? "cuda:0.1" : "cuda:1.0");
  EXPECT_EQ((*d)[3].capacity, 11ull << 30);
}

}  // namespace
}  // namespace harmony::executor

int main(int argc, char** argv) {
  // Deterministic cuBLAS (its workspace), before CUDA starts; kernels with
  // a nondeterministic implementation warn.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
