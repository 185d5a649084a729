#include "executor/runtime/evaluation.h"

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/autocast.h"
#include "common/precision.h"
#include "common/denormals.h"
#include "common/dropout.h"
#include "common/intra_op_threads.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/runtime.h"

namespace harmony::executor {
namespace {

using common::CallTorch;
using Ref = std::pair<int, int>;

uint64_t BytesOf(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() ? static_cast<uint64_t>(v.toTensor().nbytes())
                                                : 0;
}

// CallTorch for a function returning a status: LibTorch's exceptions
// become Internal errors with `context`.
template <typename Fn>
absl::Status Guarded(absl::string_view context, Fn&& fn) {
  absl::Status inner;
  absl::Status outer = CallTorch(context, [&] { inner = fn(); }, absl::StatusCode::kInternal);
  return outer.ok() ? inner : outer;
}

std::string Layers(const plan::PackRange& r) {
  return absl::StrCat("vLayers ", r.begin, "-", r.end - 1);
}

}  // namespace

struct Evaluator::PackWeights {
  std::vector<std::vector<at::Tensor>> params, buffers;  // Per vLayer of the pack.
};

struct Evaluator::Counters {
  std::atomic<uint64_t> weights_in{0}, data_in{0}, activations_in{0}, activations_out{0};
};

absl::Status CheckEvalDecomposition(const common::Decomposition& train,
                                    const common::Decomposition& eval) {
  if (train.num_vlayers() != eval.num_vlayers()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in eval mode the model decomposes into ", eval.num_vlayers(), " vLayers, in training ",
        train.num_vlayers(), ": it cannot be evaluated through this plan"));
  }
  for (int k = 0; k < train.num_vlayers(); ++k) {
    const common::VLayerInfo& a = train.vlayers()[k];
    const common::VLayerInfo& b = eval.vlayers()[k];
    bool same = a.parameters == b.parameters && a.buffers == b.buffers &&
                a.output_is_tensor == b.output_is_tensor && a.inputs.size() == b.inputs.size();
    for (size_t i = 0; same && i < a.inputs.size(); ++i) {
      same = a.inputs[i].producer == b.inputs[i].producer && a.inputs[i].index == b.inputs[i].index;
    }
    if (!same) {
      return absl::FailedPreconditionError(absl::StrCat(
          "vLayer ", k, " (", a.scope.empty() ? "the model" : a.scope,
          ") reads or makes other values in eval mode than in training: the model cannot be "
          "evaluated through this plan"));
    }
  }
  return absl::OkStatus();
}

Evaluator::Evaluator(EvalSetup setup, std::vector<Device*> devices, const HostStore* host,
                     HostLink* link, std::mutex* rng_mu)
    : setup_(std::move(setup)),
      devices_(std::move(devices)),
      host_(host),
      link_(link),
      rng_mu_(rng_mu) {
  const common::Decomposition& dec = *setup_.dec;
  for (const common::VLayerInfo& v : dec.vlayers()) {
    for (const common::ValueSource& s : v.inputs) {
      int& last = last_reader_[{s.producer, s.index}];
      last = std::max(last, v.index);
    }
  }
  last_reader_[{dec.num_vlayers() - 1, 0}] = dec.num_vlayers();
}

absl::StatusOr<std::shared_ptr<Evaluator::PackWeights>> Evaluator::LoadPack(int d, int pack,
                                                                            Counters& counters) {
  const plan::PackRange range = setup_.packs[pack];
  const std::string label = absl::StrCat("weights in for the evaluation of ", Layers(range));
  auto w = std::make_shared<PackWeights>();
  auto scope = devices_[d]->Place(label);
  HARMONY_RETURN_IF_ERROR(CallTorch(label, [&] {
    for (int k = range.begin; k < range.end; ++k) {
      const double start = link_->Now();
      std::vector<at::Tensor> source = host_->params(k);
      if (setup_.bf16 && !setup_.bf16_params.empty()) {
        auto on_host = PlaceOnHost();
        source = common::AsBf16(source, setup_.bf16_params[k]);
      }
      std::vector<at::Tensor> ps = devices_[d]->ToDeviceMany(source, label);
      std::vector<at::Tensor> bs = devices_[d]->ToDeviceMany(host_->buffers(k), label);
      uint64_t bytes = 0;
      for (const at::Tensor& t : ps) bytes += t.nbytes();
      for (const at::Tensor& t : bs) bytes += t.nbytes();
      link_->Cross(LinkDirection::kToDevice, bytes, start);
      counters.weights_in += bytes;
      w->params.push_back(std::move(ps));
      w->buffers.push_back(std::move(bs));
    }
  }, absl::StatusCode::kInternal));
  HARMONY_RETURN_IF_ERROR(devices_[d]->Sync());
  return w;
}

