// Updates per second of the fused CPU optimizer against torch::optim on the
// same tensors, side by side in one run. Prints figures; never fails on time.
//
//   bazel run //executor/optim:optimizer_bench -- [elements] [repeats] [threads]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include "executor/optim/cpu_optimizer.h"

namespace {

using harmony::executor::CpuOptimizer;
using harmony::executor::OptimizerKind;
using harmony::executor::OptimizerOptions;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Fn>
double Time(Fn&& fn, int repeats) {
  fn();  // Warm-up.
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return Median(t);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 100'000'000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  // LibTorch starts with one intra-op thread here; use every core.
  at::set_num_threads(argc > 3 ? std::atoi(argv[3])
                               : static_cast<int>(std::thread::hardware_concurrency()));
  std::printf("CPU optimizer, %lld fp32 parameters, %d threads, median of %d steps\n",
              static_cast<long long>(n), at::get_num_threads(), repeats);
  at::Tensor p = torch::randn({n});
  at::Tensor g = torch::randn({n});
  // Memory bandwidth for scale: a STREAM-style copy.
  at::Tensor dst = torch::empty({n});
  const double copy = Time([&] { dst.copy_(p); }, repeats);
  std::printf("  memory copy: %.2f GB/s\n", 2.0 * 4 * n / copy / 1e9);
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerOptions o;
    o.kind = kind;
    o.learning_rate = 1e-3;
    o.momentum = 0.9;
    o.weight_decay = 1e-2;
    auto ours = CpuOptimizer::Create(o, n).value();
    at::Tensor mine = p.clone();
    const double t_ours = Time([&] { ours->Step(mine.data_ptr<float>(), g.data_ptr<float>()); },
                               repeats);
    at::Tensor theirs = p.clone().requires_grad_(true);
    theirs.mutable_grad() = g.clone();
    std::unique_ptr<torch::optim::Optimizer> ref;
    const char* name = "sgd-momentum";
    if (kind == OptimizerKind::kSgd) {
      ref = std::make_unique<torch::optim::SGD>(
          std::vector<at::Tensor>{theirs},
          torch::optim::SGDOptions(1e-3).momentum(0.9).weight_decay(1e-2));
    } else if (kind == OptimizerKind::kAdam) {
      name = "adam";
      ref = std::make_unique<torch::optim::Adam>(
          std::vector<at::Tensor>{theirs}, torch::optim::AdamOptions(1e-3).weight_decay(1e-2));
    } else {
      name = "adamw";
      ref = std::make_unique<torch::optim::AdamW>(
          std::vector<at::Tensor>{theirs}, torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
    }
    const double t_ref = Time([&] { ref->step(); }, repeats);
    // Bytes each element touches: read p, g, state; write p, state.
    const double bytes = kind == OptimizerKind::kSgd ? 4.0 * 5 : 4.0 * 7;
    std::printf("  %-13s ours %7.1f M updates/s (%5.2f GB/s)   torch::optim %7.1f M updates/s   "
                "ratio %.2fx\n",
                name, n / t_ours / 1e6, bytes * n / t_ours / 1e9, n / t_ref / 1e6, t_ref / t_ours);
  }
  return 0;
}
