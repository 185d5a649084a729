#include "executor/runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/denormals.h"
#include "common/decomposer.h"
#include "common/decomposition_record.h"
#include "common/files.h"
#include "common/host_memory.h"
#include "common/intra_op_threads.h"
#include "common/loss.h"
#include "common/precision.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "common/units.h"
#include "executor/runtime/device.h"
#include "executor/runtime/host_link.h"
#include "executor/runtime/host_store.h"
#include "executor/runtime/mailbox.h"
#include "executor/runtime/runtime_impl.h"
#include "executor/runtime/trace.h"
#include "plan/plan_reader.h"

namespace harmony::executor {
namespace {

using common::CallTorch;
using plan::Channel;
using plan::PackRange;
using plan::Task;
using plan::TaskGraph;
using plan::TaskKind;
using plan::Transfer;
using plan::TransferKind;

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}



// The rows of the model's first embedding table (nn.Embedding, in module
// order): the token ids it takes; 0 when it has none.
int64_t Vocabulary(const torch::jit::Module& model) {
  for (const auto& m : model.named_modules()) {
    if (!m.value.type()->name()) continue;
    const std::string q = m.value.type()->name()->qualifiedName();
    if (q.substr(q.rfind('.') + 1) != "Embedding") continue;
    for (const auto& p : m.value.named_parameters(/*recurse=*/false)) {
      if (p.name == "weight" && p.value.dim() == 2) return p.value.size(0);
    }
  }
  return 0;
}

}  // namespace


Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

int64_t Runtime::iterations_done() const { return impl_->iteration; }

int Runtime::threads_per_device() const { return impl_->threads_per_device; }
bool Runtime::flush_denormal() const { return impl_->flush_denormal; }
ClipMode Runtime::clip_mode() const {
  // Auto that never holds is shown as what it does: speculate.
  const UpdateRecipe& r = impl_->updates->recipe();
  return r.clip_mode == ClipMode::kAuto && !r.hold_after_clipping ? ClipMode::kSpeculate
                                                                   : r.clip_mode;
}
const std::vector<std::string>& Runtime::no_decay_parameters() const {
  return impl_->host->no_decay_names();
}

std::vector<uint64_t> Runtime::device_bytes_in_use() const {
  std::vector<uint64_t> used;
  for (const auto& d : impl_->devices) used.push_back(d->used());
  return used;
}

uint64_t Runtime::host_store_bytes() const { return impl_->host->bytes(); }

