// Helpers of the runtime's tests (runtime_test, checkpoint_test): zoo models
// profiled for real once per test binary, plans built by the planner
// library, runs checked against the plan's byte counts and peaks, and
// comparisons with the plain LibTorch loop.

#ifndef HARMONY_EXECUTOR_RUNTIME_RUNTIME_TESTING_H_
#define HARMONY_EXECUTOR_RUNTIME_RUNTIME_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/script.h>

#include "common/tensor_file.h"
#include "executor/runtime/reference.h"
#include "executor/runtime/runtime.h"
#include "planner/search/cost_model.h"
#include "planner/search/search.h"
#include "proto/plan.pb.h"
#include "zoo/zoo.h"

namespace harmony::executor::runtime_testing {

using planner::Config;
using planner::Mode;
using planner::Packing;
using planner::Schedule;

inline constexpr int kMinibatch = 8;
inline constexpr int kIterations = 3;  // RunPlan's.

struct Model {
  std::string path;
  common::TrainingData data;
  proto::ProfileFile profile;
  std::shared_ptr<const planner::CostModel> cost;
};

std::string Tmp(const std::string& name);

// The zoo's small models (minibatch kMinibatch, 24 samples).
zoo::ZooOptions Zoo(const std::string& family, double dropout = 0);
// The model at `path` with its data, profiled once per test binary.
const Model& GetFileModel(const std::string& path, const std::string& data_path);
const Model& GetModel(const std::string& family, double dropout = 0);

// [begin, end) in packs of `size`.
Packing Chunks(int begin, int end, int size);
// A Harmony config: backward packs of `bwd` vLayers, forward packs of `fwd`
// covering what precedes the last backward pack; microbatches uf, ub.
Config MakeConfig(const Model& m, Mode mode, int devices, int fwd, int bwd, int uf, int ub);
proto::Plan MakePlan(const Model& m, const Config& c);

// "adam" (lr 0.01, weight decay 0.01) or SGD with momentum 0.9.
optim::OptimizerOptions Optimizer(const std::string& kind);
// `devices` virtual devices of `capacity` bytes, seed 7.
RuntimeOptions Options(int devices, uint64_t capacity, const optim::OptimizerOptions& opt);

struct TrainingRun {
  std::unique_ptr<Runtime> runtime;
  std::vector<double> losses;
  std::vector<IterationMetrics> metrics;
};

// Runs kIterations of the plan; checks every iteration's bytes against the
// plan's figures and each device's peak against the plan's and the cap.
TrainingRun RunPlan(const Model& m, const proto::Plan& plan, const RuntimeOptions& options);

// ||a - b|| / ||b|| (2-norms over the tensor); 0 when bit-identical.
double RelativeDifference(const at::Tensor& a, const at::Tensor& b);

// Every parameter (and, with `buffers`, buffer) of the reference model
// against the runtime's master copy: bit-identical when `tolerance` is 0;
// otherwise also each parameter's update from `initial` against the
// reference's, relative to the update's size.
void ExpectSameWeights(const Runtime& rt, const torch::jit::Module& reference,
                       const torch::jit::Module& initial, double tolerance, bool buffers);
void ExpectSameLosses(const std::vector<double>& got, const std::vector<double>& want,
                      double tolerance);
// Trains the plan's model with the plain loop and expects the run's losses
// and final weights (and buffers) to equal it.
void ExpectLikeReference(const Model& m, const proto::Plan& plan, const TrainingRun& run,
                         ReferenceOptions ro, double tolerance, bool buffers);
ReferenceOptions Reference(const std::string& optimizer, bool vlayer_dropout = false);

}  // namespace harmony::executor::runtime_testing

#endif  // HARMONY_EXECUTOR_RUNTIME_RUNTIME_TESTING_H_
