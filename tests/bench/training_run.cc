#include "tests/bench/training_run.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/denormals.h"
#include "common/torch_status.h"
#include "executor/runtime/reference.h"
#include "planner/plan/plan_builder.h"
#include "planner/plan/resimulate.h"
#include "planner/profile/profiler.h"
#include "tests/bench/bench_util.h"

namespace harmony::bench {

std::vector<ModelSpec> BenchModels(bool quick) {
  ModelSpec gpt;
  gpt.name = "gpt";
  gpt.zoo.family = "gpt";
  gpt.zoo.depth = 12;
  gpt.zoo.width = 32;
  gpt.zoo.heads = 2;
  gpt.zoo.vocab = 64;
  gpt.zoo.seq_len = quick ? 8 : 16;
  gpt.zoo.dropout = 0;
  ModelSpec resnet;
  resnet.name = "resnet";
  resnet.zoo.family = "resnet";
  resnet.zoo.depth = 2;
  resnet.zoo.width = 8;
  resnet.zoo.image_size = quick ? 8 : 16;
  resnet.zoo.classes = 10;
  resnet.batch_statistics = true;
  if (!quick) {
    // At scale: the math dominates the framework's overhead, and
    // layers small enough that devices of a quarter of the weights train the
    // model. 33.7 MiB of weights in 26 blocks of 1.2 MiB.
    gpt.zoo.depth = 26;
    gpt.zoo.width = 160;
    gpt.zoo.heads = 4;
    gpt.zoo.vocab = 2048;
    gpt.zoo.seq_len = 64;
    // 23.6 MiB of weights in 96 convolutions of at most 0.56 MiB (a
    // ResNet's last-stage convolutions of several MiB each leave no room to
    // swap at a quarter of the weights).
    resnet.name = "vgg";
    resnet.zoo.family = "vgg";
    resnet.zoo.depth = 32;
    resnet.zoo.width = 32;
    resnet.zoo.image_size = 16;
    resnet.zoo.dropout = 0;
    resnet.batch_statistics = false;
  }
  return {gpt, resnet};
}

nlohmann::json ZooJson(const zoo::ZooOptions& z) {
  return {{"family", z.family},         {"depth", z.depth},     {"width", z.width},
          {"heads", z.heads},           {"vocab", z.vocab},     {"seq_len", z.seq_len},
          {"image_size", z.image_size}, {"classes", z.classes}, {"dropout", z.dropout}};
}

absl::StatusOr<WrittenModel> WriteBenchModel(const std::string& dir, const ModelSpec& spec,
                                             int samples) {
  zoo::ZooOptions z = spec.zoo;
  z.samples = samples;
  WrittenModel w;
  w.model_path = absl::StrCat(dir, "/", spec.name, ".pt");
  const std::string data_path = absl::StrCat(dir, "/", spec.name, "_data.pt");
  if (absl::Status s = zoo::WriteZooModelAndData(z, w.model_path, data_path); !s.ok()) return s;
  absl::StatusOr<common::TrainingData> data = common::LoadTrainingData(data_path);
  if (!data.ok()) return data.status();
  w.data = *std::move(data);
  return w;
}

absl::StatusOr<proto::ProfileFile> ProfileOn(const std::string& model_path,
                                             const common::TrainingData& data, int devices,
                                             int max_microbatch, int threads_per_device,
                                             bool bf16, bool fp32_gradients,
                                             const std::vector<int>& microbatches) {
  planner::ProfilerOptions p;
  p.threads_per_device = threads_per_device;
  p.devices.kind = common::DeviceSpec::Kind::kCpu;
  p.devices.count = devices;
  p.devices.capacity = uint64_t{1} << 30;
  p.max_microbatch = max_microbatch;
  p.microbatches = microbatches;
  p.repeats = 3;
  p.flush_denormal = common::CallingThreadFlushesDenormal();  // The bench's policy.
  p.bf16 = bf16;
  p.fp32_gradients = fp32_gradients;
  return planner::ProfileModel(model_path, data, p);
}

namespace {

absl::StatusOr<planner::Resimulated> WithTimesOf(const proto::Plan& plan,
                                                 const proto::ProfileFile& again) {
  planner::ResimulateOptions o;
  o.times_from = &again;
  return planner::ResimulatePlan(plan, o);
}

// A run's compute over the simulation's, both summed over the devices; 0
// when either is missing.
double ComputeRatioOf(double compute_s, const planner::Resimulated& at) {
  if (!(at.device_compute_s > 0) || !(compute_s > 0)) return 0;
  return compute_s / at.device_compute_s;
}

}  // namespace

nlohmann::json RetimedJson(const proto::Plan& plan, const RunResult& run) {
  nlohmann::json t;
  const double measured_s = Summarize(run.seconds).median;
  if (!run.again || !(measured_s > 0)) return t;
  absl::StatusOr<planner::Resimulated> at = WithTimesOf(plan, *run.again);
  if (!at.ok()) return t;
  const int devices = std::max(1, static_cast<int>(plan.config().num_devices()));
  t["compute_vs_first_profile"] = at->replaced.ratio;
  if (run.again_before_vs_first > 0 && run.again_after_vs_first > 0) {
    t["after_vs_before"] = run.again_after_vs_first / run.again_before_vs_first;
  }
  if (run.timings.size() > 1) {
    // Timed again where the machine's speed moved: every timing, and the one kept.
    for (const RunResult::TimingSummary& x : run.timings) {
      t["timings"].push_back({{"after_vs_before", x.after_vs_before},
                              {"compute_ratio", x.compute_ratio},
                              {"spread", x.spread},
                              {"median_s", x.median_s}});
    }
    t["kept_timing"] = run.kept_timing;
  }
  t["simulated_s"] = at->sim.iteration_s;
  t["simulator_error"] = (at->sim.iteration_s - measured_s) / measured_s;
  t["planned_compute_s"] = at->device_compute_s / devices;  // Per device, as the run's row.
  if (const double ratio = ComputeRatioOf(run.compute_s, *at); ratio > 0) {
    t["compute_ratio"] = ratio;
  }
  return t;
}

std::string RetimedText(const nlohmann::json& r) {
  if (!r.contains("retimed")) return "";
  const nlohmann::json& t = r["retimed"];
  return absl::StrFormat(
      "; profiled again around the run: %.3f s simulated (%+.0f%%), compute %s",
      t["simulated_s"].get<double>(), 100 * t["simulator_error"].get<double>(),
      t.contains("compute_ratio")
          ? absl::StrFormat("%.2fx those times", t["compute_ratio"].get<double>())
          : std::string("n/a"));
}

planner::MakePlanOptions PlanOptions(int devices, uint64_t memory, int minibatch,
                                     planner::Schedule schedule, double host_link,
                                     const proto::ProfileFile* profile) {
  planner::MakePlanOptions m;
  m.num_devices = devices;
  m.device_memory = memory;
  m.minibatch = minibatch;
  m.schedule = schedule;
  m.host_link = host_link;
  if (host_link > 0 && profile != nullptr) {
    const proto::Bandwidths& bw = profile->profile().bandwidths();
    m.host_link_latency = bw.transfer_latency_s() + bw.sleep_overshoot_s();
  }
  return m;
}

uint64_t WeightBytes(const proto::ProfileFile& p) {
  uint64_t bytes = 0;
  for (const auto& v : p.profile().vlayers()) bytes += v.parameter_bytes() + v.buffer_bytes();
  return bytes;
}

uint64_t GradientBytes(const proto::ProfileFile& p) {
  uint64_t bytes = 0;
  for (const auto& v : p.profile().vlayers()) bytes += v.gradient_bytes();
  return bytes;
}

uint64_t RoundUp(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

optim::OptimizerOptions BenchOptimizerOptions() {
  optim::OptimizerOptions o;
  o.kind = optim::OptimizerKind::kSgd;
  o.learning_rate = 0.01;
  o.momentum = 0.9;
  return o;
}

absl::StatusOr<planner::MadePlan> PlanSchedule(const proto::ProfileFile& profile,
                                               planner::MakePlanOptions options) {
  if (options.schedule == planner::Schedule::kHarmony) return planner::MakePlan(profile, options);
  if (options.microbatch > 0) {  // Pinned: that microbatch or nothing.
    absl::StatusOr<planner::MadePlan> made = planner::MakePlan(profile, options);
    if (made.ok() && !made->result.sim.fits) {
      return absl::ResourceExhaustedError(
          absl::StrCat("does not fit the devices at microbatch ", options.microbatch));
    }
    return made;
  }
  const int share = options.schedule == planner::Schedule::kGpipe
                        ? options.minibatch
                        : (options.minibatch + options.num_devices - 1) / options.num_devices;
  int u = 1;
  while (u * 2 <= share) u *= 2;
  absl::Status last = absl::OkStatus();
  for (; u >= 1; u /= 2) {
    options.microbatch = u;
    absl::StatusOr<planner::MadePlan> made = planner::MakePlan(profile, options);
    if (made.ok() && made->result.sim.fits) return made;
    last = made.ok() ? absl::ResourceExhaustedError(absl::StrCat(
                           "does not fit the devices even at microbatch ", u))
                     : made.status();
  }
  return last;
}

common::TrainingData RepeatData(const common::TrainingData& data, int64_t samples) {
  const int64_t have = data.size();
  if (have >= samples || have == 0) return data;
  const int64_t times = (samples + have - 1) / have;
  common::TrainingData out;
  auto repeat = [&](const at::Tensor& t) {
    std::vector<at::Tensor> copies(times, t);
    return at::cat(copies, 0);
  };
  for (const at::Tensor& t : data.inputs) out.inputs.push_back(repeat(t));
  for (const at::Tensor& t : data.targets) out.targets.push_back(repeat(t));
  return out;
}

namespace {

// The model profiled again at the sizes `plan` uses (TrainWithPlan's
// again_label), logged as "LABEL: profiled again at the plan's sizes
// (WHEN) in T s, compute Nx the first profile's".
// `vs_first`: its compute over the first profile's (0 when not comparable).
absl::StatusOr<proto::ProfileFile> ProfileAgain(const proto::Plan& plan,
                                                const std::string& model_path,
                                                const common::TrainingData& data,
                                                const std::string& label, const char* when,
                                                double* vs_first) {
  Stopwatch watch;
  const proto::Configuration& c = plan.config();
  std::vector<int> sizes = {static_cast<int>(c.forward_microbatch()),
                            static_cast<int>(c.backward_microbatch())};
  for (uint32_t u : c.backward_pack_microbatches()) sizes.push_back(static_cast<int>(u));
  absl::StatusOr<proto::ProfileFile> again = ProfileOn(
      model_path, data, static_cast<int>(std::max<uint32_t>(1, c.num_devices())), 0, 0,
      plan.profile().precision() == proto::BF16, plan.profile().fp32_gradients(), sizes);
  if (!again.ok()) return again.status();
  proto::ProfileFile mine = planner::ProfileOfPlan(plan);
  absl::StatusOr<planner::ReplacedTimes> r = planner::ReplaceComputeTimes(mine, *again);
  *vs_first = r.ok() ? r->ratio : 0;
  Log(absl::StrFormat("%s: profiled again at the plan's sizes (%s) in %.1f s, compute %s the "
                      "first profile's", label, when, watch.seconds(),
                      r.ok() ? absl::StrFormat("%.2fx", r->ratio) : std::string("n/a")));
  return again;
}

}  // namespace

absl::StatusOr<RunResult> TrainWithPlan(const proto::Plan& plan, const std::string& model_path,
                                        const common::TrainingData& data,
                                        uint64_t device_memory, double emulate_link, int runs,
                                        int warmups, const executor::TrainingRecipe* recipe,
                                        const std::string& again_label) {
  executor::RuntimeOptions o;
  o.devices.kind = common::DeviceSpec::Kind::kCpu;
  o.devices.count = static_cast<int>(plan.config().num_devices());
  o.devices.capacity = device_memory;
  o.optimizer = BenchOptimizerOptions();
  o.seed = 1;
  o.emulate_host_link = emulate_link;
  if (recipe != nullptr) {
    o.recipe = *recipe;
    absl::Status resolved = executor::ResolveRecipe(o.optimizer, warmups + runs, o.recipe);
    if (!resolved.ok()) return resolved;
  }
  absl::StatusOr<std::unique_ptr<executor::Runtime>> runtime =
      executor::Runtime::Create(plan, model_path, o);
  if (!runtime.ok()) return runtime.status();
  if (absl::Status set = (*runtime)->SetData(data); !set.ok()) return set;
  RunResult r;
  // The timed iterations' figures, of one timing.
  struct Timing {
    std::vector<double> seconds, compute, wait, optimizer, slowest, peer_wait, late;
    int clipped = 0, redone = 0;
    std::optional<proto::ProfileFile> again;  // The two profiles around it, averaged.
    double before_vs_first = 0, after_vs_first = 0;
    double compute_ratio = 0;  // Its compute over `again`'s times (0: unknown).
    double drift() const {
      return before_vs_first > 0 && after_vs_first > 0 ? after_vs_first / before_vs_first : 1;
    }
    // The slowest timed iteration over the fastest.
    double spread() const {
      const Stats s = Summarize(seconds);
      return s.min > 0 ? s.max / s.min : 1;
    }
    double unsteadiness() const { return Unsteadiness(drift(), compute_ratio, spread()); }
  };
  auto iterate = [&](bool record_loss, Timing* timed) -> absl::Status {
    absl::StatusOr<executor::IterationMetrics> m = (*runtime)->RunIteration();
    if (!m.ok()) return m.status();
    if (record_loss) r.losses.push_back(m->loss);
    if (timed != nullptr) {
      timed->seconds.push_back(m->seconds);
      timed->compute.push_back(m->compute_s);
      timed->wait.push_back(m->swap_wait_s);
      timed->optimizer.push_back(m->optimizer_s);
      timed->peer_wait.push_back(m->peer_wait_s);
      timed->late.push_back(m->to_device_late_s + m->to_host_late_s);
      if (!m->device_compute_s.empty()) {
        timed->slowest.push_back(
            *std::max_element(m->device_compute_s.begin(), m->device_compute_s.end()));
      }
      timed->clipped += m->clipping && m->clip_coef < 1;
      timed->redone += m->redone;
      if (SwapJson(m->bytes) != SwapJson(r.bytes)) r.bytes_steady = false;
    }
    r.bytes = m->bytes;
    r.device_peak_bytes.resize(m->device_peak_bytes.size());
    for (size_t d = 0; d < m->device_peak_bytes.size(); ++d) {
      r.device_peak_bytes[d] = std::max(r.device_peak_bytes[d], m->device_peak_bytes[d]);
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < warmups; ++i) {
    if (absl::Status s = iterate(true, nullptr); !s.ok()) return s;
  }
  // Profiled again around them, the timed iterations are timed again (up to
  // kTimings in all) while the profiles before and after them are more than
  // kSteadyWithin apart, their compute is outside kSteadyComputeLow-High
  // times the profiles' mean or their slowest took more than kSteadySpread
  // times their fastest; the steadiest timing is kept. The losses are the
  // first timing's (warmups + runs of them, as the reference's); a recipe's
  // schedule is resolved for those, so a run with one is timed once.
  const bool again = !again_label.empty();
  const int timings = again && recipe == nullptr ? kTimings : 1;
  Timing kept;
  for (int k = 0; k < timings; ++k) {
    Timing t;
    std::optional<proto::ProfileFile> before;
    if (again) {
      absl::StatusOr<proto::ProfileFile> p = ProfileAgain(
          plan, model_path, data, again_label, "before the timed iterations", &t.before_vs_first);
      if (!p.ok()) return p.status();
      before = *std::move(p);
    }
    for (int i = 0; i < runs; ++i) {
      if (absl::Status s = iterate(k == 0, &t); !s.ok()) return s;
    }
    if (before) {
      absl::StatusOr<proto::ProfileFile> after =
          ProfileAgain(plan, model_path, data, again_label, "after them", &t.after_vs_first);
      if (!after.ok()) return after.status();
      planner::AverageComputeTimes(*before, *after);
      t.again = *std::move(before);
    }
    if (t.again) {
      absl::StatusOr<planner::Resimulated> at = WithTimesOf(plan, *t.again);
      if (at.ok()) t.compute_ratio = ComputeRatioOf(Summarize(t.compute).median, *at);
    }
    r.timings.push_back({t.drift(), t.compute_ratio, t.spread(), Summarize(t.seconds).median});
    const bool steady = t.unsteadiness() <= 1;
    if (k == 0 || t.unsteadiness() < kept.unsteadiness()) {
      kept = std::move(t);
      r.kept_timing = k;
    }
    if (steady || k + 1 == timings) break;
    Log(absl::StrFormat("%s: the machine's speed moved during the timed iterations (the profile "
                        "after them %.2fx the one before, the run's compute %.2fx their times, "
                        "the slowest iteration %.2fx the fastest): timing them again (%d of %d)",
                        again_label, r.timings.back().after_vs_before,
                        r.timings.back().compute_ratio, r.timings.back().spread, k + 2,
                        timings));
  }
  r.seconds = kept.seconds;
  r.clipped = kept.clipped;
  r.redone = kept.redone;
  r.again = std::move(kept.again);
  r.again_before_vs_first = kept.before_vs_first;
  r.again_after_vs_first = kept.after_vs_first;
  r.compute_s = Summarize(kept.compute).median;
  r.swap_wait_s = Summarize(kept.wait).median;
  r.optimizer_s = Summarize(kept.optimizer).median;
  r.peer_wait_s = Summarize(kept.peer_wait).median;
  r.link_late_s = Summarize(kept.late).median;
  if (!kept.slowest.empty()) r.slowest_device_compute_s = Summarize(kept.slowest).median;
  return r;
}

namespace {

absl::StatusOr<std::vector<double>> PlainLoop(const proto::Plan& plan,
                                              const std::string& model_path,
                                              const common::TrainingData& data, int iterations,
                                              bool harmony, double* seconds) {
  absl::StatusOr<torch::jit::Module> model = common::CallTorch(
      model_path, [&] { return torch::jit::load(model_path); });
  if (!model.ok()) return model.status();
  model->train(true);
  executor::ReferenceOptions o;
  o.optimizer = BenchOptimizerOptions();
  // The answer (harmony): Harmony's optimizer arithmetic and the runtime's
  // dropout stream per (iteration, microbatch, vLayer). The plain loop:
  // torch::optim and the module's own forward.
  o.harmony_optimizer = harmony;
  o.vlayer_dropout = harmony;
  o.seed = 1;
  o.iterations = iterations;
  Stopwatch watch;
  absl::StatusOr<std::vector<double>> losses =
      executor::TrainReferenceForPlan(plan, *model, data, o);
  if (seconds != nullptr) *seconds = watch.seconds();
  return losses;
}

}  // namespace

absl::StatusOr<std::vector<double>> TimePlainLoop(const proto::Plan& plan,
                                                  const std::string& model_path,
                                                  const common::TrainingData& data, int runs) {
  std::vector<double> times;
  for (int i = 0; i < 1 + runs; ++i) {
    double seconds = 0;
    absl::StatusOr<std::vector<double>> losses =
        PlainLoop(plan, model_path, data, 1, /*harmony_optimizer=*/false, &seconds);
    if (!losses.ok()) return losses.status();
    if (i > 0) times.push_back(seconds);
  }
  return times;
}

absl::StatusOr<std::vector<double>> ReferenceLosses(const proto::Plan& plan,
                                                    const std::string& model_path,
                                                    const common::TrainingData& data,
                                                    int iterations) {
  return PlainLoop(plan, model_path, data, iterations, /*harmony_optimizer=*/true, nullptr);
}

std::string PlanModeName(const proto::Plan& plan) {
  return plan.config().mode() == proto::VPP ? "vPP" : "vDP";
}

nlohmann::json SwapJson(const executor::SwapCounts& b) {
  return {{"weights_in", b.weights_in},
          {"gradients_out", b.gradients_out},
          {"activations_in", b.activations_in},
          {"activations_out", b.activations_out},
          {"stash_out", b.stash_out},
          {"stash_in", b.stash_in},
          {"kept_out", b.kept_out},
          {"kept_in", b.kept_in},
          {"data_in", b.data_in + b.targets_in},
          {"peer", b.peer},
          {"host_link", HostLinkBytes(b)}};
}

uint64_t HostLinkBytes(const executor::SwapCounts& b) { return b.to_device() + b.to_host(); }

}  // namespace harmony::bench