uint64_t Runtime::optimizer_state_bytes() const { return impl_->host->optimizer_state_bytes(); }

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const proto::Plan& plan,
                                                         const std::string& model_path,
                                                         const RuntimeOptions& options) {
  // Kept activations save through autograd's default hooks.
  common::InstallSavedTensorHooks();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->plan = plan;
  HARMONY_ASSIGN_OR_RETURN(impl->graph, plan::TaskGraphFromPlan(plan));
  const plan::Config& config = impl->graph.config;
  impl->minibatch = config.minibatch;

  // The denormal policy, set before the devices' copy threads start (they
  // inherit it: the copy-out sums gradients on the host).
  impl->flush_denormal = options.flush_denormal.value_or(
      plan.profile().has_flush_denormal() && plan.profile().flush_denormal());
  common::ApplyFlushDenormal(impl->flush_denormal);
  // The precision is the plan's.
  const bool plan_bf16 = plan.config().precision() == proto::BF16;
  if (options.bf16.has_value() && *options.bf16 != plan_bf16) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan trains in ", plan_bf16 ? "bf16" : "fp32", ", not ",
        *options.bf16 ? "bf16" : "fp32", ": its transfers and device peaks are sized for ",
        plan_bf16 ? "bf16" : "fp32", "; make a plan with harmony-plan --precision ",
        *options.bf16 ? "bf16" : "fp32"));
  }
  impl->options.bf16 = plan_bf16;
  impl->fp32_gradients = plan_bf16 && plan.config().fp32_gradients();
  // The devices.
  HARMONY_ASSIGN_OR_RETURN(impl->devices, CreateDevices(options.devices, config.num_devices,
                                                        options.device_indices));
  for (const auto& dev : impl->devices) {
    if (options.check_device_memory && dev->capacity() < config.device_memory) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the plan was made for devices of ", common::FormatBytes(config.device_memory),
          "; ", options.devices.ToString(), " gives ", dev->name(), " ",
          common::FormatBytes(dev->capacity())));
    }
  }
  // Host memory: the plan's estimate of the store and stashes, checked
  // before anything is allocated.
  uint64_t host_limit = options.host_memory_limit;
  if (host_limit == 0) host_limit = common::AvailableHostMemory();
  if (host_limit > 0 && plan.estimates().host_memory_bytes() > host_limit) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan needs ", common::FormatBytes(plan.estimates().host_memory_bytes()),
        " of host memory (weights, gradients, optimizer state, stashes); ",
        common::FormatBytes(host_limit), " is available"));
  }
  impl->link = std::make_unique<HostLink>(options.emulate_host_link);
  impl->tracer = std::make_unique<TraceRecorder>(options.trace);

  // The model: its bytes must be the ones the plan was made for.
  HARMONY_ASSIGN_OR_RETURN(std::string sha, common::Sha256OfFile(model_path));
  if (sha != plan.model().sha256()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", model_path, " is not the one the plan was made for: its sha256 is ",
        sha.substr(0, 16), "..., the plan's ", plan.model().sha256().substr(0, 16),
        "... (", plan.model().file_name(), ")"));
  }
  HARMONY_ASSIGN_OR_RETURN(impl->model, CallTorch(absl::StrCat("loading ", model_path), [&] {
    return torch::jit::load(model_path);
  }));
  impl->model.train();
  std::vector<int> cuts(plan.model().decomposition().cut_points().begin(),
                        plan.model().decomposition().cut_points().end());
  HARMONY_ASSIGN_OR_RETURN(impl->dec,
                           common::Decomposition::CreateWithCuts(impl->model, cuts,
                                                                 plan.model().loss_output()));
  HARMONY_RETURN_IF_ERROR(
      common::CheckDecompositionRecord(*impl->dec, plan.model().decomposition()));
  impl->aliases = common::TensorAliases(impl->model);
  if (plan_bf16) {
    HARMONY_ASSIGN_OR_RETURN(impl->bf16_params, CallTorch("the model's bf16 parameters", [&] {
      return common::Bf16ParameterMask(impl->model, *impl->dec);
    }));
  }
  HARMONY_ASSIGN_OR_RETURN(impl->vocab, CallTorch("reading the model's embeddings", [&] {
    return Vocabulary(impl->model);
  }));
  if (impl->dec->num_vlayers() != static_cast<int>(plan.profile().vlayers_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan's profile has ", plan.profile().vlayers_size(), " vLayers, the model ",
        impl->dec->num_vlayers()));
  }
  switch (plan.model().loss()) {
    case proto::CROSS_ENTROPY: impl->loss_kind = common::LossKind::kCrossEntropy; break;
    case proto::MSE: impl->loss_kind = common::LossKind::kMse; break;
    default: impl->loss_kind = common::LossKind::kAuto; break;
  }
  if (config.forward_microbatch != config.backward_microbatch) {
    for (const common::VLayerInfo& v : impl->dec->vlayers()) {
      if (v.uses_rng || v.updates_buffers) {
        return absl::FailedPreconditionError(absl::StrCat(
            "vLayer ", v.index, " (", v.scope, ") ",
            v.uses_rng ? "uses dropout" : "updates batch statistics",
            ": the plan's forward and backward microbatches must be equal, got ",
            config.forward_microbatch, " and ", config.backward_microbatch));
      }
    }
  }

  HARMONY_ASSIGN_OR_RETURN(impl->routes, Routes::Create(impl->graph, *impl->dec, plan.profile()));

  // The host store.
  HARMONY_ASSIGN_OR_RETURN(impl->host,
                           HostStore::Create(impl->model, *impl->dec, options.optimizer,
                                             impl->devices[0]->wants_pinned_host()));
  const World& world = options.world;
  if (world.distributed()) {
    if (world.rank < 0 || world.rank >= world.size || !world.all_reduce_sum ||
        !world.reduce_sum_to || !world.broadcast) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", world.rank, " of a world of ", world.size,
          ": the rank must be in [0, size) and the world needs its collectives"));
    }
    if (world.shard_optimizer_state) impl->host->ShardOptimizerState(world);
  }
  HARMONY_ASSIGN_OR_RETURN(impl->peer_weights,
                           PeerWeights::Create(impl->graph, static_cast<int>(impl->devices.size())));
  for (const plan::Task& t : impl->graph.tasks) {
    for (const plan::Transfer& x : t.transfers) {
      if (x.kind == plan::TransferKind::kGradientReduce && x.peer_task >= 0) {
        impl->reduce_senders[x.peer_task].push_back(t.id);
      }
    }
  }
  impl->gradient_sum_order = plan::GradientSumOrder(impl->graph);
  for (size_t k = 0; k < impl->gradient_sum_order.size(); ++k) {
    impl->host->SetGradientCount(static_cast<int>(k),
                                 static_cast<int>(impl->gradient_sum_order[k].size()));
  }
  HARMONY_ASSIGN_OR_RETURN(impl->threads_per_device,
                           common::ThreadsPerDevice(options.threads, config.num_devices));
  HARMONY_RETURN_IF_ERROR(impl->SetUpRecipe());
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

