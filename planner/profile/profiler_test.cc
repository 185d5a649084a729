#include "planner/profile/profiler.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/decomposer.h"
#include "common/device_spec.h"
#include "common/files.h"
#include "common/loss.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "planner/profile/target.h"
#include "planner/profile/vlayer_step.h"
#include "planner/profile/vlayer_timing.h"
#include "zoo/zoo.h"

namespace harmony::planner {
namespace {

std::string Tmp(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

// Writes a zoo model; returns its sample data.
common::TrainingData WriteZoo(const std::string& family, const std::string& path,
                              int depth = 2) {
  zoo::ZooOptions o;
  o.family = family;
  o.depth = depth;
  o.width = 16;
  o.seq_len = 8;
  o.vocab = 32;
  o.image_size = 8;
  o.samples = 4;
  EXPECT_TRUE(zoo::WriteZooModelAndData(o, path, path + ".data").ok());
  return *common::LoadTrainingData(path + ".data");
}

ProfilerOptions Options(uint64_t capacity, int max_microbatch) {
  ProfilerOptions options;
  options.devices.count = 2;
  options.devices.capacity = capacity;
  options.max_microbatch = max_microbatch;
  options.repeats = 1;
  return options;
}

TEST(ProfilerTest, ProfilesEveryVLayerAtPowersOfTwo) {
  const std::string path = Tmp("gpt.pt");
  common::TrainingData sample = WriteZoo("gpt", path);
  std::vector<std::string> progress;
  ProfilerOptions options = Options(64ull << 20, 8);
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  absl::StatusOr<proto::ProfileFile> file = ProfileModel(path, sample, options);
  ASSERT_TRUE(file.ok()) << file.status();
  const proto::Profile& p = file->profile();
  const int n = file->model().decomposition().vlayer_count();
  ASSERT_GE(n, 4);
  ASSERT_EQ(p.vlayers_size(), n);
  EXPECT_EQ(file->model().sha256(), *common::Sha256OfFile(path));
  EXPECT_EQ(p.max_forward_microbatch(), 8u);
  EXPECT_EQ(p.max_backward_microbatch(), 8u);
  EXPECT_GT(p.gemm_flop_per_s(), 0);
  EXPECT_GE(p.gemm_threads(), 1u);
  EXPECT_NE(ProfileSummary(*file).find("matrix multiply: "), std::string::npos);
  uint64_t params = 0;
  double in_turn = 0, one = 0;
  for (const proto::VLayerProfile& v : p.vlayers()) {
    params += v.parameter_bytes();
    EXPECT_EQ(v.optimizer_state_bytes(), v.gradient_bytes());  // SGD momentum.
    ASSERT_EQ(v.by_microbatch_size(), 4);  // 1, 2, 4, 8.
    for (int i = 0; i < 4; ++i) {
      const proto::MicrobatchProfile& m = v.by_microbatch(i);
      EXPECT_EQ(m.size(), 1u << i);
      EXPECT_TRUE(m.forward_fits() && m.backward_fits());
      EXPECT_GT(m.forward_time_s(), 0);
      EXPECT_GT(m.backward_time_s(), 0);
      // Timed in turn (the planner's times), over and over (kept to compare)
      // and, for a plan of 2 devices, in turn beside the other device.
      EXPECT_GT(m.forward_time_one_s(), 0);
      EXPECT_GT(m.backward_time_one_s(), 0);
      EXPECT_GT(m.forward_time_busy_s(), 0);
      EXPECT_GT(m.backward_time_busy_s(), 0);
      in_turn += m.forward_time_s() + m.backward_time_s();
      one += m.forward_time_one_s() + m.backward_time_one_s();
      // The peak holds at least the weights copied onto the device, and the
      // backward peak at least as much as the forward's.
      EXPECT_GE(m.forward_peak_bytes(), v.parameter_bytes());
      EXPECT_GE(m.backward_peak_bytes(), m.forward_peak_bytes());
      EXPECT_LE(m.backward_peak_bytes(), 64ull << 20);
      EXPECT_GT(m.outputs_size(), 0);
      // What autograd keeps holds at least the outputs, and fits in the peak
      // beside the weights.
      uint64_t outputs = 0;
      for (const auto& t : m.outputs()) outputs += t.bytes();
      EXPECT_GE(m.saved_bytes(), outputs);
      EXPECT_LE(m.saved_bytes() + v.parameter_bytes(), m.backward_peak_bytes());
    }
    // Activations grow with the microbatch.
    if (v.by_microbatch(0).outputs(0).batched()) {
      EXPECT_EQ(v.by_microbatch(3).outputs(0).bytes(),
                8 * v.by_microbatch(0).outputs(0).bytes());
    }
  }
  // 16-wide GPT, 2 blocks: embeddings, blocks, head; fp32.
  EXPECT_GT(params, 20000u);
  EXPECT_FALSE(progress.empty());
  EXPECT_NE(progress.front().find("profiling vLayer 1/"), std::string::npos);
  EXPECT_GT(p.bandwidths().host_to_device_bytes_per_s(), 0);
  EXPECT_GT(p.bandwidths().peer_bytes_per_s(), 0);
  // A transfer's hand-off and an emulated copy's oversleep: measured, and
  // below a millisecond each on any machine that runs the suite.
  EXPECT_GT(p.bandwidths().transfer_latency_s(), 0);
  EXPECT_LT(p.bandwidths().transfer_latency_s(), 1e-2);
  EXPECT_GE(p.bandwidths().sleep_overshoot_s(), 0);
  EXPECT_LT(p.bandwidths().sleep_overshoot_s(), 1e-1);

  // The same work timed two ways: in turn it reads colder caches, but not
  // by an order of magnitude (a unit or a count gone wrong would be).
  EXPECT_GT(in_turn, 0.3 * one);
  EXPECT_LT(in_turn, 10 * one);

  std::string summary = ProfileSummary(*file);
  EXPECT_NE(summary.find("fwd ms"), std::string::npos);
  EXPECT_NE(summary.find("vLayers timed in turn"), std::string::npos) << summary;
  EXPECT_NE(summary.find("computing beside 1 other busy device"), std::string::npos) << summary;
  EXPECT_NE(summary.find("h.1"), std::string::npos) << summary;
}

// The profile records the matrix multiply rate it ran at; a rate that shows
// the reference BLAS gets a warning with the remedy.
TEST(ProfilerTest, SlowMatrixMultipliesAreWarnedAbout) {
  absl::StatusOr<double> rate = MeasureGemmRate(3);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_GT(*rate, 0);
  const std::string slow = GemmWarning(6.7e9, 2);
  EXPECT_NE(slow.find("6.7 GFLOP/s, below 20 GFLOP/s"), std::string::npos) << slow;
  EXPECT_NE(slow.find("libopenblas0-openmp"), std::string::npos) << slow;
  EXPECT_EQ(GemmWarning(100e9, 2), "");
  EXPECT_NE(GemmWarning(30e9, 8), "");  // 80 GFLOP/s expected of 8 threads.
  EXPECT_EQ(GemmWarning(0, 2), "");     // Not measured.
}

// OpenBLAS on kernels without AVX-512 on a CPU that has it gets a note:
// the variable that holds it there, or the one that would not; nothing when
// its core has them, the CPU has not, or the BLAS is not OpenBLAS.
TEST(ProfilerTest, BlasCoreHintOnlyWhereAvx512KernelsWouldRun) {
  const std::string held = BlasCoreHintFor("Haswell", true, "Haswell");
  EXPECT_NE(held.find("OPENBLAS_CORETYPE=Haswell holds OpenBLAS to its Haswell kernels"),
            std::string::npos)
      << held;
  const std::string taken = BlasCoreHintFor("Zen", true, nullptr);
  EXPECT_NE(taken.find("took this CPU, which has AVX-512, for Zen; OPENBLAS_CORETYPE=SKYLAKEX"),
            std::string::npos)
      << taken;
  EXPECT_EQ(BlasCoreHintFor("SkylakeX", true, "SKYLAKEX"), "");
  EXPECT_EQ(BlasCoreHintFor("Cooperlake", true, nullptr), "");
  EXPECT_EQ(BlasCoreHintFor("Haswell", false, "Haswell"), "");
  EXPECT_EQ(BlasCoreHintFor("", true, nullptr), "");
}

TEST(ProfilerTest, ProbingFindsTheLargestMicrobatchThatFits) {
  const std::string path = Tmp("resnet.pt");
  common::TrainingData sample = WriteZoo("resnet", path, 1);
  // Tight enough that the backward stops fitting well below 256.
  absl::StatusOr<proto::ProfileFile> file =
      ProfileModel(path, sample, Options(3ull << 20, 256));
  ASSERT_TRUE(file.ok()) << file.status();
  const proto::Profile& p = file->profile();
  const uint32_t bwd = p.max_backward_microbatch();
  ASSERT_GT(bwd, 0u);
  ASSERT_LT(bwd, 256u);
  EXPECT_GE(p.max_forward_microbatch(), bwd);
  bool largest_profiled = false;
  for (const proto::VLayerProfile& v : p.vlayers()) {
    for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
      // Fitting means fitting as a task's first microbatch at least (with
      // the gradients summed on the host after each one); the peak beside
      // accumulated gradients is then measured without the cap.
      if (m.backward_fits()) {
        const uint64_t first = m.backward_first_peak_bytes() > 0 ? m.backward_first_peak_bytes()
                                                                 : m.backward_peak_bytes();
        EXPECT_LE(std::min(first, m.backward_peak_bytes()), 3ull << 20);
      }
      // Every vLayer fits at every size up to the model's largest.
      if (m.size() <= bwd) {
        EXPECT_TRUE(m.backward_fits()) << m.size();
      }
      if (m.size() == bwd) largest_profiled = true;
    }
  }
  EXPECT_TRUE(largest_profiled);
  // A size past the largest does not fit somewhere.
  bool over = false;
  for (const proto::VLayerProfile& v : p.vlayers()) {
    for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
      if (m.size() > bwd && !m.backward_fits()) over = true;
    }
  }
  EXPECT_TRUE(over);
}

// harmony-plan profile --microbatches: exactly the sizes asked (sorted, once
// each), no probing; the largest is the profile's largest.
TEST(ProfilerTest, OnlyTheMicrobatchesAsked) {
  const std::string path = Tmp("gpt_sizes.pt");
  common::TrainingData sample = WriteZoo("gpt", path);
  ProfilerOptions options = Options(64ull << 20, 256);
  options.microbatches = {6, 2, 2};
  absl::StatusOr<proto::ProfileFile> file = ProfileModel(path, sample, options);
  ASSERT_TRUE(file.ok()) << file.status();
  const proto::Profile& p = file->profile();
  EXPECT_EQ(p.max_forward_microbatch(), 6u);
  EXPECT_EQ(p.max_backward_microbatch(), 6u);
  ASSERT_GT(p.vlayers_size(), 0);
  for (const proto::VLayerProfile& v : p.vlayers()) {
    ASSERT_EQ(v.by_microbatch_size(), 2);
    EXPECT_EQ(v.by_microbatch(0).size(), 2u);
    EXPECT_EQ(v.by_microbatch(1).size(), 6u);
    EXPECT_GT(v.by_microbatch(1).backward_time_busy_s(), 0);
  }
  options.microbatches = {0, 4};
  absl::StatusOr<proto::ProfileFile> bad = ProfileModel(path, sample, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("microbatch size 0"), std::string::npos)
      << bad.status();
}

TEST(ProfilerTest, TooLittleMemoryIsResourceExhausted) {
  const std::string path = Tmp("mlp.pt");
  common::TrainingData sample = WriteZoo("mlp", path);
  absl::StatusOr<proto::ProfileFile> file =
      ProfileModel(path, sample, Options(2048, 4));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(file.status().message().find("2.00 KiB"), std::string::npos)
      << file.status();
}

// harmony-plan asks for finer cuts only when they change the vLayers: the
// profiler says so before measuring anything.
TEST(ProfilerTest, CutsThatChangeNothingAreNotMeasured) {
  const std::string path = Tmp("gpt_cuts.pt");
  common::TrainingData sample = WriteZoo("gpt", path);
  ProfilerOptions options = Options(64ull << 20, 2);
  int measured = 0;
  options.progress = [&](const std::string&) { ++measured; };
  absl::StatusOr<proto::ProfileFile> blocks = ProfileModel(path, sample, options);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  const int n = blocks->model().decomposition().vlayer_count();
  ASSERT_GT(measured, 0);

  measured = 0;
  options.more_vlayers_than = n;  // The same cuts: nothing to measure.
  absl::StatusOr<proto::ProfileFile> same = ProfileModel(path, sample, options);
  EXPECT_EQ(same.status().code(), absl::StatusCode::kCancelled) << same.status();
  EXPECT_NE(same.status().message().find(absl::StrCat(n, " vLayers")), std::string::npos)
      << same.status();
  EXPECT_EQ(measured, 0);

  // Blocks cut inside (every vLayer heavier than one byte): more vLayers,
  // measured as usual.
  options.max_vlayer_weight_bytes = 1;
  absl::StatusOr<proto::ProfileFile> finer = ProfileModel(path, sample, options);
  ASSERT_TRUE(finer.ok()) << finer.status();
  EXPECT_GT(finer->model().decomposition().vlayer_count(), n);
  EXPECT_EQ(finer->profile().vlayers_size(), finer->model().decomposition().vlayer_count());
  EXPECT_GT(measured, 0);
}

TEST(ProfilerTest, BadModelAndMismatchedSampleAreExplained) {
  const std::string garbage = Tmp("garbage.pt");
  ASSERT_TRUE(common::WriteFileAtomically(garbage, "not a model").ok());
  common::TrainingData sample;
  sample.inputs = {at::zeros({2, 8}, at::kLong)};
  auto file = ProfileModel(garbage, sample, Options(1 << 20, 2));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find(garbage + ": not a TorchScript model"),
            std::string::npos)
      << file.status();

