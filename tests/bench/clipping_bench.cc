// Gradient clipping's cost side by side: zoo gpt on 2 devices over the
// emulated link (as the schedules section's full form), Harmony trained
// without clipping, with clipping that never fires (a max norm far above
// the norm) and with clipping that fires every iteration, speculating and
// holding; the simulator's prediction of each beside it. See sections.h.

#include <algorithm>
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

absl::StatusOr<nlohmann::json> BenchClipping(const BenchOptions& o, double emulated_link) {
  const ModelSpec spec = BenchModels(o.quick).front();  // gpt.
  const int devices = 2;
  const int minibatch = o.quick ? 16 : 64;
  absl::StatusOr<WrittenModel> model = WriteBenchModel(o.work_dir, spec, minibatch);
  if (!model.ok()) return model.status();
  absl::StatusOr<proto::ProfileFile> profile =
      ProfileOn(model->model_path, model->data, devices, minibatch);
  if (!profile.ok()) return profile.status();
  // Devices of a quarter of the weights, as the schedules section.
  const uint64_t memory = RoundUp(WeightBytes(*profile) / 4, 64 << 10);
  planner::MakePlanOptions m = PlanOptions(devices, memory, minibatch,
                                           planner::Schedule::kHarmony, emulated_link,
                                           &*profile);
  absl::StatusOr<planner::MadePlan> made = PlanSchedule(*profile, m);
  if (!made.ok()) return made.status();
  const proto::Estimates& e = made->plan.estimates();
  nlohmann::json out;
  out["model"] = spec.name;
  out["zoo"] = ZooJson(spec.zoo);
  out["devices"] = devices;
  out["device_memory"] = memory;
  out["minibatch"] = minibatch;
  out["mode"] = PlanModeName(made->plan);
  out["emulated_link_bytes_per_s"] = emulated_link;
  out["cpu_model"] = common::CpuModelName();
  struct Variant {
    std::string name;
    double max_norm;  // 0: off.
    executor::ClipMode mode;
    double simulated_s;
  };
  // The norm of this model's gradients is ~1: 1e9 never clips, 1e-6 always.
  const std::vector<Variant> variants = {
      {"off", 0, executor::ClipMode::kSpeculate, e.iteration_time_s()},
      {"speculate, not firing", 1e9, executor::ClipMode::kSpeculate, e.clip_speculate_s()},
      {"speculate, firing", 1e-6, executor::ClipMode::kSpeculate, e.clip_speculate_fires_s()},
      {"hold, not firing", 1e9, executor::ClipMode::kHold, e.clip_hold_s()},
      {"hold, firing", 1e-6, executor::ClipMode::kHold, e.clip_hold_s()},
  };
  // Rounds of every variant in turn, so that the machine's drift falls on
  // all of them alike; each variant's ratio to "off" is taken within a
  // round (the median of its timed iterations over off's), then the median
  // over the rounds.
  const int rounds = o.quick ? 2 : 5;
  std::vector<std::vector<double>> seconds(variants.size());
  std::vector<std::vector<double>> ratios(variants.size());
  std::vector<RunResult> last(variants.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t v = 0; v < variants.size(); ++v) {
      executor::TrainingRecipe recipe;
      recipe.clip_grad_norm = variants[v].max_norm;
      recipe.clip_mode = variants[v].mode;
      absl::StatusOr<RunResult> run =
          TrainWithPlan(made->plan, model->model_path, model->data, memory, emulated_link,
                        o.runs, o.warmups, &recipe);
      if (!run.ok()) return run.status();
      seconds[v].insert(seconds[v].end(), run->seconds.begin(), run->seconds.end());
      ratios[v].push_back(Summarize(run->seconds).median);
      last[v] = *std::move(run);
    }
  }
  for (size_t v = variants.size(); v-- > 0;) {
    for (int round = 0; round < rounds; ++round) ratios[v][round] /= ratios[0][round];
  }
  out["rounds"] = rounds;
  out["variants"] = nlohmann::json::array();
  nlohmann::json checks = nlohmann::json::array();
  for (size_t v = 0; v < variants.size(); ++v) {
    const Stats s = Summarize(seconds[v]);
    nlohmann::json r;
    r["name"] = variants[v].name;
    r["clip_grad_norm"] = variants[v].max_norm;
    r["iteration_s"] = ToJson(s);
    r["vs_off"] = Summarize(ratios[v]).median;  // Paired within rounds.
    r["vs_off_rounds"] = ratios[v];
    r["simulated_s"] = variants[v].simulated_s;
    r["simulator_error"] = (variants[v].simulated_s - s.median) / s.median;
    r["clipped_iterations"] = last[v].clipped;
    r["redone_iterations"] = last[v].redone;
    r["optimizer_s"] = last[v].optimizer_s;
    Log(absl::StrFormat("clipping: %s: %.3f s (%.3fx off, paired by round; %.3f s simulated, "
                        "%+.0f%%), clipped %d of %d timed iterations, redone %d",
                        variants[v].name, s.median, r["vs_off"].get<double>(),
                        variants[v].simulated_s,
                        100 * r["simulator_error"].get<double>(), last[v].clipped,
                        static_cast<int>(last[v].seconds.size()), last[v].redone));
    out["variants"].push_back(std::move(r));
  }
  // The losses: clipping that does not fire changes nothing; firing, both
  // modes give the same.
  auto same = [&](size_t a, size_t b, const std::string& what) {
    checks.push_back({{"name", absl::StrCat("clipping: ", what)},
                      {"ok", last[a].losses == last[b].losses},
                      {"detail", absl::StrCat(variants[a].name, " vs ", variants[b].name)}});
  };
  same(0, 1, "losses equal without clipping and with clipping that does not fire");
  same(2, 4, "losses equal speculating and holding when clipping fires");
  checks.push_back({{"name", "clipping: fired in every timed iteration of the firing runs"},
                    {"ok", last[2].clipped == static_cast<int>(last[2].seconds.size()) &&
                               last[2].redone == last[2].clipped},
                    {"detail", absl::StrCat(last[2].clipped, " clipped, ", last[2].redone,
                                            " redone")}});
  out["checks"] = checks;
  return out;
}

}  // namespace harmony::bench