absl::Status Runtime::SetData(common::TrainingData data) {
  Impl& m = *impl_;
  HARMONY_ASSIGN_OR_RETURN(m.train_data,
                           MinibatchLoader::Create(std::move(data), m.plan,
                                                   m.dec->forward_arguments(), "the data"));
  return absl::OkStatus();
}

absl::Status Runtime::SetTokenData(std::shared_ptr<const common::TokenFile> tokens) {
  Impl& m = *impl_;
  HARMONY_ASSIGN_OR_RETURN(m.train_data,
                           MinibatchLoader::Create(std::move(tokens), m.vocab, m.plan,
                                                   m.dec->forward_arguments(), "the data"));
  return absl::OkStatus();
}

absl::Status Runtime::SetEvalData(common::TrainingData data) {
  Impl& m = *impl_;
  HARMONY_ASSIGN_OR_RETURN(
      MinibatchLoader loader,
      MinibatchLoader::Create(std::move(data), m.plan, m.dec->forward_arguments(),
                              "the evaluation data"));
  return m.SetEvalLoader(std::move(loader));
}

absl::Status Runtime::SetEvalTokenData(std::shared_ptr<const common::TokenFile> tokens) {
  Impl& m = *impl_;
  HARMONY_ASSIGN_OR_RETURN(
      MinibatchLoader loader,
      MinibatchLoader::Create(std::move(tokens), m.vocab, m.plan, m.dec->forward_arguments(),
                              "the evaluation data"));
  return m.SetEvalLoader(std::move(loader));
}

