// Figures 5-7 of the benchmark and the link balance. See sections.h.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/tensor_file.h"
#include "common/units.h"
#include "optim/cpu_optimizer.h"
#include "planner/plan/make_plan.h"
#include "planner/profile/profiler.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/sections.h"
#include "tests/bench/training_run.h"

namespace harmony::bench {
namespace {

nlohmann::json Check(const std::string& name, bool ok, const std::string& detail) {
  return {{"name", name}, {"ok", ok}, {"detail", detail}};
}

}  // namespace

absl::StatusOr<nlohmann::json> MeasureLinkBalance(const BenchOptions& o, double flop_per_byte) {
  constexpr int64_t kN = 1024;
  at::Tensor a = at::randn({kN, kN});
  at::Tensor b = at::randn({kN, kN});
  at::Tensor c = at::empty({kN, kN});
  const Stats s = Summarize(TimeRuns(1, o.runs, [&] { at::mm_out(c, a, b); }));
  const double rate = 2.0 * kN * kN * kN / s.median;
  nlohmann::json out;
  out["gemm"] = absl::StrFormat("fp32 %dx%d matrix multiply, %d threads", kN, kN,
                                at::get_num_threads());
  out["gemm_seconds"] = ToJson(s);
  out["gemm_flop_per_s"] = rate;
  out["flop_per_byte"] = flop_per_byte;
  out["emulated_link_bytes_per_s"] = rate / flop_per_byte;
  Log(absl::StrFormat("link balance: %.1f GFLOP/s, so the emulated link is %s", rate / 1e9,
                      common::FormatBandwidth(rate / flop_per_byte)));
  const std::string slow = planner::GemmWarning(
      rate, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  if (!slow.empty()) Log(slow);
  return out;
}

absl::StatusOr<nlohmann::json> BenchOptimizer(const BenchOptions& o) {
  constexpr int64_t kParameters = 100'000'000;
  using optim::CpuOptimizer;
  using optim::OptimizerKind;
  at::manual_seed(1);
  at::Tensor p = at::randn({kParameters});
  at::Tensor g = at::randn({kParameters});
  at::Tensor dst = at::empty({kParameters});
  nlohmann::json out;
  out["parameters"] = kParameters;
  out["threads"] = at::get_num_threads();
  // STREAM-style copy: read one array, write another.
  const Stats copy = Summarize(TimeRuns(1, o.runs, [&] { dst.copy_(p); }));
  out["copy_seconds"] = ToJson(copy);
  out["copy_bytes_per_s"] = 2.0 * 4 * kParameters / copy.median;
  Log(absl::StrFormat("optimizer: memory copy %s", common::FormatBandwidth(2.0 * 4 * kParameters /
                                                                            copy.median)));
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json checks = nlohmann::json::array();
  for (optim::OptimizerKind kind : {optim::OptimizerKind::kSgd, optim::OptimizerKind::kAdam, optim::OptimizerKind::kAdamW}) {
    optim::OptimizerOptions oo;
    oo.kind = kind;
    oo.learning_rate = 1e-3;
    oo.momentum = 0.9;
    oo.weight_decay = 1e-2;
    absl::StatusOr<std::unique_ptr<optim::CpuOptimizer>> ours = optim::CpuOptimizer::Create(oo, kParameters);
    if (!ours.ok()) return ours.status();
    at::Tensor mine = p.clone();
    const Stats t_ours = Summarize(TimeRuns(1, o.runs, [&] {
      (*ours)->Step(mine.data_ptr<float>(), g.data_ptr<float>());
    }));
    at::Tensor theirs = p.clone().requires_grad_(true);
    theirs.mutable_grad() = g.clone();
    std::unique_ptr<torch::optim::Optimizer> ref;
    std::string name = "sgd-momentum";
    if (kind == optim::OptimizerKind::kSgd) {
      ref = std::make_unique<torch::optim::SGD>(
          std::vector<at::Tensor>{theirs},
          torch::optim::SGDOptions(1e-3).momentum(0.9).weight_decay(1e-2));
    } else if (kind == optim::OptimizerKind::kAdam) {
      name = "adam";
      ref = std::make_unique<torch::optim::Adam>(
          std::vector<at::Tensor>{theirs}, torch::optim::AdamOptions(1e-3).weight_decay(1e-2));
    } else {
      name = "adamw";
      ref = std::make_unique<torch::optim::AdamW>(
          std::vector<at::Tensor>{theirs}, torch::optim::AdamWOptions(1e-3).weight_decay(1e-2));
    }
    const Stats t_ref = Summarize(TimeRuns(1, o.runs, [&] { ref->step(); }));
    // Both took the same steps from the same weights and gradients. The
    // root-mean-square difference: among 100M elements a few whose gradient
    // plus weight decay rounds to about zero may step in opposite
    // directions (fused multiply-add here, separate operations there).
    const at::Tensor diff = mine - theirs.detach();
    const double rms = diff.square().mean().sqrt().item<double>() /
                       theirs.detach().square().mean().sqrt().item<double>();
    const double largest = diff.abs().max().item<double>();
    checks.push_back(Check(absl::StrCat("optimizer ", name, ": weights equal torch::optim's"),
                           rms <= 1e-6,
                           absl::StrFormat("root-mean-square difference %.2e of the weights' "
                                           "(limit 1e-6); largest element difference %.2e",
                                           rms, largest)));
    // Bytes each element moves: read weight, gradient and state, write
    // weight and state.
    const double bytes = kind == optim::OptimizerKind::kSgd ? 4.0 * 5 : 4.0 * 7;
    nlohmann::json row;
    row["optimizer"] = name;
    row["harmony_seconds"] = ToJson(t_ours);
    row["torch_seconds"] = ToJson(t_ref);
    row["harmony_updates_per_s"] = kParameters / t_ours.median;
    row["torch_updates_per_s"] = kParameters / t_ref.median;
    row["speedup"] = t_ref.median / t_ours.median;
    row["bytes_per_update"] = bytes;
    row["harmony_bytes_per_s"] = bytes * kParameters / t_ours.median;
    row["fraction_of_copy"] = bytes * kParameters / t_ours.median / out["copy_bytes_per_s"].get<double>();
    Log(absl::StrFormat("optimizer: %s %.0f M updates/s (torch::optim %.0f M/s)", name,
                        kParameters / t_ours.median / 1e6, kParameters / t_ref.median / 1e6));
    rows.push_back(std::move(row));
  }
  out["rows"] = std::move(rows);
  out["checks"] = std::move(checks);
  return out;
}

absl::StatusOr<nlohmann::json> BenchPlanner(const BenchOptions& o) {
  constexpr int kMinibatch = 64;
  constexpr int kDevices = 4;
  // The small gpt: its vLayers are what the synthesized models repeat.
  const ModelSpec spec = BenchModels(/*quick=*/true).front();
  absl::StatusOr<WrittenModel> model = WriteBenchModel(o.work_dir, spec, kMinibatch);
  if (!model.ok()) return model.status();
  absl::StatusOr<proto::ProfileFile> base =
      ProfileOn(model->model_path, model->data, kDevices, kMinibatch);
  if (!base.ok()) return base.status();
  // zoo gpt: 2 embedding vLayers, the blocks, the final norm and the head.
  const int extra = base->profile().vlayers_size() - static_cast<int>(spec.zoo.depth);
  if (extra != 4) {
    return absl::InternalError(absl::StrCat("zoo gpt has ", base->profile().vlayers_size(),
                                            " vLayers; expected its ", spec.zoo.depth,
                                            " blocks and 4 more"));
  }
  // Each device holds a few blocks' working set at most: the plan swaps.
  const uint64_t memory = uint64_t{4} << 20;
  std::vector<int> sizes = {50, 200};
  if (!o.quick) sizes.push_back(1000);
  nlohmann::json rows = nlohmann::json::array();
  for (int vlayers : sizes) {
    absl::StatusOr<proto::ProfileFile> big = planner::SynthesizeProfile(
        *base, 2, static_cast<int>(spec.zoo.depth), vlayers - extra, 1.0);
    if (!big.ok()) return big.status();
    planner::MakePlanOptions m;
    m.num_devices = kDevices;
    m.device_memory = memory;
    m.minibatch = kMinibatch;
    planner::MadePlan last;
    absl::Status failed = absl::OkStatus();
    std::vector<double> seconds = TimeRuns(1, o.runs, [&] {
      absl::StatusOr<planner::MadePlan> made = planner::MakePlan(*big, m);
      if (!made.ok()) {
        failed = made.status();
        return;
      }
      last = *std::move(made);
    });
    if (!failed.ok()) return failed;
    const Stats s = Summarize(seconds);
    nlohmann::json row;
    row["vlayers"] = vlayers;
    row["seconds"] = ToJson(s);
    row["candidates"] = last.result.candidates;
    row["feasible"] = last.result.feasible;
    row["pruned_configs"] = last.result.pruned_configs;
    row["mode"] = PlanModeName(last.plan);
    row["backward_packs"] = last.plan.config().backward_packs_size();
    row["microbatch"] = last.plan.config().backward_microbatch();
    Log(absl::StrFormat("planner: %d vLayers searched in %.2f s (%d configurations)", vlayers,
                        s.median, last.result.candidates));
    rows.push_back(std::move(row));
  }
  nlohmann::json out;
  out["devices"] = kDevices;
  out["device_memory"] = memory;
  out["minibatch"] = kMinibatch;
  out["rows"] = std::move(rows);
  out["checks"] = nlohmann::json::array();
  return out;
}

absl::StatusOr<nlohmann::json> BenchExternal(const BenchOptions& o,
                                             const std::string& testdata_dir) {
  const int minibatch = o.quick ? 16 : 64;
  constexpr int kDevices = 2;
  struct External {
    std::string name, model, data, what;
    // BatchNorm: under vDP (sums reordered) at small microbatches a rounding
    // difference grows ~1e4-fold per step (the suite's "chaotic" models), so
    // only the first iteration's loss, computed from equal weights, is held
    // to the limit; the later ones are reported.
    bool batch_statistics = false;
  };
  const std::vector<External> models = {
      {"torchvision_resnet", "torchvision_resnet.pt", "torchvision_resnet_data.pt",
       "torchvision-style ResNet (BasicBlock, BatchNorm), torch.jit.script", true},
      {"user_gpt", "user_gpt.pt", "user_gpt_data.pt",
       "GPT-style transformer LM (causal mask, dropout), torch.jit.script"}};
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json checks = nlohmann::json::array();
  for (const External& e : models) {
    const std::string path = absl::StrCat(testdata_dir, "/", e.model);
    absl::StatusOr<common::TrainingData> loaded =
        common::LoadTrainingData(absl::StrCat(testdata_dir, "/", e.data));
    if (!loaded.ok()) return loaded.status();
    const common::TrainingData data = RepeatData(*loaded, minibatch);
    // Plan: profile on the devices, then search; timed together.
    proto::ProfileFile profile;
    uint64_t memory = 0;
    planner::MadePlan made;
    absl::Status failed = absl::OkStatus();
    std::vector<double> profile_s, search_s;
    std::vector<double> plan_s = TimeRuns(1, o.runs, [&] {
      if (!failed.ok()) return;
      Stopwatch watch;
      absl::StatusOr<proto::ProfileFile> p = ProfileOn(path, data, kDevices, minibatch);
      if (!p.ok()) {
        failed = p.status();
        return;
      }
      profile = *std::move(p);
      profile_s.push_back(watch.seconds());
      // Devices of the weights' size (never all of the weights and
      // gradients on one device), larger until a plan fits.
      memory = RoundUp(WeightBytes(profile), 64 << 10);
      for (int attempt = 0; attempt < 12; ++attempt, memory = RoundUp(memory * 3 / 2, 64 << 10)) {
        planner::MakePlanOptions m;
        m.num_devices = kDevices;
        m.device_memory = memory;
        m.minibatch = minibatch;
        absl::StatusOr<planner::MadePlan> planned = planner::MakePlan(profile, m);
        if (planned.ok()) {
          made = *std::move(planned);
          failed = absl::OkStatus();
          break;
        }
        failed = planned.status();
      }
      search_s.push_back(watch.seconds() - profile_s.back());
    });
    if (!failed.ok()) return absl::Status(failed.code(), absl::StrCat(e.name, ": ", failed.message()));
    // The warm-up's times are not in the figures.
    profile_s.erase(profile_s.begin());
    search_s.erase(search_s.begin());
    absl::StatusOr<RunResult> run = TrainWithPlan(made.plan, path, data, memory, 0, o.runs, o.warmups);
    if (!run.ok()) return absl::Status(run.status().code(), absl::StrCat(e.name, ": ", run.status().message()));
    absl::StatusOr<std::vector<double>> ref =
        ReferenceLosses(made.plan, path, data, static_cast<int>(run->losses.size()));
    if (!ref.ok()) return ref.status();
    const bool chaotic = e.batch_statistics && made.plan.config().mode() == proto::VDP;
    double worst = 0;
    std::vector<double> differences;
    for (size_t i = 0; i < ref->size(); ++i) {
      differences.push_back(RelativeDifference(run->losses[i], (*ref)[i]));
      if (i == 0 || !chaotic) worst = std::max(worst, differences.back());
    }
    checks.push_back(Check(
        absl::StrCat(e.name, chaotic ? ": first loss equals" : ": losses equal",
                     " the plain loop's"),
        worst <= 1e-5,
        absl::StrFormat("largest relative difference %.2e (limit 1e-05); by iteration %s", worst,
                        absl::StrJoin(differences, ", ", [](std::string* out, double d) {
                          absl::StrAppendFormat(out, "%.1e", d);
                        }))));
    const Stats iteration = Summarize(run->seconds);
    nlohmann::json row;
    row["model"] = e.name;
    row["what"] = e.what;
    row["vlayers"] = profile.profile().vlayers_size();
    row["weight_bytes"] = WeightBytes(profile);
    row["devices"] = kDevices;
    row["device_memory"] = memory;
    row["minibatch"] = minibatch;
    row["plan_s"] = ToJson(Summarize(plan_s));
    row["profile_s"] = ToJson(Summarize(profile_s));
    row["search_s"] = ToJson(Summarize(search_s));
    row["mode"] = PlanModeName(made.plan);
    row["microbatch"] = made.plan.config().backward_microbatch();
    row["backward_packs"] = made.plan.config().backward_packs_size();
    row["iteration_s"] = ToJson(iteration);
    row["samples_per_s"] = minibatch / iteration.median;
    row["simulated_s"] = made.result.sim.iteration_s;
    row["swap_bytes"] = SwapJson(run->bytes);
    row["losses"] = run->losses;
    Log(absl::StrFormat("external: %s planned in %.1f s, %.3f s per iteration", e.name,
                        Summarize(plan_s).median, iteration.median));
    rows.push_back(std::move(row));
  }
  nlohmann::json out;
  out["rows"] = std::move(rows);
  out["checks"] = std::move(checks);
  return out;
}

}  // namespace harmony::bench
