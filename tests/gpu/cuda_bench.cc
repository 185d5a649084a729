// Figures of the runtime on a real GPU (scripts/gpu-check.sh --bench):
//   1. pinned host<->device copy bandwidth, one direction and both at once;
//   2. a zoo GPT of a few hundred MiB, profiled on the GPU, trained on
//      one and two partitions of it
//      whose caps force weight swapping (vPP, one vLayer per pack): how much
//      of the swapping is hidden, the simulator's error, and the
//      host-to-device throughput of the weight swaps during training (one
//      copy per vLayer: Device::ToDeviceFlat) against the pinned bandwidth
//      of 1.
// Prints figures; asserts nothing (benchmarks are not tests).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/device_spec.h"
#include "common/tensor_file.h"
#include "common/units.h"
#include "executor/runtime/runtime.h"
#include "planner/plan/plan_builder.h"
#include "planner/profile/profiler.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"
#include "zoo/zoo.h"

namespace harmony::executor {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Pinned host-to-device bytes per second for copies of `bytes`: the median
// of `rounds` timed rounds of 10 copies each (after 2 untimed). The
// pinned rate differed between two H100 machines of one kind (30.2 and
// 54.8 GB/s at 256 MiB), so training's rate is compared with this one,
// measured in the same process at the size of its copies.
double PinnedToDevice(int64_t bytes, int rounds) {
  at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  at::Tensor dev = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0));
  c10::cuda::CUDAStream in = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStreamGuard g(in);
  for (int i = 0; i < 2; ++i) dev.copy_(host, true);
  in.synchronize();
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    const int reps = 10;
    Clock::time_point t = Clock::now();
    for (int i = 0; i < reps; ++i) dev.copy_(host, true);
    in.synchronize();
    rates.push_back(static_cast<double>(bytes) * reps / Seconds(t));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// Bytes per second of copying to the GPU (or back), pinned.
void CopyBandwidth() {
  const int64_t n = 256ll << 20;
  at::Tensor host = at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  at::Tensor back = at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  at::Tensor dev = at::empty({n}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0));
  at::Tensor dev2 = at::empty({n}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0));
  c10::cuda::CUDAStream in = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStream out = c10::cuda::getStreamFromPool(false, 0);
  auto h2d = [&] {
    c10::cuda::CUDAStreamGuard g(in);
    dev.copy_(host, true);
  };
  auto d2h = [&] {
    c10::cuda::CUDAStreamGuard g(out);
    back.copy_(dev2, true);
  };
  for (int i = 0; i < 2; ++i) {
    h2d();
    d2h();
  }
  in.synchronize();
  out.synchronize();
  const int reps = 10;
  const double to_device = PinnedToDevice(n, 5);
  Clock::time_point t = Clock::now();
  for (int i = 0; i < reps; ++i) d2h();
  out.synchronize();
  const double to_host = n * reps / Seconds(t);
  t = Clock::now();
  for (int i = 0; i < reps; ++i) {
    h2d();
    d2h();
  }
  in.synchronize();
  out.synchronize();
  const double both = n * reps / Seconds(t);
  std::printf("pinned copies of 256 MiB: host->device %.1f GB/s (median of 5 rounds), "
              "device->host %.1f GB/s, both at once %.1f + %.1f GB/s\n",
              to_device / 1e9, to_host / 1e9, both / 1e9, both / 1e9);
  std::printf("pinned host->device, median of 5 rounds: 4 MiB %.1f GB/s, 48 MiB %.1f GB/s\n",
              PinnedToDevice(4ll << 20, 5) / 1e9, PinnedToDevice(48ll << 20, 5) / 1e9);
  std::printf("BENCH pinned_h2d_bytes_per_s=%.0f\n", to_device);
}

// Sum of the durations (seconds) of trace events whose name starts with
// `prefix`, and their count.
std::pair<double, int> TraceTime(const std::string& trace, const std::string& prefix) {
  double total = 0;
  int count = 0;
  const nlohmann::json j = nlohmann::json::parse(trace);
  const nlohmann::json& events = j.is_array() ? j : j["traceEvents"];
  for (const auto& e : events) {
    if (e.value("ph", "") != "X") continue;
    const std::string name = e.value("name", "");
    if (name.rfind(prefix, 0) != 0) continue;
    total += e.value("dur", 0.0) * 1e-6;
    ++count;
  }
  return {total, count};
}

