// What the benchmark sections share: plan a schedule (a baseline at the
// largest microbatch size that fits), train with a plan on virtual devices
// for a warm-up and timed iterations, and the plain-loop reference losses
// the runtime's must equal.
//
// Thread-safety: one call at a time (training uses every core).

#ifndef HARMONY_TESTS_BENCH_TRAINING_RUN_H_
#define HARMONY_TESTS_BENCH_TRAINING_RUN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor_file.h"
#include "executor/runtime/runtime.h"
#include "nlohmann/json.hpp"
#include "planner/plan/make_plan.h"
#include "proto/plan.pb.h"
#include "zoo/zoo.h"

namespace harmony::bench {

// A zoo model the benchmarks train.
struct ModelSpec {
  std::string name;
  zoo::ZooOptions zoo;
  bool batch_statistics = false;  // Losses depend on the microbatch size.
};

// zoo gpt (12 blocks, no dropout) and resnet (BatchNorm); smaller inputs
// when `quick`.
std::vector<ModelSpec> BenchModels(bool quick);
nlohmann::json ZooJson(const zoo::ZooOptions& zoo);

struct WrittenModel {
  std::string model_path;
  common::TrainingData data;
};

// Writes the model and `samples` samples of its data into `dir`.
absl::StatusOr<WrittenModel> WriteBenchModel(const std::string& dir, const ModelSpec& spec,
                                             int samples);

// Profiles on `devices` virtual devices of 1 GiB, microbatches up to
// `max_microbatch` (exactly `microbatches` when given), medians of 3 timings, each device on
// `threads_per_device` intra-op threads (0: its share of the cores, as the
// runtime's default), under the calling thread's denormal policy (recorded
// in the profile; the runtime then takes it from the plan); in bf16 for a
// bf16 plan when `bf16`.
absl::StatusOr<proto::ProfileFile> ProfileOn(const std::string& model_path,
                                             const common::TrainingData& data, int devices,
                                             int max_microbatch, int threads_per_device = 0,
                                             bool bf16 = false, bool fp32_gradients = false,
                                             const std::vector<int>& microbatches = {});

// Parameter and buffer bytes; gradient bytes.
uint64_t WeightBytes(const proto::ProfileFile& profile);
uint64_t GradientBytes(const proto::ProfileFile& profile);
uint64_t RoundUp(uint64_t bytes, uint64_t to);

// The optimizer every benchmark trains with (SGD, momentum 0.9).
optim::OptimizerOptions BenchOptimizerOptions();

// Plan options for `devices` devices of `memory` bytes, a minibatch and a
// schedule; with an emulated `host_link` (bytes/s, 0: none) and the
// profile, the link's per-transfer latency as the profiler measured it (each
// emulated copy hands off to its thread and oversleeps once), as
// harmony-plan --host-link-latency plans for it.
planner::MakePlanOptions PlanOptions(int devices, uint64_t memory, int minibatch,
                                     planner::Schedule schedule, double host_link,
                                     const proto::ProfileFile* profile = nullptr);

// MakePlan, except that a baseline (options.schedule != harmony) is planned
// at the largest power-of-two microbatch size, up to its share of the
// minibatch, whose simulated peak fits the devices: as its users would pick;
// at options.microbatch when that is set (ResourceExhausted if it does not
// fit).
absl::StatusOr<planner::MadePlan> PlanSchedule(const proto::ProfileFile& profile,
                                               planner::MakePlanOptions options);

struct RunResult {
  std::vector<double> losses;   // Every iteration, the warm-up first.
  std::vector<double> seconds;  // The timed iterations.
  executor::SwapCounts bytes;   // Of the last iteration.
  bool bytes_steady = true;     // The same counts in every iteration.
  std::vector<uint64_t> device_peak_bytes;  // Highest over the iterations.
  double compute_s = 0, swap_wait_s = 0, optimizer_s = 0;  // Medians.
  // Medians of the slowest device's compute per iteration and of the
  // devices' waits for each other (IterationMetrics::peer_wait_s).
  double slowest_device_compute_s = 0, peer_wait_s = 0;
  // Emulated link: the median per iteration of how late its copies came
  // back past their emulated ends, both ways summed (IterationMetrics).
  double link_late_s = 0;
  // With clipping: timed iterations where it fired, and where speculated
  // updates were redone.
  int clipped = 0, redone = 0;
  // With `again_label`: the model profiled again at the plan's sizes right
  // before the timed iterations and right after them, their times averaged.
  std::optional<proto::ProfileFile> again;
  // Their compute over the first profile's, each (0 when not comparable):
  // apart, the machine's speed moved during the run.
  double again_before_vs_first = 0, again_after_vs_first = 0;
  // Each timing of the timed iterations (more than one where the machine's
  // speed moved during them: TrainWithPlan), in order, and which of them
  // the figures above are (the steadiest).
  struct TimingSummary {
    double after_vs_before = 1;  // The profile after it over the one before.
    double compute_ratio = 0;    // Its compute over their times (0: unknown).
    double spread = 1;           // Its slowest iteration over its fastest.
    double median_s = 0;         // Its median iteration.
  };
  std::vector<TimingSummary> timings;
  int kept_timing = 0;
};

// Trains `runs` timed iterations after `warmups` untimed ones on
// `plan.num_devices` virtual devices of `device_memory` bytes, the host link
// throttled to `emulate_link` bytes/s when > 0; with `recipe` (clipping)
// when given. With `again_label`, the model is profiled again at the sizes
// the plan uses (forward, backward, each pack's; its devices, precision and
// the calling thread's denormal policy) right before the timed iterations
// and right after them, logged under that label, into RunResult::again: the
// profile each model's plans come from is taken once, minutes before most
// runs, and a shared VM's speed drifts by tens of percent meanwhile. Where
// the two profiles are more than kSteadyWithin apart, or the run computed
// outside kSteadyComputeLow-High times their times, or its slowest timed
// iteration took more than kSteadySpread times its fastest, the speed moved
// during the timed iterations: they are timed again, profiled around again
// (without a recipe; kTimings in all at most), and the steadiest timing is
// kept; the losses stay the first timing's, warmups + runs of them.
absl::StatusOr<RunResult> TrainWithPlan(const proto::Plan& plan, const std::string& model_path,
                                        const common::TrainingData& data,
                                        uint64_t device_memory, double emulate_link, int runs,
                                        int warmups = 1,
                                        const executor::TrainingRecipe* recipe = nullptr,
                                        const std::string& again_label = "");

// The plain LibTorch loop over the plan's microbatches, `iterations` of
// them: the losses the runtime's must equal.
absl::StatusOr<std::vector<double>> ReferenceLosses(const proto::Plan& plan,
                                                    const std::string& model_path,
                                                    const common::TrainingData& data,
                                                    int iterations);

// Seconds of `runs` minibatches of the plain LibTorch loop with
// torch::optim (as the exactness tests run it) after one warm-up; loading
// the model is not timed.
absl::StatusOr<std::vector<double>> TimePlainLoop(const proto::Plan& plan,
                                                  const std::string& model_path,
                                                  const common::TrainingData& data, int runs);

// `data` repeated until it holds at least `samples` samples.
common::TrainingData RepeatData(const common::TrainingData& data, int64_t samples);

// The plan simulated again with the run's RunResult::again times, against its
// median iteration: simulated_s, simulator_error, planned_compute_s (the
// busiest device's), compute_ratio (the run's compute per device over that)
// and compute_vs_first_profile, and after_vs_before (the profile after the
// run over the one before it, the machine's drift during the run); empty
// without those times or when the plan cannot take them.
nlohmann::json RetimedJson(const proto::Plan& plan, const RunResult& run);
// "; profiled again around the run: 1.402 s simulated (+2%), compute 0.97x
// those times" for a run's JSON with "retimed", else "".
std::string RetimedText(const nlohmann::json& run);

// "vPP" or "vDP".
std::string PlanModeName(const proto::Plan& plan);

nlohmann::json SwapJson(const executor::SwapCounts& bytes);
// Bytes over the host link: both directions, device-to-device excluded.
uint64_t HostLinkBytes(const executor::SwapCounts& bytes);

}  // namespace harmony::bench

#endif  // HARMONY_TESTS_BENCH_TRAINING_RUN_H_