  // The GPT takes tokens and targets; give it images.
  const std::string gpt = Tmp("gpt2.pt");
  WriteZoo("gpt", gpt);
  common::TrainingData images;
  images.inputs = {at::randn({2, 3, 8, 8})};
  file = ProfileModel(gpt, images, Options(16 << 20, 2));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("forward(tokens, targets) takes 2"),
            std::string::npos)
      << file.status();
  // Right arity, wrong shapes: float images where tokens are expected.
  images.targets = {at::zeros({2}, at::kLong)};
  file = ProfileModel(gpt, images, Options(16 << 20, 2));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("failed on the sample input (1 input(s) "
                                         "[[2, 3, 8, 8] Float]"),
            std::string::npos)
      << file.status();
}

TEST(ProfilerTest, ProfileFileRoundTripAndSynthesis) {
  const std::string path = Tmp("gpt3.pt");
  common::TrainingData sample = WriteZoo("gpt", path, 3);
  auto file = ProfileModel(path, sample, Options(64ull << 20, 2));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(WriteProfileFile(Tmp("p.json"), *file).ok());
  auto back = ReadProfileFile(Tmp("p.json"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*file, *back));

  // Find the first block's vLayer ("h.0") and replicate it to 48 blocks,
  // twice as wide.
  int block = -1;
  const auto& vl = file->model().decomposition().vlayers();
  for (int k = 0; k < vl.size(); ++k) {
    if (vl[k].scope() == "h.0") block = k;
  }
  ASSERT_GE(block, 0);
  auto big = SynthesizeProfile(*file, block, 3, 48, 2.0);
  ASSERT_TRUE(big.ok()) << big.status();
  const int n = file->profile().vlayers_size();
  EXPECT_EQ(big->profile().vlayers_size(), n - 3 + 48);
  EXPECT_TRUE(big->profile().synthesized());
  const auto& b0 = file->profile().vlayers(block);
  const auto& s7 = big->profile().vlayers(block + 7);
  EXPECT_EQ(s7.parameter_bytes(), 4 * b0.parameter_bytes());
  // Times: the median of the 3 measured blocks at each size, by 4.
  auto median = [&](int row) {
    std::vector<double> t;
    for (int k = block; k < block + 3; ++k) {
      t.push_back(file->profile().vlayers(k).by_microbatch(row).forward_time_s());
    }
    std::sort(t.begin(), t.end());
    return t[1];
  };
  EXPECT_DOUBLE_EQ(s7.by_microbatch(0).forward_time_s(), 4 * median(0));
  // Sequences twice as long: one sample is as many tokens as two measured
  // ones, so a microbatch of 1 runs at the efficiency measured at 2.
  ASSERT_EQ(b0.by_microbatch(1).size(), 2u);
  auto longer = SynthesizeProfile(*file, block, 3, 48, 2.0, /*seq_scale=*/2.0);
  ASSERT_TRUE(longer.ok()) << longer.status();
  EXPECT_NEAR(longer->profile().vlayers(block + 7).by_microbatch(0).forward_time_s(),
              1 * (median(1) / 2) * 4 * 2, 1e-12);
  EXPECT_EQ(s7.by_microbatch(0).outputs(0).bytes(),
            2 * b0.by_microbatch(0).outputs(0).bytes());

  EXPECT_EQ(SynthesizeProfile(*file, n, 1, 4, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("bad.json"), "{\"nope\": 1}").ok());
  EXPECT_EQ(ReadProfileFile(Tmp("bad.json")).status().code(),
            absl::StatusCode::kInvalidArgument);
}