absl::Status Runtime::Impl::SetEvalLoader(MinibatchLoader loader) {
  Impl& m = *this;
  if (!m.train_data.empty() && loader.takes_targets() != m.train_data.takes_targets()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the evaluation data ", loader.takes_targets() ? "gives" : "does not give",
        " forward its targets, the training data ",
        m.train_data.takes_targets() ? "does" : "does not",
        ": give both the same tensors (inputs and targets)"));
  }
  if (m.evaluator == nullptr) {
    // The model decomposed again in eval mode, at the plan's cuts.
    EvalSetup setup;
    const bool was_training = m.model.is_training();
    m.model.eval();
    std::vector<int> cuts(m.plan.model().decomposition().cut_points().begin(),
                          m.plan.model().decomposition().cut_points().end());
    absl::StatusOr<std::unique_ptr<common::Decomposition>> dec =
        common::Decomposition::CreateWithCuts(m.model, cuts, m.plan.model().loss_output());
    m.model.train(was_training);
    if (!dec.ok()) return common::Annotate(dec.status(), "the model in eval mode");
    HARMONY_RETURN_IF_ERROR(CheckEvalDecomposition(*m.dec, **dec));
    setup.dec = *std::move(dec);
    setup.packs = m.graph.config.backward_packs;
    setup.minibatch = m.minibatch;
    setup.microbatch = m.graph.config.backward_microbatch;
    for (size_t p = 0; p < setup.packs.size(); ++p) {
      setup.prefetch.push_back(
          m.graph.config.Prefetches(plan::TaskKind::kBackward, static_cast<int>(p)));
    }
    setup.loss_kind = m.loss_kind;
    setup.threads_per_device = m.threads_per_device;
    setup.flush_denormal = m.flush_denormal;
    setup.seed = m.options.seed;
    setup.bf16 = m.options.bf16.value_or(false);
    setup.bf16_params = m.bf16_params;
    std::vector<Device*> devices;
    for (const auto& d : m.devices) devices.push_back(d.get());
    m.evaluator = std::make_unique<Evaluator>(std::move(setup), std::move(devices), m.host.get(),
                                              m.link.get(), &m.rng_mu);
  }
  m.eval_data = std::move(loader);
  return absl::OkStatus();
}

absl::StatusOr<EvalMetrics> Runtime::Evaluate(int64_t minibatches) {
  Impl& m = *impl_;
  if (m.evaluator == nullptr || m.eval_data.empty()) {
    return absl::FailedPreconditionError("no evaluation data (SetEvalData)");
  }
  if (minibatches < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval-iterations must be >= 0; got ", minibatches));
  }
  if (minibatches == 0) {  // Every whole minibatch of the data; of a token file, 50 at most.
    const int64_t global = static_cast<int64_t>(m.minibatch) * m.options.world.size;
    minibatches = std::max<int64_t>(1, m.eval_data.samples() / global);
    if (m.eval_data.from_token_file()) minibatches = std::min<int64_t>(minibatches, 50);
  }
  common::ApplyFlushDenormal(m.flush_denormal);
  return m.evaluator->Run(m.eval_data, minibatches, m.options.world, m.options.cancelled);
}

