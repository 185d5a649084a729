#include "planner/profile/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/autocast.h"
#include "common/decomposer.h"
#include "common/denormals.h"
#include "common/device_memory.h"
#include "common/files.h"
#include "common/intra_op_threads.h"
#include "common/model_output.h"
#include "common/precision.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "common/units.h"
#include "optim/cpu_optimizer.h"
#include "planner/profile/model_identity.h"
#include "planner/profile/vlayer_timing.h"

namespace harmony::planner {
namespace {

using common::Decomposition;
using common::DeviceMemory;
using common::DeviceMemoryScope;
using common::TrainingData;
using common::VLayerInfo;
using machine::Median;
using machine::Now;
using timing::ChainTimes;
using timing::Context;
using timing::Measure;
using timing::MeasureInTurn;
using timing::Measurement;

proto::DType ToDType(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return proto::FLOAT32;
    case c10::kDouble: return proto::FLOAT64;
    case c10::kHalf: return proto::FLOAT16;
    case c10::kBFloat16: return proto::BFLOAT16;
    case c10::kLong: return proto::INT64;
    case c10::kInt: return proto::INT32;
    case c10::kChar: return proto::INT8;
    case c10::kByte: return proto::UINT8;
    case c10::kBool: return proto::BOOL;
    default: return proto::DTYPE_UNSPECIFIED;
  }
}

void SetMeta(proto::TensorMeta* meta, const std::string& name,
             const c10::IValue& value, int64_t batch) {
  meta->set_name(name);
  if (!value.isTensor()) {
    meta->set_dtype(proto::DTYPE_UNSPECIFIED);
    return;
  }
  const at::Tensor& t = value.toTensor();
  for (int64_t d : t.sizes()) meta->add_shape(d);
  meta->set_dtype(ToDType(t.scalar_type()));
  meta->set_batched(t.dim() > 0 && t.size(0) == batch);
  meta->set_bytes(t.nbytes());
}

// Rows [0, u) of every tensor, repeating the sample as needed.
std::vector<at::Tensor> Rows(const std::vector<at::Tensor>& tensors, int64_t u) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) {
    out.push_back(t.index_select(0, at::arange(u) % t.size(0)));
  }
  return out;
}

std::string DescribeSample(const TrainingData& s) {
  return absl::StrCat(s.inputs.size(), " input(s) [", common::DescribeTensors(s.inputs),
                      "] and ", s.targets.size(), " target(s) [",
                      common::DescribeTensors(s.targets), "]");
}

// The forward chain at microbatch u (no autograd, host memory): fills
// c.outputs, c.model_args and c.targets.
absl::Status RunChain(Context& c, const TrainingData& sample, int64_t u) {
  std::vector<at::Tensor> inputs = Rows(sample.inputs, u);
  c.targets = Rows(sample.targets, u);
  c.model_args.assign(inputs.begin(), inputs.end());
  if (c.takes_targets) c.model_args.insert(c.model_args.end(), c.targets.begin(), c.targets.end());
  c.outputs.assign(c.d->num_vlayers(), {});
  c.output_grads.clear();
  c10::NoGradGuard no_grad;
  common::Autocast autocast(c.bf16);
  for (int k = 0; k < c.d->num_vlayers(); ++k) {
    absl::StatusOr<std::vector<c10::IValue>> out =
        c.d->Run(k, c.params[k], c.buffers[k], c.InputsOf(k));
    if (!out.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "forward(", absl::StrJoin(c.d->forward_arguments(), ", "),
          ") failed on the sample input (", DescribeSample(sample), ") at microbatch ", u, ": ",
          out.status().message()));
    }
    c.outputs[k] = *std::move(out);
  }
  return absl::OkStatus();
}

double OptimizerStateFactor(const std::string& optimizer) {
  return optimizer == "sgd" ? 1.0 : 2.0;
}

