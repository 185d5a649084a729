// The benchmark's sections (docs/bench/REPORT.md). Each measures one
// figure side by side in this process and returns it as JSON; a section's
// "checks" array lists the correctness checks it ran ({name, ok, detail}):
// the benchmark fails when one of them fails, never on a time.
//
// Thread-safety: run one section at a time (they use every core).

#ifndef HARMONY_TESTS_BENCH_SECTIONS_H_
#define HARMONY_TESTS_BENCH_SECTIONS_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace harmony::bench {

struct BenchOptions {
  // Smaller models and fewer sizes, to finish in minutes (see bench.sh).
  bool quick = false;
  // Timed runs of every measurement (at least 3).
  int runs = 3;
  // Untimed iterations before a training run's timed ones. A run's
  // iterations get faster for several iterations (measured on the scale
  // bench's resnet: iterations 2-4 took 10-30% longer than 5 on), so the
  // full form warms up 3.
  int warmups = 1;
  // Scratch files (models, data, profiles, plans).
  std::string work_dir;
  // Denormal floats flushed to zero (common/denormals.h) in every section
  // but "denormals", which runs both ways.
  bool flush_denormal = true;
  // The models the schedules and precision sections train, by name (empty:
  // all of them); the other sections each train one fixed model.
  std::vector<std::string> models;

  bool WantsModel(const std::string& name) const {
    return models.empty() || std::find(models.begin(), models.end(), name) != models.end();
  }
};

// The names of the models the schedules and precision sections train
// ("gpt", "vgg"; "resnet" in place of "vgg" when quick).
std::vector<std::string> BenchModelNames(bool quick);

// This machine's matrix-multiply rate (FLOP/s) and the host link that puts
// it in the balance of a commodity GPU server (`flop_per_byte`, ~880 for a
// GTX 1080 Ti on PCIe 3.0): {"gemm_flop_per_s", "flop_per_byte",
// "emulated_link_bytes_per_s"}.
absl::StatusOr<nlohmann::json> MeasureLinkBalance(const BenchOptions& options,
                                                  double flop_per_byte);

// Figures 1-3: swap bytes per iteration counted by the runtime, throughput,
// and simulated vs measured iteration time, for harmony, ondemand, gpipe and
// dp-swap on zoo gpt and resnet, 2 and 4 virtual devices whose memory forces
// swapping, three minibatch sizes; without and with the emulated host link.
absl::StatusOr<nlohmann::json> BenchSchedules(const BenchOptions& options,
                                              double emulated_link);

// Figure 4: Harmony on one device with memory to spare vs the plain LibTorch
// loop (executor/runtime/reference.h), same model and minibatch.
absl::StatusOr<nlohmann::json> BenchOverhead(const BenchOptions& options);

// Figure 5: the CPU optimizer over 100M fp32 parameters vs torch::optim,
// and its bytes/s vs a STREAM-style copy.
absl::StatusOr<nlohmann::json> BenchOptimizer(const BenchOptions& options);

// Figure 6: schedule search time for synthesized profiles of 50, 200 and
// (not in quick mode) 1000 vLayers on 4 devices.
absl::StatusOr<nlohmann::json> BenchPlanner(const BenchOptions& options);

// Figure 7: plan (profile + search) and run times of a torchvision-style
// ResNet and a transformer LM scripted in Python (tests/testdata).
absl::StatusOr<nlohmann::json> BenchExternal(const BenchOptions& options,
                                             const std::string& testdata_dir);

// The denormal policy side by side: zoo vgg (resnet when quick)
// on 2 devices over the emulated link, profiled, planned and trained by
// Harmony with denormals computed and flushed, the plain loop beside each:
// iteration times, the simulator's error, the runtime's compute over the
// profile's.
absl::StatusOr<nlohmann::json> BenchDenormals(const BenchOptions& options,
                                              double emulated_link);

// Gradient clipping side by side: zoo gpt on 2 devices over the emulated
// link, Harmony without clipping, with clipping that never fires and with
// clipping that fires every iteration, speculating and holding, each beside
// the plan's simulated time; rounds of every variant in turn.
absl::StatusOr<nlohmann::json> BenchClipping(const BenchOptions& options,
                                             double emulated_link);

// Precision side by side: the bench's models on 2 devices of a quarter of
// the fp32 weights, Harmony's fp32 plan and bf16 plan (harmony-plan
// --precision), over the emulated link and (gpt) a link a quarter as fast;
// rounds of both in turn: host-link bytes per iteration, samples/s, the
// simulator's error, the runtime's compute over the profile's, and the
// CPU's bf16 features.
absl::StatusOr<nlohmann::json> BenchPrecision(const BenchOptions& options,
                                              double emulated_link);

// The multi-server row: a world of 2 servers on loopback (a
// runtime each, one device and one core each) against one server alone,
// simulated against measured, bytes sent per server per iteration against
// a ring allreduce's 2 (S - 1) / S x gradient bytes.
absl::StatusOr<nlohmann::json> BenchWorld(const BenchOptions& options);

}  // namespace harmony::bench

#endif  // HARMONY_TESTS_BENCH_SECTIONS_H_
