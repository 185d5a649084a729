// fp32 and bf16 plans side by side (harmony-plan --precision): the bench's
// models on 2 devices of a quarter of the fp32 weights over the emulated
// link, and gpt over a link a quarter as fast; rounds of both precisions in
// turn, each run beside its plan's simulated time. See sections.h.

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/denormals.h"
#include "common/units.h"
#include "planner/plan/make_plan.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/sections.h"
#include "tests/bench/training_run.h"

namespace harmony::bench {
namespace {

// Which of the CPU's flags that oneDNN uses for bf16 products are present.
nlohmann::json CpuBf16Features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool avx512_bf16 = false, amx_bf16 = false;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    avx512_bf16 = line.find(" avx512_bf16") != std::string::npos;
    amx_bf16 = line.find(" amx_bf16") != std::string::npos;
    break;
  }
  return {{"avx512_bf16", avx512_bf16}, {"amx_bf16", amx_bf16}};
}

uint64_t LinkBytes(const executor::SwapCounts& b) { return b.to_device() + b.to_host(); }

}  // namespace

absl::StatusOr<nlohmann::json> BenchPrecision(const BenchOptions& o, double emulated_link) {
  nlohmann::json out;
  out["cpu_model"] = common::CpuModelName();
  out["cpu_features"] = CpuBf16Features();
  out["configs"] = nlohmann::json::array();
  nlohmann::json checks = nlohmann::json::array();
  const int devices = 2;
  const int minibatch = o.quick ? 16 : 64;
  const int rounds = o.quick ? 2 : 3;
  for (const ModelSpec& spec : BenchModels(o.quick)) {
    if (!o.WantsModel(spec.name)) continue;
    absl::StatusOr<WrittenModel> model = WriteBenchModel(o.work_dir, spec, minibatch);
    if (!model.ok()) return model.status();
    absl::StatusOr<proto::ProfileFile> profiles[3] = {
        ProfileOn(model->model_path, model->data, devices, minibatch),
        ProfileOn(model->model_path, model->data, devices, minibatch, 0, /*bf16=*/true),
        ProfileOn(model->model_path, model->data, devices, minibatch, 0, /*bf16=*/true,
                  /*fp32_gradients=*/true)};
    for (const auto& p : profiles) {
      if (!p.ok()) return p.status();
    }
    // The same devices for both: a quarter of the fp32 weights.
    const uint64_t memory = RoundUp(WeightBytes(*profiles[0]) / 4, 64 << 10);
    std::vector<double> links = {emulated_link};
    if (spec.name == "gpt") links.push_back(emulated_link / 4);
    for (const double link : links) {
      nlohmann::json config;
      config["model"] = spec.name;
      config["zoo"] = ZooJson(spec.zoo);
      config["devices"] = devices;
      config["device_memory"] = memory;
      config["minibatch"] = minibatch;
      config["emulated_link_bytes_per_s"] = link;
      // fp32's plan, bf16's plan, a bf16 plan pinned to fp32's schedule
      // (mode, microbatch, packs): the bytes alone; and bf16 with fp32
      // gradients (--grad-precision fp32).
      constexpr int kRuns = 4;
      const char* const names[kRuns] = {"fp32", "bf16", "bf16, fp32's schedule",
                                        "bf16, fp32 gradients"};
      const int profile_of[kRuns] = {0, 1, 1, 2};
      absl::StatusOr<planner::MadePlan> made[kRuns];
      for (int b = 0; b < kRuns; ++b) {
        planner::MakePlanOptions m = PlanOptions(devices, memory, minibatch,
                                                 planner::Schedule::kHarmony, link,
                                                 &*profiles[profile_of[b]]);
        if (b == 2) {
          const proto::Configuration& c = made[0]->plan.config();
          m.mode = c.mode() == proto::VDP ? planner::Mode::kVdp : planner::Mode::kVpp;
          m.microbatch = static_cast<int>(c.backward_microbatch());
          for (const proto::Pack& p : c.backward_packs()) {
            m.backward_packs.push_back({static_cast<int>(p.begin()), static_cast<int>(p.end())});
          }
        }
        made[b] = PlanSchedule(*profiles[profile_of[b]], m);
        if (!made[b].ok()) break;
      }
      bool planned = true;
      for (int b = 0; b < kRuns; ++b) {
        if (made[b].ok()) continue;
        Log(absl::StrCat("precision: ", spec.name, ": no ", names[b], " plan on devices of ",
                         common::FormatBytes(memory), ": ", made[b].status().message()));
        config["skipped"] = std::string(made[b].status().message());
        planned = false;
        break;
      }
      if (!planned) {
        out["configs"].push_back(std::move(config));
        continue;
      }
      // Rounds of all in turn; bf16's speed over fp32's within each round.
      std::vector<double> seconds[kRuns], ratios, pinned_ratios, fp32_grad_ratios;
      RunResult last[kRuns];
      for (int round = 0; round < rounds; ++round) {
        double median[kRuns];
        for (int b = 0; b < kRuns; ++b) {
          absl::StatusOr<RunResult> run = TrainWithPlan(made[b]->plan, model->model_path,
                                                        model->data, memory, link, o.runs,
                                                        o.warmups);
          if (!run.ok()) return run.status();
          seconds[b].insert(seconds[b].end(), run->seconds.begin(), run->seconds.end());
          median[b] = Summarize(run->seconds).median;
          last[b] = *std::move(run);
        }
        ratios.push_back(median[0] / median[1]);
        pinned_ratios.push_back(median[0] / median[2]);
        fp32_grad_ratios.push_back(median[0] / median[3]);
      }
      config["runs"] = nlohmann::json::array();
      for (int b = 0; b < kRuns; ++b) {
        const proto::Plan& plan = made[b]->plan;
        const Stats s = Summarize(seconds[b]);
        const double planned_compute = plan.estimates().compute_s();
        nlohmann::json r;
        r["precision"] = b == 0 ? "fp32" : "bf16";
        r["name"] = names[b];
        r["mode"] = PlanModeName(plan);
        r["backward_microbatch"] = plan.config().backward_microbatch();
        r["swap_bytes"] = SwapJson(last[b].bytes);
        r["host_link_bytes"] = LinkBytes(last[b].bytes);
        r["bytes_steady"] = last[b].bytes_steady;
        r["iteration_s"] = ToJson(s);
        r["samples_per_s"] = minibatch / s.median;
        r["simulated_s"] = made[b]->result.sim.iteration_s;
        r["simulator_error"] = (made[b]->result.sim.iteration_s - s.median) / s.median;
        r["compute_s"] = last[b].compute_s;
        r["planned_compute_s"] = planned_compute;
        r["compute_ratio"] = planned_compute > 0 ? last[b].compute_s / planned_compute : 0.0;
        r["device_peak_bytes"] = last[b].device_peak_bytes;
        r["first_loss"] = last[b].losses.empty() ? 0.0 : last[b].losses.front();
        config["runs"].push_back(std::move(r));
      }
      const nlohmann::json& f = config["runs"][0];
      const nlohmann::json& h = config["runs"][1];
      config["bytes_bf16_over_fp32"] = static_cast<double>(h["host_link_bytes"].get<uint64_t>()) /
                                       std::max<uint64_t>(1, f["host_link_bytes"].get<uint64_t>());
      config["speed_bf16_over_fp32"] = Summarize(ratios).median;  // Paired within rounds.
      config["speed_rounds"] = ratios;
      const nlohmann::json& pinned = config["runs"][2];
      config["same_schedule_bytes_bf16_over_fp32"] =
          static_cast<double>(pinned["host_link_bytes"].get<uint64_t>()) /
          std::max<uint64_t>(1, f["host_link_bytes"].get<uint64_t>());
      config["same_schedule_speed_bf16_over_fp32"] = Summarize(pinned_ratios).median;
      config["fp32_gradients_speed_over_fp32"] = Summarize(fp32_grad_ratios).median;
      config["fp32_gradients_bytes_over_fp32"] =
          static_cast<double>(config["runs"][3]["host_link_bytes"].get<uint64_t>()) /
          std::max<uint64_t>(1, f["host_link_bytes"].get<uint64_t>());
      Log(absl::StrFormat(
          "precision: %s over %s/s: fp32 %s per iteration, %.1f samples/s (%+.0f%% simulated); "
          "bf16 %s, %.1f samples/s (%+.0f%%): bytes %.2fx, speed %.2fx (paired); on fp32's "
          "schedule bytes %.2fx, speed %.2fx; with fp32 gradients bytes %.2fx, speed %.2fx",
          spec.name, common::FormatBytes(static_cast<uint64_t>(link)),
          common::FormatBytes(f["host_link_bytes"].get<uint64_t>()),
          f["samples_per_s"].get<double>(), 100 * f["simulator_error"].get<double>(),
          common::FormatBytes(h["host_link_bytes"].get<uint64_t>()),
          h["samples_per_s"].get<double>(), 100 * h["simulator_error"].get<double>(),
          config["bytes_bf16_over_fp32"].get<double>(),
          config["speed_bf16_over_fp32"].get<double>(),
          config["same_schedule_bytes_bf16_over_fp32"].get<double>(),
          config["same_schedule_speed_bf16_over_fp32"].get<double>(),
          config["fp32_gradients_bytes_over_fp32"].get<double>(),
          config["fp32_gradients_speed_over_fp32"].get<double>()));
      // The same first loss within bf16's rounding, and bytes that do not
      // drift between iterations.
      const double l0 = f["first_loss"].get<double>(), l1 = h["first_loss"].get<double>();
      checks.push_back({{"name", absl::StrCat("precision: ", spec.name,
                                              " bf16's first loss within 2% of fp32's")},
                        {"ok", std::abs(l1 - l0) <= 0.02 * std::abs(l0)},
                        {"detail", absl::StrFormat("%.5f vs %.5f", l1, l0)}});
      checks.push_back({{"name", absl::StrCat("precision: ", spec.name,
                                              " bytes the same every iteration")},
                        {"ok", last[0].bytes_steady && last[1].bytes_steady &&
                                   last[2].bytes_steady && last[3].bytes_steady},
                        {"detail", ""}});
      out["configs"].push_back(std::move(config));
    }
  }
  out["checks"] = checks;
  return out;
}

}  // namespace harmony::bench