// Backwards are timed on the model's own gradients: OutputGradients, a
// vLayer at a time in reverse, gives each vLayer's outputs the gradient the
// whole model's backward gives them (a chain of vLayers: bit for bit).
// A zoo vgg of `depth` convolutions cut into vLayers, with the context the
// profiler times it in at the sample's microbatch (forward chain run).
struct VggContext {
  torch::jit::Module model;
  std::unique_ptr<common::Decomposition> d;
  common::TrainingData sample;
  std::unique_ptr<Target> target;
  timing::Context c;
};
std::unique_ptr<VggContext> MakeVggContext(const std::string& name, int depth) {
  auto v = std::make_unique<VggContext>();
  const std::string path = Tmp(name);
  v->sample = WriteZoo("vgg", path, depth);
  v->model = torch::jit::load(path);
  common::DecomposeOptions decompose;
  decompose.granularity = 6;
  absl::StatusOr<std::unique_ptr<common::Decomposition>> d =
      common::Decomposition::Create(v->model, decompose);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return nullptr;
  v->d = *std::move(d);
  const int n = v->d->num_vlayers();
  timing::Context& c = v->c;
  c.d = v->d.get();
  c.params.resize(n);
  c.buffers.resize(n);
  for (int k = 0; k < n; ++k) {
    c.params[k] = *common::ResolveTensors(v->model, v->d->vlayers()[k].parameters);
    c.buffers[k] = *common::ResolveTensors(v->model, v->d->vlayers()[k].buffers);
  }
  c.model_args.assign(v->sample.inputs.begin(), v->sample.inputs.end());
  c.targets = v->sample.targets;
  c.outputs.assign(n, {});
  {
    c10::NoGradGuard no_grad;
    for (int k = 0; k < n; ++k) {
      c.outputs[k] = *v->d->Run(k, c.params[k], c.buffers[k], c.InputsOf(k));
    }
  }
  common::DeviceSpec spec;
  spec.count = 1;
  spec.capacity = 1ull << 30;
  v->target = CreateCpuTarget(spec);
  c.target = v->target.get();
  c.capacity = spec.capacity;
  return v;
}