// The runtime's fused CPU optimizer over the vLayer's parameters (one flat
// buffer, random gradients): the median of `repeats` steps after one.
absl::StatusOr<double> UpdateTime(const std::vector<at::Tensor>& params,
                                  const std::string& optimizer, int repeats) {
  int64_t elements = 0;
  for (const at::Tensor& p : params) {
    if (at::isFloatingType(p.scalar_type())) elements += p.numel();
  }
  if (elements == 0) return 0.0;
  optim::OptimizerOptions o;
  HARMONY_ASSIGN_OR_RETURN(o.kind, optim::ParseOptimizerKind(optimizer));
  o.learning_rate = 1e-3;
  o.momentum = 0.9;  // SGD is sized with a momentum buffer (see the header).
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<optim::CpuOptimizer> opt,
                           optim::CpuOptimizer::Create(o, static_cast<size_t>(elements)));
  std::vector<float> weights(static_cast<size_t>(elements), 0.5f);
  std::vector<float> grads(static_cast<size_t>(elements), 0.01f);
  opt->Step(weights.data(), grads.data());  // Warm-up.
  std::vector<double> times;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    const double start = Now();
    opt->Step(weights.data(), grads.data());
    times.push_back(Now() - start);
  }
  return Median(times);
}

}  // namespace