absl::Status Evaluator::RunDevice(int d, int64_t index, const Minibatch& batch,
                                  bool takes_targets, std::vector<double>& losses,
                                  Counters& counters) {
  Device& dev = *devices_[d];
  dev.StartCompute();
  common::SetCallingThreadIntraOpThreads(setup_.threads_per_device);
  common::ApplyFlushDenormal(setup_.flush_denormal);
  c10::NoGradGuard no_grad;
  const common::Decomposition& dec = *setup_.dec;
  const int n = dec.num_vlayers();
  const int num_devices = static_cast<int>(devices_.size());
  // This device's microbatches, each with the values it holds on the host.
  std::vector<plan::Microbatch> mine;
  for (const plan::Microbatch& mb : plan::SplitMicrobatches(0, setup_.minibatch,
                                                            setup_.microbatch)) {
    if (mb.index % num_devices == d) mine.push_back(mb);
  }
  if (mine.empty()) return absl::OkStatus();
  std::vector<Values> on_host(mine.size());
  for (size_t m = 0; m < mine.size(); ++m) {
    for (size_t i = 0; i < batch.arguments.size(); ++i) {
      on_host[m][{-1, static_cast<int>(i)}] =
          batch.arguments[i].narrow(0, mine[m].offset, mine[m].size);
    }
  }
  // Weights: the first pack's now, each next one's during the pack before
  // when the plan prefetches.
  auto post = [&](int pack) {
    auto done = std::make_shared<std::promise<absl::StatusOr<std::shared_ptr<PackWeights>>>>();
    std::future<absl::StatusOr<std::shared_ptr<PackWeights>>> got = done->get_future();
    dev.weights().Post([this, d, pack, &counters, done] {
      done->set_value(LoadPack(d, pack, counters));
    });
    return got;
  };
  const int packs = static_cast<int>(setup_.packs.size());
  std::future<absl::StatusOr<std::shared_ptr<PackWeights>>> next;
  for (int p = 0; p < packs; ++p) {
    const plan::PackRange range = setup_.packs[p];
    // Not prefetched (a single-buffered plan, or a late pack): now, the
    // previous pack's weights freed.
    if (!next.valid()) next = post(p);
    absl::StatusOr<std::shared_ptr<PackWeights>> loaded = next.get();
    if (!loaded.ok()) return loaded.status();
    std::shared_ptr<PackWeights> w = *std::move(loaded);
    if (p + 1 < packs && p + 1 < static_cast<int>(setup_.prefetch.size()) &&
        setup_.prefetch[p + 1]) {
      next = post(p + 1);
    }
    for (size_t m = 0; m < mine.size(); ++m) {
      const plan::Microbatch& mb = mine[m];
      const std::string activity = absl::StrCat("evaluation of ", Layers(range), ", samples ",
                                                mb.offset, "-", mb.offset + mb.size - 1);
      Values values;  // On the device.
      HARMONY_RETURN_IF_ERROR(Guarded(activity, [&]() -> absl::Status {
        auto scope = dev.Place(activity);
        for (int k = range.begin; k < range.end; ++k) {
          const common::VLayerInfo& v = dec.vlayers()[k];
          std::vector<c10::IValue> in;
          for (const common::ValueSource& s : v.inputs) {
            const Ref ref{s.producer, s.index};
            auto it = values.find(ref);
            if (it == values.end()) {
              auto held = on_host[m].find(ref);
              if (held == on_host[m].end()) {
                return absl::InternalError(absl::StrCat(
                    activity, ": no ", s.producer < 0 ? "argument " : "output ", s.index,
                    s.producer < 0 ? " of forward" : absl::StrCat(" of vLayer ", s.producer),
                    " for vLayer ", k));
              }
              const double start = link_->Now();
              it = values.emplace(ref, dev.ToDevice(held->second, activity)).first;
              const uint64_t bytes = BytesOf(held->second);
              link_->Cross(LinkDirection::kToDevice, bytes, start);
              (s.producer < 0 ? counters.data_in : counters.activations_in) += bytes;
            }
            in.push_back(it->second);
          }
          common::Autocast autocast(setup_.bf16, dev.type());
          absl::StatusOr<std::vector<c10::IValue>> outs = [&] {
            if (!v.uses_rng) return dec.Run(k, w->params[k - range.begin],
                                            w->buffers[k - range.begin], in);
            const uint64_t seed = DropoutSeed(setup_.seed, -1 - index, mb.offset, k);
            if (!v.global_rng && dev.type() == c10::DeviceType::CPU) {
              common::DropoutGeneratorScope own(seed);
              return dec.Run(k, w->params[k - range.begin], w->buffers[k - range.begin], in);
            }
            std::lock_guard<std::mutex> lock(*rng_mu_);
            at::Generator gen = dev.generator();
            {
              std::lock_guard<std::mutex> g(gen.mutex());
              gen.set_current_seed(seed);
            }
            return dec.Run(k, w->params[k - range.begin], w->buffers[k - range.begin], in);
          }();
          if (!outs.ok()) return outs.status();
          for (size_t i = 0; i < outs->size(); ++i) {
            values[{k, static_cast<int>(i)}] = (*outs)[i];
          }
          // Nothing keeps a value past its last reader.
          for (auto it = values.begin(); it != values.end();) {
            auto last = last_reader_.find(it->first);
            if (last == last_reader_.end() || last->second <= k) {
              on_host[m].erase(it->first);
              it = values.erase(it);
            } else {
              ++it;
            }
          }
        }
        return absl::OkStatus();
      }));
      HARMONY_RETURN_IF_ERROR(dev.Sync());
      if (range.end == n) {
        // The loss, as training computes it.
        HARMONY_RETURN_IF_ERROR(Guarded(activity, [&]() -> absl::Status {
          auto scope = dev.Place(activity);
          auto out = values.find({n - 1, 0});
          if (out == values.end() || !out->second.isTensor()) {
            return absl::InvalidArgumentError(absl::StrCat(
                activity, ": forward returned no tensor to take the loss of"));
          }
          std::vector<at::Tensor> targets;
          if (!takes_targets) {
            for (const at::Tensor& t : batch.targets) {
              at::Tensor rows = t.narrow(0, mb.offset, mb.size);
              targets.push_back(dev.ToDevice(rows, activity).toTensor());
              counters.data_in += rows.nbytes();
            }
          }
          std::optional<common::Autocast> autocast(std::in_place, setup_.bf16, dev.type());
          HARMONY_ASSIGN_OR_RETURN(
              at::Tensor loss, common::LossFromOutput(out->second.toTensor(), targets,
                                                      takes_targets, setup_.loss_kind));
          at::Tensor scaled = loss * (static_cast<double>(mb.size) / setup_.minibatch);
          autocast.reset();
          losses[mb.index] = scaled.item<double>();
          return absl::OkStatus();
        }));
        continue;
      }
      // What later packs read waits on the host.
      const double start = link_->Now();
      uint64_t bytes = 0;
      HARMONY_RETURN_IF_ERROR(CallTorch(activity, [&] {
        auto host = PlaceOnHost();
        for (auto& [ref, value] : values) {
          if (ref.first < range.begin) continue;  // Came from the host.
          on_host[m][ref] = ToHost(value);
          bytes += BytesOf(value);
        }
      }, absl::StatusCode::kInternal));
      link_->Cross(LinkDirection::kToHost, bytes, start);
      counters.activations_out += bytes;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalMetrics> Evaluator::Run(MinibatchLoader& data, int64_t minibatches,
                                           const World& world,
                                           const std::function<bool()>& cancelled) {
  const auto start = std::chrono::steady_clock::now();
  EvalMetrics out;
  Counters counters;
  for (Device* d : devices_) d->ResetPeak();
  const bool pinned = devices_[0]->wants_pinned_host();
  double sum = 0;
  for (int64_t b = 0; b < minibatches; ++b) {
    if (cancelled && cancelled()) return absl::CancelledError("cancelled");
    HARMONY_ASSIGN_OR_RETURN(
        Minibatch batch, data.Take(b, setup_.minibatch, world.rank, world.size, false, 0, pinned));
    const int count = static_cast<int>(
        plan::SplitMicrobatches(0, setup_.minibatch, setup_.microbatch).size());
    std::vector<double> losses(count, 0);
    std::vector<absl::Status> status(devices_.size());
    std::vector<std::thread> threads;
    for (size_t d = 0; d < devices_.size(); ++d) {
      threads.emplace_back([&, d] {
        try {
          status[d] = RunDevice(static_cast<int>(d), b, batch, data.takes_targets(), losses,
                                counters);
        } catch (const std::exception& e) {
          status[d] = absl::InternalError(absl::StrCat("evaluation on ", devices_[d]->name(),
                                                       ": ", e.what()));
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (Device* d : devices_) d->weights().Drain();
    for (const absl::Status& s : status) HARMONY_RETURN_IF_ERROR(s);
    // In microbatch order, as a training iteration sums its losses.
    double total = 0;
    for (double l : losses) total += l;
    sum += total;
    out.samples += setup_.minibatch;
  }
  out.minibatches = minibatches;
  out.loss = minibatches > 0 ? sum / static_cast<double>(minibatches) : 0;
  if (world.distributed()) {
    at::Tensor t = at::tensor({out.loss}, at::TensorOptions().dtype(at::kDouble));
    HARMONY_RETURN_IF_ERROR(world.all_reduce_sum(t));
    out.loss = t.item<double>() / world.size;
  }
  out.weights_in = counters.weights_in;
  out.data_in = counters.data_in;
  out.activations_in = counters.activations_in;
  out.activations_out = counters.activations_out;
  for (Device* d : devices_) out.device_peak_bytes.push_back(d->peak());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace harmony::executor