TEST(ProfilerTest, BackwardsAreTimedOnTheModelsOwnGradients) {
  std::unique_ptr<VggContext> vgg = MakeVggContext("vgg_grads.pt", 4);
  ASSERT_NE(vgg, nullptr);
  timing::Context& c = vgg->c;
  const int n = c.d->num_vlayers();
  ASSERT_GE(n, 3);
  // The classifier's dropout draws the same masks (the only random op).
  at::manual_seed(7);
  ASSERT_TRUE(timing::OutputGradients(c).ok());

  // The whole model's backward, each vLayer's outputs kept.
  timing::Context whole = c;
  at::manual_seed(7);
  for (int k = 0; k < n; ++k) {
    std::vector<c10::IValue> out = *c.d->Run(k, c.params[k], c.buffers[k], whole.InputsOf(k));
    for (c10::IValue& v : out) {
      if (v.isTensor() && v.toTensor().requires_grad()) v.toTensor().retain_grad();
    }
    whole.outputs[k] = out;
  }
  at::Tensor loss = *common::LossFromOutput(whole.outputs[n - 1][0].toTensor(), c.targets, false,
                                            common::LossKind::kAuto);
  loss.backward();
  for (const torch::autograd::Variable& p : vgg->model.parameters()) {
    p.mutable_grad() = at::Tensor();
  }
  int compared = 0;
  for (int k = 0; k + 1 < n; ++k) {
    ASSERT_EQ(c.output_grads[k].size(), whole.outputs[k].size());
    for (size_t o = 0; o < whole.outputs[k].size(); ++o) {
      if (!whole.outputs[k][o].isTensor()) continue;
      const at::Tensor& g = whole.outputs[k][o].toTensor().grad();
      ASSERT_EQ(g.defined(), c.output_grads[k][o].defined()) << "vLayer " << k << " output " << o;
      if (!g.defined()) continue;
      EXPECT_TRUE(at::equal(g, c.output_grads[k][o])) << "vLayer " << k << " output " << o;
      EXPECT_FALSE(at::equal(g, at::ones_like(g)));
      ++compared;
    }
  }
  EXPECT_GE(compared, n - 1);
}