absl::StatusOr<IterationMetrics> Runtime::RunIteration() {
  Impl& m = *impl_;
  if (m.train_data.empty()) return absl::FailedPreconditionError("no training data (SetData)");
  const Clock::time_point start = Clock::now();
  // This thread runs the updates, and starts the devices' threads.
  common::ApplyFlushDenormal(m.flush_denormal);
  HARMONY_ASSIGN_OR_RETURN(
      m.batch, m.train_data.Take(m.iteration, m.minibatch, m.options.world.rank,
                                 m.options.world.size, m.options.shuffle, m.options.seed,
                                 m.devices[0]->wants_pinned_host()));
  m.completion.StartIteration(static_cast<int>(m.graph.tasks.size()));
  m.mail.Reset();
  {
    std::lock_guard<std::mutex> lock(m.kept_mu);
    m.kept.clear();
  }
  m.reduction.StartIteration();
  m.peer_weights->StartIteration();
  m.counters.Reset(static_cast<int>(m.devices.size()));
  // What crossed the link before (an evaluation, say) is not this iteration's.
  m.link->TakeUse(LinkDirection::kToDevice);
  m.link->TakeUse(LinkDirection::kToHost);
  for (auto& d : m.devices) d->ResetPeak();
  m.host->StartIteration();
  std::vector<uint64_t> allocations_before, reused_before;
  for (const auto& d : m.devices) {
    allocations_before.push_back(d->allocations());
    reused_before.push_back(d->reused());
  }

  std::vector<std::thread> threads;
  for (size_t d = 0; d < m.devices.size(); ++d) {
    threads.emplace_back([&m, d] {
      absl::Status s = m.RunDevice(static_cast<int>(d));
      if (!s.ok()) m.Fail(s);
    });
  }
  IterationMetrics out;
  absl::Status updates = m.updates->Run(m.iteration, m.options.world, m.completion, *m.link,
                                        *m.tracer, m.counters, out);
  if (!updates.ok()) m.Fail(updates);
  for (std::thread& t : threads) t.join();
  if (absl::Status s = m.completion.error(); !s.ok()) {
    m.mail.Reset();
    {
      std::lock_guard<std::mutex> lock(m.kept_mu);
      m.kept.clear();
    }
    m.reduction.StartIteration();
    m.peer_weights->StartIteration();  // Nothing kept from the failed iteration.
    return s;
  }
  HARMONY_RETURN_IF_ERROR(updates);
  if (m.options.world.distributed()) {
    // Rank 0's buffers on every rank (each rank's BatchNorm statistics saw
    // its own slice), so the ranks stay identical.
    HARMONY_RETURN_IF_ERROR(m.BroadcastBuffers());
  }

  out.iteration = m.iteration;
  out.loss = m.completion.TotalLoss();
  out.seconds = Since(start);
  out.samples_per_s = m.minibatch / out.seconds;
  m.counters.Fill(out);
  const LinkUse to_device = m.link->TakeUse(LinkDirection::kToDevice);
  const LinkUse to_host = m.link->TakeUse(LinkDirection::kToHost);
  out.to_device_link_bytes = to_device.bytes;
  out.to_device_busy_s = to_device.busy_s;
  out.to_host_link_bytes = to_host.bytes;
  out.to_host_busy_s = to_host.busy_s;
  out.to_device_copies = to_device.copies;
  out.to_device_late_s = to_device.late_s;
  out.to_device_late_max_s = to_device.late_max_s;
  out.to_host_copies = to_host.copies;
  out.to_host_late_s = to_host.late_s;
  out.to_host_late_max_s = to_host.late_max_s;
  for (size_t d = 0; d < m.devices.size(); ++d) {
    out.device_peak_bytes.push_back(m.devices[d]->peak());
    out.device_peak_activity.push_back(m.devices[d]->peak_activity());
    out.device_allocations.push_back(m.devices[d]->allocations() -
                                     allocations_before[d]);
    out.device_reused.push_back(m.devices[d]->reused() - reused_before[d]);
  }
  out.emulated_link = m.options.emulate_host_link > 0;
  ++m.iteration;
  return out;
}