void TrainAtScale() {
  zoo::ZooOptions o;
  o.family = "gpt";
  o.depth = 12;
  o.width = 1024;
  o.heads = 16;
  o.seq_len = 128;
  o.vocab = 8192;
  o.samples = 64;
  o.dropout = 0;
  const std::string path = "/tmp/bench_gpt.pt";
  if (!zoo::WriteZooModelAndData(o, path, path + ".data").ok()) return;
  common::TrainingData data = *common::LoadTrainingData(path + ".data");
  // Profiled on the GPU (harmony-plan profile --devices cuda:2x32GiB): the
  // simulator's figures are the GPU's.
  planner::ProfilerOptions p;
  p.devices = *common::ParseDeviceSpec("cuda:2x32GiB");
  p.max_microbatch = 8;
  p.repeats = 3;
  const Clock::time_point t = Clock::now();
  absl::StatusOr<proto::ProfileFile> profile = planner::ProfileModel(path, data, p);
  if (!profile.ok()) {
    std::printf("profile: %s\n", profile.status().ToString().c_str());
    return;
  }
  std::printf("GPU profile of the gpt (%d layers): %.1f s\n%s", profile->profile().vlayers_size(),
              Seconds(t), planner::ProfileSummary(*profile).c_str());
  auto cost = *planner::CostModel::Create(*profile);
  const uint64_t weights = cost->WeightBytes(0, cost->num_layers()) ;
  std::printf("gpt depth 12 width 1024 seq 128 vocab 8192: %s of weights\n",
              common::FormatBytes(weights).c_str());
  for (int devices : {1, 2}) {
    planner::Config c;
    c.mode = planner::Mode::kVpp;
    c.num_devices = devices;
    c.device_memory = 64ull << 30;
    c.minibatch = 64;
    c.forward_microbatch = 8;
    c.backward_microbatch = 8;
    for (int k = 0; k < cost->num_layers(); ++k) c.backward_packs.push_back({k, k + 1});
    for (int k = 0; k + 1 < cost->num_layers(); ++k) c.forward_packs.push_back({k, k + 1});
    absl::StatusOr<planner::TaskGraph> g = planner::BuildTaskGraph(*cost, c);
    if (!g.ok()) {
      std::printf("graph: %s\n", g.status().ToString().c_str());
      return;
    }
    absl::StatusOr<planner::SimResult> sim = planner::Simulate(*cost, *g, false);
    const proto::Plan plan = planner::BuildPlan(*profile, *g, *sim, std::nullopt);
    RuntimeOptions ro;
    // Partitions of 1.5x the simulated peak (GPU profile): a pack and the
    // next one's prefetch, far less than the weights.
    uint64_t sim_peak = 0;
    for (uint64_t b : plan.estimates().device_peak_bytes()) sim_peak = std::max(sim_peak, b);
    const uint64_t cap = sim_peak * 3 / 2;
    ro.devices = *common::ParseDeviceSpec(absl::StrCat("cuda:", devices, "x", cap));
    ro.check_device_memory = false;
    ro.trace = true;
    absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(plan, path, ro);
    if (!rt.ok()) {
      std::printf("runtime: %s\n", rt.status().ToString().c_str());
      return;
    }
    (void)(*rt)->SetData(data);
    std::vector<IterationMetrics> ms;
    std::pair<double, int> first_copies{0.0, 0};  // The first iteration's weight swaps.
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<IterationMetrics> it = (*rt)->RunIteration();
      if (!it.ok()) {
        std::printf("iteration: %s\n", it.status().ToString().c_str());
        return;
      }
      ms.push_back(*it);
      if (i == 0) first_copies = TraceTime((*rt)->ChromeTrace(), "weights in");
    }
    // The weight swaps after the first iteration, as every other figure
    // here: the first takes the caching allocator's first cudaMalloc of
    // each size (the H200 of 11-28 read 69% of pinned over all four).
    const std::pair<double, int> all_copies = TraceTime((*rt)->ChromeTrace(), "weights in");
    const double copy_s = all_copies.first - first_copies.first;
    const int copies = all_copies.second - first_copies.second;
    double seconds = 0, compute = 0, wait = 0, optimizer = 0;
    uint64_t weights_in = 0, peak = 0;
    for (size_t i = 1; i < ms.size(); ++i) {  // The first warms up.
      seconds += ms[i].seconds;
      compute += ms[i].compute_s;
      wait += ms[i].swap_wait_s;
      optimizer += ms[i].optimizer_s;
      weights_in += ms[i].bytes.weights_in;
      for (uint64_t b : ms[i].device_peak_bytes) peak = std::max(peak, b);
    }
    const double n = static_cast<double>(ms.size() - 1);
    std::printf("vPP %d partition(s) of %s, microbatch 8, minibatch 64: %.3f s/iteration "
                "(compute %.3f s summed over devices, waiting for swaps %.3f s, CPU optimizer %.3f s); "
                "weights in %s/iteration; peak %s; simulated (GPU profile) %.3f s, error %+.0f%%\n",
                devices, common::FormatBytes(cap).c_str(), seconds / n, compute / n,
                wait / n, optimizer / n, common::FormatBytes(weights_in / n).c_str(),
                common::FormatBytes(peak).c_str(), sim->iteration_s,
                100.0 * (sim->iteration_s - seconds / n) / (seconds / n));
    // Against pinned copies of the mean copy's size, measured now.
    const uint64_t all_in = weights_in;  // After the first iteration.
    const int64_t copy_bytes = copies > 0 ? static_cast<int64_t>(all_in / copies) : 0;
    const double pinned = copy_bytes > 0 ? PinnedToDevice(copy_bytes, 5) : 0;
    const double rate = copy_s > 0 ? all_in / copy_s : 0.0;
    const double first_rate =
        first_copies.first > 0 ? ms[0].bytes.weights_in / first_copies.first : 0.0;
    std::printf("  weight swaps after the first iteration: %d copies of %s on average, %.3f s "
                "copying, %.1f GB/s while copying: %.0f%% of pinned copies of that size measured "
                "after it (%.1f GB/s); the first iteration's %.1f GB/s\n",
                copies, common::FormatBytes(copy_bytes).c_str(), copy_s, rate / 1e9,
                pinned > 0 ? 100.0 * rate / pinned : 0.0, pinned / 1e9, first_rate / 1e9);
    // The link as a whole (IterationMetrics::to_device_busy_s): every copy
    // to the partitions (weights, stashes, data) while any was crossing,
    // copies of several partitions at once counted once, after the first
    // iteration; against pinned copies of 256 MiB measured now.
    uint64_t link_in = 0;
    double busy_in = 0;
    for (size_t i = 1; i < ms.size(); ++i) {
      link_in += ms[i].to_device_link_bytes;
      busy_in += ms[i].to_device_busy_s;
    }
    const double link_rate = busy_in > 0 ? static_cast<double>(link_in) / busy_in : 0.0;
    const double pinned_256 = PinnedToDevice(256ll << 20, 5);
    std::printf("  host->device link while busy after the first iteration (every kind, all "
                "partitions): %s in %.3f s, %.1f GB/s: %.0f%% of pinned copies of 256 MiB "
                "(%.1f GB/s)\n",
                common::FormatBytes(link_in).c_str(), busy_in, link_rate / 1e9,
                pinned_256 > 0 ? 100.0 * link_rate / pinned_256 : 0.0, pinned_256 / 1e9);
    std::printf("BENCH devices=%d seconds=%.4f compute=%.4f wait=%.4f h2d_bytes_per_s=%.0f "
                "h2d_link_busy_bytes_per_s=%.0f\n",
                devices, seconds / n, compute / n, wait / n, rate, link_rate);
  }
}

}  // namespace
}  // namespace harmony::executor

int main() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  harmony::executor::CopyBandwidth();
  harmony::executor::TrainAtScale();
  return 0;
}