// A pair of vLayers timed as one task (the chained factor) computes what
// the two compute one at a time on the model's own gradients: the pair's
// backward starts from the second's outputs and hands the first its
// gradient inside autograd, bit for bit the one OutputGradients gave it.
TEST(ProfilerTest, APairOfVLayersComputesWhatTheTwoDoOneAtATime) {
  std::unique_ptr<VggContext> vgg = MakeVggContext("vgg_pair.pt", 4);
  ASSERT_NE(vgg, nullptr);
  timing::Context& c = vgg->c;
  const int n = c.d->num_vlayers();
  ASSERT_TRUE(timing::OutputGradients(c).ok());
  // A plain chain: every vLayer's outputs are read by the next alone.
  for (int k = 0; k + 1 < n; ++k) EXPECT_TRUE(timing::OnlyReaderIsNext(*c.d, k)) << k;
  EXPECT_FALSE(timing::OnlyReaderIsNext(*c.d, n - 1));
  const int k = 0;  // Two convolutions: nothing random.
  timing::Prepared first = timing::Prepare(c, k, true, /*with_gradients=*/false);
  timing::Prepared second = timing::Prepare(c, k + 1, true, false);
  EXPECT_GT(timing::ExecutePair(c, /*backward=*/true, first, second), 0);
  timing::Prepared one = timing::Prepare(c, k, true, false);
  timing::Prepared two = timing::Prepare(c, k + 1, true, false);
  timing::Execute(c, k + 1, true, two);
  timing::Execute(c, k, true, one);
  int compared = 0;
  for (auto [pair, alone] : {std::pair{&first, &one}, std::pair{&second, &two}}) {
    ASSERT_EQ(pair->params.size(), alone->params.size());
    for (size_t i = 0; i < pair->params.size(); ++i) {
      const at::Tensor& g = pair->params[i].grad();
      ASSERT_TRUE(g.defined());
      EXPECT_TRUE(at::equal(g, alone->params[i].grad())) << "vLayer " << pair->k << " param " << i;
      EXPECT_GT(g.abs().sum().item<double>(), 0);
      ++compared;
    }
  }
  EXPECT_GE(compared, 4);  // Two weights and two biases.
  // The forward pair hands the first's outputs on: the second's are the chain's.
  timing::Prepared f1 = timing::Prepare(c, k, false, false);
  timing::Prepared f2 = timing::Prepare(c, k + 1, false, false);
  timing::ExecutePair(c, /*backward=*/false, f1, f2);
  EXPECT_TRUE(at::equal(f2.outputs[0].toTensor(), c.outputs[k + 1][0].toTensor()));
}