absl::Status Runtime::Impl::BroadcastBuffers() {
  std::vector<at::Tensor> all;
  std::vector<int64_t> sizes;
  for (int k = 0; k < host->num_vlayers(); ++k) {
    for (const at::Tensor& b : host->buffers(k)) {
      all.push_back(b.reshape({-1}).to(at::kDouble));  // Integer counters too.
      sizes.push_back(b.numel());
    }
  }
  if (all.empty()) return absl::OkStatus();
  at::Tensor flat = at::cat(all);
  HARMONY_RETURN_IF_ERROR(options.world.broadcast(flat, 0));
  int64_t at = 0;
  for (int k = 0; k < host->num_vlayers(); ++k) {
    std::vector<at::Tensor> mine = host->buffers(k);
    for (at::Tensor& b : mine) {
      at::Tensor from = flat.narrow(0, at, b.numel()).view(b.sizes()).to(b.scalar_type());
      b = b.is_pinned() ? from.pin_memory() : from;
      at += b.numel();
    }
    host->SetBuffers(k, std::move(mine));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> Runtime::HostTensor(const std::string& alias) const {
  const Impl& m = *impl_;
  auto canonical = m.aliases.find(alias);
  const std::string& name = canonical != m.aliases.end() ? canonical->second : alias;
  return m.host->Find(name);
}

absl::Status Runtime::SaveModel(const std::string& path) {
  Impl& m = *impl_;
  HARMONY_RETURN_IF_ERROR(m.host->WriteInto(m.model));
  return common::SaveScriptModule(m.model, path);
}

namespace {

const char* OptimizerName(optim::OptimizerKind kind) {
  switch (kind) {
    case optim::OptimizerKind::kAdam: return "adam";
    case optim::OptimizerKind::kAdamW: return "adamw";
    default: return "sgd";
  }
}

}  // namespace

absl::StatusOr<Checkpoint> Runtime::MakeCheckpoint() const {
  const Impl& m = *impl_;
  Checkpoint c;
  c.model_sha256 = m.plan.model().sha256();
  c.iteration = m.iteration;
  c.minibatch = static_cast<int64_t>(m.minibatch) * m.options.world.size;
  c.world_size = m.options.world.size;
  c.seed = m.options.seed;
  c.shuffle = m.options.shuffle;
  c.optimizer = OptimizerName(m.options.optimizer.kind);
  c.optimizer_steps = m.iteration;  // Every vLayer steps once per iteration.
  c.recipe = m.RecipeJson();
  HARMONY_RETURN_IF_ERROR(m.host->ExportState(c.weights, c.optimizer_state, &m.options.world));
  return c;
}

absl::Status Runtime::Restore(const Checkpoint& c) {
  Impl& m = *impl_;
  if (c.model_sha256 != m.plan.model().sha256()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint is of another model: its sha256 is ", c.model_sha256.substr(0, 16),
        "..., this plan's model's ", m.plan.model().sha256().substr(0, 16), "..."));
  }
  const std::string optimizer = OptimizerName(m.options.optimizer.kind);
  if (c.optimizer != optimizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint holds ", c.optimizer, " state; this run's optimizer is ", optimizer));
  }
  const int64_t global = static_cast<int64_t>(m.minibatch) * m.options.world.size;
  if (c.minibatch != global) {
    const std::string world =
        m.options.world.size > 1 ? absl::StrCat(" (", m.options.world.size, " servers x ",
                                                m.minibatch, ")") : "";
    const int64_t each = c.minibatch / m.options.world.size;
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint was trained with minibatch ", c.minibatch,
        c.world_size > 1 ? absl::StrCat(" (", c.world_size, " servers x ",
                                        c.minibatch / c.world_size, ")") : "",
        "; this run's is ", global, world,
        " (the data order and dropout follow the minibatch: plan again with --minibatch ",
        c.minibatch % m.options.world.size == 0 ? absl::StrCat(each)
                                                : absl::StrCat(c.minibatch, " / servers"),
        ")"));
  }
  HARMONY_RETURN_IF_ERROR(m.CheckRecipe(c.recipe));
  HARMONY_RETURN_IF_ERROR(m.host->ImportState(c.weights, c.optimizer_state, c.optimizer_steps));
  m.iteration = c.iteration;
  m.options.seed = c.seed;
  m.options.shuffle = c.shuffle;
  m.train_data.Reset();
  return absl::OkStatus();
}

std::string Runtime::ChromeTrace() const {
  const Impl& m = *impl_;
  return m.tracer->ChromeJson(static_cast<int>(m.devices.size()), m.options.emulate_host_link);
}

absl::Status LoadData(Runtime& runtime, const DataSource& source, bool eval) {
  if (common::IsTokenFile(source.path)) {
    std::optional<common::TokenType> type;
    if (!source.token_dtype.empty()) {
      HARMONY_ASSIGN_OR_RETURN(type, common::ParseTokenType(source.token_dtype));
    }
    HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<common::TokenFile> file,
                             common::TokenFile::Open(source.path, type, source.seq_len));
    std::shared_ptr<const common::TokenFile> shared(std::move(file));
    return eval ? runtime.SetEvalTokenData(shared) : runtime.SetTokenData(shared);
  }
  HARMONY_ASSIGN_OR_RETURN(common::TrainingData data, common::LoadTrainingData(source.path));
  return eval ? runtime.SetEvalData(std::move(data)) : runtime.SetData(std::move(data));
}

uint64_t DropoutSeed(uint64_t seed, int64_t iteration, int microbatch_offset, int vlayer) {
  return common::SplitMix64(common::SplitMix64(common::SplitMix64(common::SplitMix64(seed) ^ static_cast<uint64_t>(iteration)) ^
                 static_cast<uint64_t>(microbatch_offset)) ^
             static_cast<uint64_t>(vlayer));
}

}  // namespace harmony::executor
