// The denormal policy side by side: zoo vgg, a deep plain conv
// stack whose backward makes denormal gradients, profiled, planned and
// trained by Harmony with denormals computed and with them flushed to zero,
// beside the plain LibTorch loop under the same policy. See sections.h.

#include <algorithm>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/denormals.h"
#include "common/units.h"
#include "planner/plan/make_plan.h"
#include "planner/plan/resimulate.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/sections.h"
#include "tests/bench/training_run.h"

namespace harmony::bench {

absl::StatusOr<nlohmann::json> BenchDenormals(const BenchOptions& o, double emulated_link) {
  const ModelSpec spec = BenchModels(o.quick).back();  // vgg (resnet when quick).
  const int devices = 2;
  const int minibatch = o.quick ? 16 : 64;
  absl::StatusOr<WrittenModel> model = WriteBenchModel(o.work_dir, spec, minibatch);
  if (!model.ok()) return model.status();
  nlohmann::json out;
  out["model"] = spec.name;
  out["zoo"] = ZooJson(spec.zoo);
  out["devices"] = devices;
  out["minibatch"] = minibatch;
  out["emulated_link_bytes_per_s"] = emulated_link;
  out["cpu_model"] = common::CpuModelName();
  out["runs"] = nlohmann::json::array();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (bool flush : {false, true}) {
    // The profiler, the runtime (which takes the plan's policy) and the
    // plain loop on this thread all compute under it.
    common::ScopedFlushDenormal policy(flush);
    at::set_num_threads(std::max(1, cores / devices));
    const std::string name = absl::StrCat(spec.name, ", denormals ",
                                          flush ? "flushed to zero" : "computed");
    Stopwatch watch;
    absl::StatusOr<proto::ProfileFile> profile =
        ProfileOn(model->model_path, model->data, devices, minibatch);
    if (!profile.ok()) return profile.status();
    Log(absl::StrFormat("denormals: profiled %s in %.1f s", name, watch.seconds()));
    // Devices of a quarter of the weights (as the schedules section), more
    // until Harmony plans.
    planner::MakePlanOptions m =
        PlanOptions(devices, RoundUp(WeightBytes(*profile) / 4, 64 << 10), minibatch,
                    planner::Schedule::kHarmony, emulated_link, &*profile);
    absl::StatusOr<planner::MadePlan> made = absl::UnknownError("not planned");
    for (int attempt = 0; attempt < 12; ++attempt) {
      made = PlanSchedule(*profile, m);
      if (made.ok() || !absl::IsResourceExhausted(made.status())) break;
      m.device_memory = RoundUp(m.device_memory * 5 / 4, 64 << 10);
    }
    if (!made.ok()) return made.status();
    // Profiled again at the plan's sizes around the timed iterations (the
    // first profile took minutes, over which a shared VM's speed drifts).
    absl::StatusOr<RunResult> run =
        TrainWithPlan(made->plan, model->model_path, model->data, m.device_memory,
                      emulated_link, o.runs, o.warmups, nullptr,
                      absl::StrCat("denormals: ", name));
    if (!run.ok()) return run.status();
    absl::StatusOr<std::vector<double>> plain =
        TimePlainLoop(made->plan, model->model_path, model->data, o.runs);
    if (!plain.ok()) return plain.status();
    const Stats seconds = Summarize(run->seconds);
    const Stats plain_seconds = Summarize(*plain);
    const double planned_compute = made->plan.estimates().compute_s();
    nlohmann::json r;
    r["flush_denormal"] = flush;
    r["device_memory"] = m.device_memory;
    r["microbatch"] = made->plan.config().backward_microbatch();
    r["mode"] = PlanModeName(made->plan);
    r["iteration_s"] = ToJson(seconds);
    r["simulated_s"] = made->result.sim.iteration_s;
    r["simulator_error"] = (made->result.sim.iteration_s - seconds.median) / seconds.median;
    r["compute_s"] = run->compute_s;
    r["planned_compute_s"] = planned_compute;
    r["compute_ratio"] = planned_compute > 0 ? run->compute_s / planned_compute : 0.0;
    // The plan simulated again at the compute speed the run measured, as the
    // schedules' rows are.
    if (const double ratio = r["compute_ratio"].get<double>(); ratio > 0) {
      planner::ResimulateOptions again;
      again.compute_scale = ratio;
      absl::StatusOr<planner::Resimulated> at = planner::ResimulatePlan(made->plan, again);
      if (at.ok()) {
        r["simulated_at_measured_compute_s"] = at->sim.iteration_s;
        r["simulator_error_at_measured_compute"] =
            (at->sim.iteration_s - seconds.median) / seconds.median;
      }
    }
    r["plain_loop_iteration_s"] = ToJson(plain_seconds);
    if (nlohmann::json t = RetimedJson(made->plan, *run); !t.empty()) {
      r["retimed"] = std::move(t);
    }
    Log(absl::StrFormat(
        "denormals: %s: Harmony %.3f s (%.3f s simulated, %+.0f%%), compute %.2fx the "
        "profile's%s; plain loop %.3f s",
        name, seconds.median, made->result.sim.iteration_s,
        100 * r["simulator_error"].get<double>(), r["compute_ratio"].get<double>(),
        RetimedText(r), plain_seconds.median));
    out["runs"].push_back(std::move(r));
  }
  at::set_num_threads(cores);
  return out;
}

}  // namespace harmony::bench