// Profiled on two devices, every size of a plain chain gets chained factors
// in (0, 1] and a step hand-off, and the summary says them.
TEST(ProfilerTest, PairsGiveEachSizeItsChainedFactorsAndHandoff) {
  const std::string path = Tmp("vgg_chained.pt");
  common::TrainingData sample = WriteZoo("vgg", path, 4);
  absl::StatusOr<proto::ProfileFile> file = ProfileModel(path, sample, Options(64ull << 20, 2));
  ASSERT_TRUE(file.ok()) << file.status();
  int rows = 0;
  for (const proto::VLayerProfile& v : file->profile().vlayers()) {
    for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
      EXPECT_GE(m.forward_chained(), timing::kLeastChained);
      EXPECT_LE(m.forward_chained(), 1.0);
      EXPECT_GE(m.backward_chained(), timing::kLeastChained);
      EXPECT_LE(m.backward_chained(), 1.0);
      // The same factor for every vLayer of a size.
      const proto::MicrobatchProfile& first = file->profile().vlayers(0).by_microbatch(rows % 2);
      EXPECT_EQ(m.forward_chained(), first.forward_chained());
      // And so the step hand-off: measured (the next step was ready at
      // least once a pass), and far below a second.
      EXPECT_GT(m.step_handoff_s(), 0);
      EXPECT_LT(m.step_handoff_s(), 0.1);
      EXPECT_EQ(m.step_handoff_s(), first.step_handoff_s());
      ++rows;
    }
  }
  EXPECT_GE(rows, 2 * 3);
  const std::string summary = ProfileSummary(*file);
  EXPECT_NE(summary.find("a task's later vLayers"), std::string::npos) << summary;
  EXPECT_NE(summary.find("a device's compute thread between two steps"), std::string::npos)
      << summary;
}

}  // namespace
}  // namespace harmony::planner