absl::StatusOr<proto::ProfileFile> ProfileModel(const std::string& model_path,
                                                const TrainingData& sample_in,
                                                const ProfilerOptions& options) {
  std::unique_ptr<Target> own_target;
  Target* target = options.target;
  if (target == nullptr) {
    HARMONY_ASSIGN_OR_RETURN(own_target, CreateTarget(options.devices));
    target = own_target.get();
  }
  if (options.optimizer != "sgd" && options.optimizer != "adam" &&
      options.optimizer != "adamw") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown optimizer \"", options.optimizer, "\" (expected sgd, adam or adamw)"));
  }
  if (sample_in.inputs.empty()) {
    return absl::InvalidArgumentError("the sample input holds no tensors");
  }
  // Timed on the share of the cores a device of the plan computes on.
  HARMONY_ASSIGN_OR_RETURN(const int threads, common::ThreadsPerDevice(options.threads_per_device,
                                                                       target->count()));
  common::ScopedIntraOpThreads on_device_threads(threads);
  // The runtime's denormal policy, here and on every thread started below.
  common::ScopedFlushDenormal denormals(options.flush_denormal);
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };

  HARMONY_ASSIGN_OR_RETURN(std::string bytes, common::ReadFileToString(model_path));
  HARMONY_ASSIGN_OR_RETURN(
      torch::jit::Module model,
      common::CallTorch(
          absl::StrCat(model_path,
                       ": not a TorchScript model (save one with "
                       "torch.jit.script(model).save(path))"),
          [&] {
            std::istringstream in(bytes);
            return torch::jit::load(in);
          }));
  model.train(true);
  // Inputs given as a dict go in forward's order; forward's output chosen
  // by running it once on the first sample.
  TrainingData sample = sample_in;
  std::vector<std::string> arguments;
  if (auto forward = model.find_method("forward")) {
    const auto& schema = forward->function().getSchema().arguments();
    for (size_t i = 1; i < schema.size(); ++i) arguments.push_back(schema[i].name());
  }
  HARMONY_RETURN_IF_ERROR(common::ArrangeInputs(arguments, &sample));
  HARMONY_ASSIGN_OR_RETURN(const bool takes_targets,
                           common::ForwardTakesTargets(arguments, sample.inputs, sample.targets));
  std::vector<c10::IValue> first_sample;
  for (const at::Tensor& t : Rows(sample.inputs, 1)) first_sample.emplace_back(t);
  if (takes_targets) {
    for (const at::Tensor& t : Rows(sample.targets, 1)) first_sample.emplace_back(t);
  }
  HARMONY_ASSIGN_OR_RETURN(common::OutputChoice output,
                           common::ChooseLossOutput(model, options.loss_output, &first_sample));
  if (!output.message.empty()) say(output.message);
  common::DecomposeOptions decompose;
  decompose.granularity = options.granularity;
  decompose.max_vlayer_weight_bytes = options.max_vlayer_weight_bytes;
  decompose.split_blocks = options.split_blocks;
  decompose.output = output.selector;
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<Decomposition> d,
                           Decomposition::Create(model, decompose));
  if (options.more_vlayers_than > 0 && d->num_vlayers() <= options.more_vlayers_than) {
    return absl::CancelledError(absl::StrCat("the model splits into ", d->num_vlayers(),
                                             " vLayers, no more than ",
                                             options.more_vlayers_than));
  }
  Context c;
  c.d = d.get();
  c.loss = options.loss;
  c.target = target;
  c.capacity = target->capacity();
  c.takes_targets = takes_targets;
  const int n = d->num_vlayers();
  c.params.resize(n);
  c.buffers.resize(n);
  for (int k = 0; k < n; ++k) {
    HARMONY_ASSIGN_OR_RETURN(c.params[k], common::ResolveTensors(model, d->vlayers()[k].parameters));
    HARMONY_ASSIGN_OR_RETURN(c.buffers[k], common::ResolveTensors(model, d->vlayers()[k].buffers));
  }
  // The fp32 masters (the host store's and the optimizer's sizes), then,
  // in bf16, the copies the devices compute on.
  const std::vector<std::vector<at::Tensor>> masters = c.params;
  c.bf16 = options.bf16;
  if (options.fp32_gradients && !options.bf16) {
    return absl::InvalidArgumentError("fp32 gradients go with bf16 (--precision bf16): fp32 "
                                      "plans' gradients are fp32 already");
  }
  c.fp32_gradients = options.fp32_gradients;
  if (c.bf16) {
    HARMONY_RETURN_IF_ERROR(common::CallTorch("bf16 copies of the parameters", [&] {
      const std::vector<std::vector<bool>> mask = common::Bf16ParameterMask(model, *d);
      for (int k = 0; k < n; ++k) {
        std::vector<at::Tensor> detached;
        for (const at::Tensor& t : c.params[k]) detached.push_back(t.detach());
        std::vector<at::Tensor> copies = common::AsBf16(detached, mask[k]);
        for (size_t j = 0; j < copies.size(); ++j) {
          copies[j].requires_grad_(c.params[k][j].requires_grad());
        }
        c.params[k] = std::move(copies);
      }
    }));
  }

  proto::ProfileFile file;
  file.set_schema_version(kProfileSchemaVersion);
  file.set_created_by("harmony-plan profile");
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  file.mutable_created_at()->set_seconds(now_ns / 1000000000);
  file.mutable_created_at()->set_nanos(static_cast<int32_t>(now_ns % 1000000000));
  proto::ModelIdentity* identity = file.mutable_model();
  identity->set_sha256(common::Sha256Hex(bytes));
  identity->set_file_name(model_path.substr(model_path.find_last_of('/') + 1));
  identity->set_file_bytes(bytes.size());
  identity->set_loss(c.takes_targets ? proto::LOSS_FROM_MODEL
                     : options.loss == common::LossKind::kMse ? proto::MSE
                     : options.loss == common::LossKind::kCrossEntropy
                         ? proto::CROSS_ENTROPY
                         : proto::LOSS_UNSPECIFIED);
  for (size_t i = 0; i < sample.inputs.size(); ++i) {
    SetMeta(identity->add_sample_inputs(), d->forward_arguments().at(i),
            sample.inputs[i], sample.size());
  }
  for (size_t i = 0; i < sample.targets.size(); ++i) {
    SetMeta(identity->add_sample_targets(), absl::StrCat("targets", i),
            sample.targets[i], sample.size());
  }
  identity->set_loss_output(output.selector);
  identity->set_loss_output_note(output.message);
  SetDecomposition(*d, options.granularity, identity);

  proto::Profile* profile = file.mutable_profile();
  profile->set_device_kind(target->kind());
  profile->set_device_name(target->name());
  profile->set_device_memory_bytes(target->capacity());
  profile->set_num_devices(target->count());
  profile->set_optimizer(options.optimizer);
  profile->set_repeats(options.repeats);
  profile->set_backward_peak_with_gradients(true);
  profile->set_flush_denormal(options.flush_denormal);
  profile->set_cpu_model(common::CpuModelName());
  profile->set_precision(options.bf16 ? proto::BF16 : proto::FP32);
  profile->set_fp32_gradients(options.fp32_gradients);
  for (int k = 0; k < n; ++k) {
    proto::VLayerProfile* v = profile->add_vlayers();
    v->set_vlayer(k);
    uint64_t param_bytes = 0, grad_bytes = 0, buffer_bytes = 0, master_bytes = 0,
             master_grad_bytes = 0;
    for (const at::Tensor& p : c.params[k]) {
      param_bytes += p.nbytes();
      if (!at::isFloatingType(p.scalar_type())) continue;
      grad_bytes += options.fp32_gradients ? p.numel() * sizeof(float) : p.nbytes();
    }
    for (const at::Tensor& p : masters[k]) {
      master_bytes += p.nbytes();
      if (at::isFloatingType(p.scalar_type())) master_grad_bytes += p.nbytes();
    }
    for (const at::Tensor& b : c.buffers[k]) buffer_bytes += b.nbytes();
    v->set_parameter_bytes(param_bytes);
    v->set_buffer_bytes(buffer_bytes);
    v->set_gradient_bytes(grad_bytes);
    if (master_bytes != param_bytes) v->set_host_parameter_bytes(master_bytes);
    v->set_optimizer_state_bytes(static_cast<uint64_t>(
        master_grad_bytes * OptimizerStateFactor(options.optimizer)));
    HARMONY_ASSIGN_OR_RETURN(double update,
                             UpdateTime(masters[k], options.optimizer, options.repeats));
    v->set_update_time_s(update);
  }

  std::vector<int64_t> profiled;  // Sizes measured so far.
  // Profiles every vLayer at u; returns whether all forwards / backwards fit.
  auto profile_size = [&](int64_t u, bool* fwd_fit, bool* bwd_fit) -> absl::Status {
    HARMONY_RETURN_IF_ERROR(RunChain(c, sample, u));
    // Backwards are timed on the model's own gradients (not on ones, which
    // hide the slow paths of denormal numbers).
    HARMONY_RETURN_IF_ERROR(timing::OutputGradients(c));
    *fwd_fit = true;
    *bwd_fit = true;
    std::vector<proto::MicrobatchProfile> rows(n);
    const double size_start = Now();
    for (int k = 0; k < n; ++k) {
      // What is left at this size, from the vLayers done (a large model's
      // profile takes minutes per size on a CPU).
      const double left = k > 0 ? (Now() - size_start) / k * (n - k) : 0;
      say(absl::StrCat("profiling vLayer ", k + 1, "/", n, ", microbatch ", u,
                       left < 10 ? std::string()
                       : left < 90 ? absl::StrFormat(" (about %.0f s left at this size)", left)
                                   : absl::StrFormat(" (about %.0f min left at this size)",
                                                     left / 60)));
      proto::MicrobatchProfile& row = rows[k];
      row.set_size(static_cast<uint32_t>(u));
      const bool warm_up = profiled.empty();
      HARMONY_ASSIGN_OR_RETURN(Measurement f,
                               Measure(c, k, false, u, options.repeats, warm_up));
      row.set_forward_fits(f.fits);
      row.set_forward_time_s(f.time_s);
      row.set_forward_peak_bytes(f.peak);
      *fwd_fit = *fwd_fit && f.fits;
      Measurement b;
      if (f.fits) {
        HARMONY_ASSIGN_OR_RETURN(b, Measure(c, k, true, u, options.repeats, warm_up));
      }
      row.set_backward_fits(b.fits);
      row.set_backward_time_s(b.time_s);
      row.set_backward_peak_bytes(b.peak);
      row.set_backward_first_peak_bytes(b.first_peak);
      row.set_saved_bytes(b.saved);
      if (b.fits && k + 1 < n) {
        HARMONY_ASSIGN_OR_RETURN(const uint64_t kept, timing::KeptBytes(c, k));
        row.set_kept_bytes(kept);
      }
      *bwd_fit = *bwd_fit && b.fits;
      std::vector<c10::IValue> in = c.InputsOf(k);
      for (size_t i = 0; i < in.size(); ++i) {
        SetMeta(row.add_inputs(), absl::StrCat("in", i), in[i], u);
      }
      for (size_t o = 0; o < c.outputs[k].size(); ++o) {
        SetMeta(row.add_outputs(), absl::StrCat("out", o), c.outputs[k][o], u);
      }
    }
    if (options.repeats > 0) {
      // The times the planner uses: the vLayers in turn, alone and beside
      // the plan's other devices.
      say(absl::StrCat("timing the vLayers in turn, microbatch ", u));
      std::vector<bool> ff(n), bf(n);
      for (int k = 0; k < n; ++k) {
        ff[k] = rows[k].forward_fits();
        bf[k] = rows[k].backward_fits();
      }
      HARMONY_ASSIGN_OR_RETURN(
          timing::TurnTimes turn,
          MeasureInTurn(c, options.repeats, target->count() - 1, ff, bf));
      const ChainTimes& alone = turn.alone;
      const std::optional<ChainTimes>& busy = turn.beside;
      for (int k = 0; k < n; ++k) {
        proto::MicrobatchProfile& row = rows[k];
        row.set_forward_time_one_s(row.forward_time_s());
        row.set_backward_time_one_s(row.backward_time_s());
        if (ff[k]) row.set_forward_time_s(alone.forward[k]);
        if (bf[k]) row.set_backward_time_s(alone.backward[k]);
        if (busy && ff[k]) row.set_forward_time_busy_s(busy->forward[k]);
        if (busy && bf[k]) row.set_backward_time_busy_s(busy->backward[k]);
        if (ff[k]) row.set_forward_chained(turn.forward_chained);
        if (bf[k]) row.set_backward_chained(turn.backward_chained);
        row.set_step_handoff_s(turn.step_handoff_s);
      }
    }
    for (int k = 0; k < n; ++k) {
      *profile->mutable_vlayers(k)->add_by_microbatch() = rows[k];
    }
    return absl::OkStatus();
  };
  // Whether every vLayer's forward (or backward) fits at u; memory only.
  auto fits = [&](int64_t u, bool backward) -> absl::StatusOr<bool> {
    HARMONY_RETURN_IF_ERROR(RunChain(c, sample, u));
    for (int k = 0; k < n; ++k) {
      say(absl::StrCat("probing microbatch ", u, " (vLayer ", k + 1, "/", n, ")"));
      HARMONY_ASSIGN_OR_RETURN(Measurement m, Measure(c, k, backward, u, 0));
      if (!m.fits) return false;
    }
    return true;
  };

  int64_t fwd_max = 0, bwd_max = 0, fwd_fail = 0, bwd_fail = 0;
  std::vector<int> listed = options.microbatches;
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  if (!listed.empty() && listed.front() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "microbatch size ", listed.front(), " to profile: sizes are 1 or more samples"));
  }
  for (int u : listed) {
    bool f = false, b = false;
    HARMONY_RETURN_IF_ERROR(profile_size(u, &f, &b));
    profiled.push_back(u);
    if (f) fwd_max = u;
    if (b) bwd_max = u;
  }
  for (int64_t u = 1; listed.empty() && u <= options.max_microbatch; u *= 2) {
    bool f = false, b = false;
    absl::Status s = profile_size(u, &f, &b);
    if (u == 1 && absl::IsInvalidArgument(s) && options.max_microbatch >= 2) {
      // Some models cannot train on one sample (BatchNorm over a 1x1 map:
      // "Expected more than 1 value per channel"); their smallest
      // microbatch is 2, which the profile's first row says.
      for (int k = 0; k < n; ++k) profile->mutable_vlayers(k)->clear_by_microbatch();
      say(absl::StrCat("microbatch 1 does not run (", s.message(), "); starting at 2"));
      continue;
    }
    HARMONY_RETURN_IF_ERROR(s);
    profiled.push_back(u);
    if (f) fwd_max = u; else if (!fwd_fail) fwd_fail = u;
    if (b) bwd_max = u; else if (!bwd_fail) bwd_fail = u;
    if (!f || options.smallest_only) break;
  }
  if (bwd_max == 0) {
    // The first vLayer that does not fit at the smallest size.
    int k = 0;
    for (; k + 1 < n; ++k) {
      const proto::MicrobatchProfile& row = profile->vlayers(k).by_microbatch(0);
      if (!row.forward_fits() || !row.backward_fits()) break;
    }
    const proto::MicrobatchProfile& row = profile->vlayers(k).by_microbatch(0);
    return absl::ResourceExhaustedError(absl::StrCat(
        "even a microbatch of ", row.size(), " does not fit: vLayer ", k, " (",
        d->vlayers()[k].scope, ")'s ", row.forward_fits() ? "backward" : "forward",
        " needs more than the ", common::FormatBytes(target->capacity()),
        " of a device; give more device memory or a finer --granularity"));
  }
  // The largest size that fits, between the last power of two that fit and
  // the first that did not (binary search on memory alone).
  auto largest = [&](int64_t lo, int64_t hi, bool backward) -> absl::StatusOr<int64_t> {
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      HARMONY_ASSIGN_OR_RETURN(bool ok, fits(mid, backward));
      (ok ? lo : hi) = mid;
    }
    return lo;
  };
  std::vector<int64_t> extra;
  if (bwd_fail) {
    HARMONY_ASSIGN_OR_RETURN(int64_t b, largest(bwd_max, bwd_fail, true));
    bwd_max = b;
    extra.push_back(b);
  }
  if (fwd_fail) {
    HARMONY_ASSIGN_OR_RETURN(int64_t f, largest(fwd_max, fwd_fail, false));
    fwd_max = f;
    extra.push_back(f);
  }
  std::sort(extra.begin(), extra.end());
  for (int64_t u : extra) {
    if (std::find(profiled.begin(), profiled.end(), u) != profiled.end()) continue;
    bool f = false, b = false;
    HARMONY_RETURN_IF_ERROR(profile_size(u, &f, &b));
    profiled.push_back(u);
  }
  // Rows in increasing size.
  for (int k = 0; k < n; ++k) {
    auto* rows = profile->mutable_vlayers(k)->mutable_by_microbatch();
    std::sort(rows->begin(), rows->end(),
              [](const proto::MicrobatchProfile& a, const proto::MicrobatchProfile& b) {
                return a.size() < b.size();
              });
  }
  profile->set_max_forward_microbatch(static_cast<uint32_t>(fwd_max));
  profile->set_max_backward_microbatch(static_cast<uint32_t>(bwd_max));
  say("measuring copy bandwidth");
  HARMONY_ASSIGN_OR_RETURN(*profile->mutable_bandwidths(),
                           target->MeasureBandwidths(options.repeats));
  say("measuring the matrix multiply rate");
  HARMONY_ASSIGN_OR_RETURN(const double gemm, MeasureGemmRate(options.repeats));
  profile->set_gemm_flop_per_s(gemm);
  profile->set_gemm_threads(static_cast<uint32_t>(threads));
  profile->set_host_threads(std::max(1u, std::thread::hardware_concurrency()));
  return file;
}

}  // namespace harmony::planner
