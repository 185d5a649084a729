#include "executor/runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decomposer.h"
#include "common/files.h"
#include "common/intra_op_threads.h"
#include "common/loss.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "common/units.h"
#include "executor/runtime/device.h"
#include "executor/runtime/host_link.h"
#include "executor/runtime/host_store.h"
#include "executor/runtime/mailbox.h"
#include "executor/runtime/trace.h"
#include "planner/plan/plan_builder.h"

namespace harmony::executor {
namespace {

using common::CallTorch;
using planner::Channel;
using planner::PackRange;
using planner::Task;
using planner::TaskGraph;
using planner::TaskKind;
using planner::Transfer;
using planner::TransferKind;

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t BytesOf(const c10::IValue& v) {
  return v.isTensor() ? static_cast<uint64_t>(v.toTensor().nbytes()) : 0;
}

uint64_t Mix(uint64_t x) {  // SplitMix64's finaliser.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}


// MemAvailable from /proc/meminfo, in bytes; 0 when unknown.
uint64_t AvailableHostMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// A pack's weights on a device.
struct DeviceWeights {
  PackRange range;
  std::vector<std::vector<at::Tensor>> params, buffers;  // Per vLayer of range.
};
using WeightsResult = absl::StatusOr<std::shared_ptr<DeviceWeights>>;

}  // namespace

struct Runtime::Impl {
  RuntimeOptions options;
  int threads_per_device = 1;  // Intra-op threads of each device's compute thread.
  proto::Plan plan;
  TaskGraph graph;
  torch::jit::Module model;
  std::unique_ptr<common::Decomposition> dec;
  // Every parameter and buffer name -> the name vLayers use (tied weights).
  std::map<std::string, std::string> aliases;
  common::LossKind loss_kind = common::LossKind::kAuto;
  bool takes_targets = false;
  std::unique_ptr<HostStore> host;
  std::vector<std::unique_ptr<Device>> devices;
  // Tensors each out transfer carries, by (task, receiving task, kind), and
  // forward's arguments each task reads; fixed at Create.
  std::map<std::tuple<int, int, int>, std::vector<Ref>> routes;
  std::map<int, std::vector<Ref>> data_routes;
  // Tasks each update waits for.
  std::map<int, std::vector<int>> update_deps;
  // last_reader[k][i]: the last vLayer reading output i of vLayer k.
  std::vector<std::map<int, int>> last_reader;
  // batched[k][i]: output i of vLayer k has the microbatch as dimension 0.
  std::vector<std::vector<bool>> batched;
  common::TrainingData data;
  std::vector<int64_t> order;  // Sample order of the current epoch.
  int64_t iteration = 0;
  int minibatch = 0;

  std::unique_ptr<HostLink> link;  // Emulated or not: the clock.
  std::unique_ptr<TraceRecorder> tracer;

  std::mutex rng_mu;  // The global CPU generator, for vLayers with dropout.

  // --- Per iteration.
  std::mutex mu;
  std::condition_variable cv;
  absl::Status error;
  std::vector<bool> done;
  Mailbox mail{[this](const Ref& r, const c10::IValue& v, int size) {
    return IsBatched(r, v, size);
  }};
  // vDP: gradients of (task) published for the reduction.
  std::map<int, std::vector<std::vector<at::Tensor>>> reduce_slots;
  std::set<int> reduced;  // Tasks whose published gradients were summed.
  std::map<int, double> losses;  // By first sample.
  // The minibatch: forward's arguments (the inputs, plus the targets when
  // forward takes them) and the targets.
  std::vector<at::Tensor> batch_inputs, batch_targets;
  std::atomic<uint64_t> counts[10];
  std::atomic<int64_t> compute_ns{0}, wait_ns{0}, optimizer_ns{0};

  enum Count {
    kWeightsIn, kGradientsOut, kActivationsIn, kActivationsOut, kStashOut, kStashIn,
    kPeerBytes, kDataIn, kTargetsIn, kNumCounts
  };

  double Now() const { return link->Now(); }

  void Trace(int device, TraceStream stream, std::string name, double start) {
    if (tracer->on()) tracer->Add(device, stream, std::move(name), start, Now());
  }

  // Holds the caller until `bytes` have crossed the (emulated) host link
  // to the devices (0) or to the host (1), counting from `since`.
  void Link(int direction, uint64_t bytes, double since) {
    link->Cross(direction == 0 ? LinkDirection::kToDevice : LinkDirection::kToHost, bytes, since);
  }

  void Fail(const absl::Status& s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (error.ok()) error = s;
      cv.notify_all();
    }
    mail.Stop();
  }

  // --- Plan facts.

  const common::VLayerInfo& Info(int k) const { return dec->vlayers()[k]; }

  // Tensors produced in `producer` (or forward's arguments when
  // producer.begin is -1) and read by vLayers in `consumer`.
  std::vector<Ref> RefsBetween(PackRange producer, PackRange consumer) const {
    std::set<Ref> refs;
    for (int k = consumer.begin; k < consumer.end; ++k) {
      for (const common::ValueSource& s : Info(k).inputs) {
        const bool inside = producer.begin < 0
                                ? s.producer < 0
                                : s.producer >= producer.begin && s.producer < producer.end;
        if (inside && !(s.producer >= consumer.begin && s.producer < consumer.end)) {
          refs.insert({s.producer, s.index});
        }
      }
    }
    return {refs.begin(), refs.end()};
  }

  // What a task's ACTIVATIONS_OUT or STASH_OUT transfer to `to` carries: a
  // stash, everything `to` reads from before it; a forward, what it makes
  // and `to` reads; a backward, the gradients of its inputs made by `to`.
  std::vector<Ref> Route(const Task& t, const Task& to, TransferKind kind) const {
    if (kind == TransferKind::kStashOut) return RefsBetween({0, to.vlayers.begin}, to.vlayers);
    if (t.kind == TaskKind::kBackward) return RefsBetween(to.vlayers, t.vlayers);
    return RefsBetween(t.vlayers, to.vlayers);
  }

  bool IsBatched(const Ref& r, const c10::IValue& v, int size) const {
    if (!v.isTensor()) return false;
    const at::Tensor& t = v.toTensor();
    if (r.first < 0) return true;  // The data.
    if (r.first < static_cast<int>(batched.size()) &&
        r.second < static_cast<int>(batched[r.first].size())) {
      return batched[r.first][r.second];
    }
    return t.dim() > 0 && t.size(0) == size;
  }

  void Post(int to, int from, TransferKind kind, Piece piece) {
    mail.Post(to, from, static_cast<int>(kind), std::move(piece));
  }

  absl::StatusOr<std::map<Ref, c10::IValue>> Receive(int to, int from, TransferKind kind,
                                                      int offset, int size) {
    return mail.Receive(to, from, static_cast<int>(kind), offset, size);
  }

  // --- Weights.

  // Copies the host's weights of `range` onto device `d`.
  WeightsResult LoadWeights(int d, PackRange range, const std::string& label) {
    const double start = Now();
    auto w = std::make_shared<DeviceWeights>();
    w->range = range;
    uint64_t bytes = 0;
    auto scope = devices[d]->Place(absl::StrCat("weights in for ", label));
    HARMONY_RETURN_IF_ERROR(CallTorch(label, [&] {
      for (int k = range.begin; k < range.end; ++k) {
        const std::vector<at::Tensor> buffers = host->buffers(k);
        std::vector<at::Tensor> ps, bs;
        // One vLayer at a time on the link, so a microbatch's inputs
        // waiting for it are not held behind a whole pack's weights.
        const double copy_start = Now();
        ps = devices[d]->ToDeviceMany(host->params(k), label);
        bs = devices[d]->ToDeviceMany(buffers, label);
        uint64_t layer_bytes = 0;
        for (at::Tensor& t : ps) {
          t.requires_grad_(true);
          layer_bytes += t.nbytes();
        }
        for (const at::Tensor& b : bs) layer_bytes += b.nbytes();
        bytes += layer_bytes;
        Link(0, layer_bytes, copy_start);
        w->params.push_back(std::move(ps));
        w->buffers.push_back(std::move(bs));
      }
    }, absl::StatusCode::kInternal));
    counts[kWeightsIn] += bytes;
    Trace(d, TraceStream::kWeightsIn, absl::StrCat("weights in ", label), start);
    return w;
  }

  // Buffers of the vLayers in `w` that update them, back to the host.
  uint64_t StoreBuffers(const DeviceWeights& w) {
    auto on_host = PlaceOnHost();
    uint64_t bytes = 0;
    for (int k = w.range.begin; k < w.range.end; ++k) {
      if (!Info(k).updates_buffers) continue;
      std::vector<at::Tensor> copies;
      for (const at::Tensor& b : w.buffers[k - w.range.begin]) {
        copies.push_back(ToHost(b).toTensor());
        bytes += b.nbytes();
      }
      host->SetBuffers(k, std::move(copies));
    }
    return bytes;
  }

  // --- Running vLayers.

  absl::StatusOr<std::vector<c10::IValue>> RunVLayer(int d, int k, const DeviceWeights& w,
                                                     const std::vector<at::Tensor>& buffers,
                                                     const std::vector<c10::IValue>& in,
                                                     int offset) {
    const std::vector<at::Tensor>& params = w.params[k - w.range.begin];
    if (!Info(k).uses_rng) return dec->Run(k, params, buffers, in);
    std::lock_guard<std::mutex> lock(rng_mu);
    at::Generator gen = devices[d]->generator();
    {
      std::lock_guard<std::mutex> g(gen.mutex());
      gen.set_current_seed(DropoutSeed(options.seed, iteration, offset, k));
    }
    return dec->Run(k, params, buffers, in);
  }

  // The inputs of vLayer k from `values` (and the microbatch's data).
  std::vector<c10::IValue> InputsOf(int k, const std::map<Ref, c10::IValue>& values) const {
    std::vector<c10::IValue> in;
    for (const common::ValueSource& s : Info(k).inputs) in.push_back(values.at({s.producer, s.index}));
    return in;
  }

  // --- Inputs and outputs of a microbatch.
  //
  // What crosses the host link runs on the device's copy streams, beside
  // its compute (DESIGN.md §6): a task's inputs from the host (data,
  // targets, activations and stashes sent through the host) are copied in
  // on the copy-in stream, all of the task's microbatches in order, from
  // when the device starts the task; what it sends through the host, and
  // its gradients, are copied out on the copy-out stream, the device
  // tensors counting against the device until their copy has finished.
  // Values that stay on the device (LOCAL) or go to another device (PEER)
  // are handed over by the compute thread itself.

  // One microbatch's inputs from the host, on the device: by the index of
  // their transfer in the task, and the data (forward's arguments and the
  // loss's targets).
  struct HostInputs {
    std::map<size_t, std::map<Ref, c10::IValue>> by_transfer;
    std::map<Ref, c10::IValue> data;
  };
  using HostInputsResult = absl::StatusOr<HostInputs>;

  static bool IsInput(const Transfer& x) {
    return x.kind == TransferKind::kActivationsIn || x.kind == TransferKind::kStashIn;
  }
  static bool IsOutput(const Transfer& x) {
    return x.kind == TransferKind::kActivationsOut || x.kind == TransferKind::kStashOut;
  }

  // Runs on the copy-in stream of device `d`.
  HostInputsResult CopyInputsIn(const Task& t, int d, const planner::Microbatch& mb) {
    HostInputs in;
    auto scope = devices[d]->Place(absl::StrCat("inputs of task ", t.id, ", microbatch ", mb.index));
    const double start = Now();
    uint64_t data_bytes = 0, target_bytes = 0;
    HARMONY_RETURN_IF_ERROR(CallTorch(absl::StrCat("task ", t.id, " data"), [&] {
      for (const Ref& r : data_routes.at(t.id)) {
        at::Tensor host_rows = batch_inputs.at(r.second).narrow(0, mb.offset, mb.size);
        in.data[r] = devices[d]->ToDevice(host_rows, "data");
        data_bytes += host_rows.nbytes();
      }
      if (t.fused_loss && !takes_targets) {
        for (size_t i = 0; i < batch_targets.size(); ++i) {
          at::Tensor rows = batch_targets[i].narrow(0, mb.offset, mb.size);
          in.data[{-2, static_cast<int>(i)}] = devices[d]->ToDevice(rows, "targets");
          target_bytes += rows.nbytes();
        }
      }
    }, absl::StatusCode::kInternal));
    Link(0, data_bytes + target_bytes, start);
    counts[kDataIn] += data_bytes;
    counts[kTargetsIn] += target_bytes;
    if (data_bytes + target_bytes > 0) {
      Trace(d, kSwapIn, absl::StrCat("data in task ", t.id, " #", mb.index), start);
    }
    for (size_t i = 0; i < t.transfers.size(); ++i) {
      const Transfer& x = t.transfers[i];
      if (x.microbatch != mb.index || !IsInput(x) || x.channel != Channel::kHost) continue;
      const TransferKind sent = x.kind == TransferKind::kStashIn ? TransferKind::kStashOut
                                                                 : TransferKind::kActivationsOut;
      HARMONY_ASSIGN_OR_RETURN(auto got, Receive(t.id, x.peer_task, sent, mb.offset, mb.size));
      const double copy_start = Now();  // The sender's values are on the host now.
      uint64_t bytes = 0;
      HARMONY_RETURN_IF_ERROR(CallTorch(absl::StrCat("task ", t.id, " inputs"), [&] {
        for (auto& [ref, v] : got) {
          bytes += BytesOf(v);
          v = devices[d]->ToDevice(v, absl::StrCat("inputs of task ", t.id));
        }
      }, absl::StatusCode::kInternal));
      Link(0, bytes, copy_start);
      counts[x.kind == TransferKind::kStashIn ? kStashIn : kActivationsIn] += bytes;
      Trace(d, kSwapIn, absl::StrCat(x.kind == TransferKind::kStashIn ? "stash in " : "activations in ",
                                     t.id, " #", mb.index),
            copy_start);
      in.by_transfer[i] = std::move(got);
    }
    return in;
  }

  // Starts copying one microbatch's host inputs in on device `d`'s copy-in
  // stream.
  std::future<HostInputsResult> PostInputs(const Task& t, int d, const planner::Microbatch& mb) {
    auto promise = std::make_shared<std::promise<HostInputsResult>>();
    std::future<HostInputsResult> result = promise->get_future();
    devices[d]->copy_in().Post([this, &t, d, mb, promise] {
      HostInputsResult r = absl::InternalError("copy-in stopped");
      try {
        r = CopyInputsIn(t, d, mb);
      } catch (const std::exception& e) {
        r = absl::InternalError(absl::StrCat("task ", t.id, " inputs: ", e.what()));
      }
      promise->set_value(std::move(r));
    });
    return result;
  }

  // Everything task `t` reads for one microbatch, into `values` (keyed by
  // tensor): the host inputs `host` brings, and what other tasks left on
  // this device or sent from another. Gradients a backward task receives
  // from later backward tasks go to `gradients`, in the order of the task's
  // transfers.
  absl::Status ReceiveInputs(const Task& t, int d, const planner::Microbatch& mb,
                             std::future<HostInputsResult>& host,
                             std::map<Ref, c10::IValue>& values,
                             std::vector<std::map<Ref, c10::IValue>>* gradients) {
    const double start = Now();
    HARMONY_ASSIGN_OR_RETURN(HostInputs in, host.get());
    for (auto& [ref, v] : in.data) values[ref] = std::move(v);
    for (size_t i = 0; i < t.transfers.size(); ++i) {
      const Transfer& x = t.transfers[i];
      if (x.microbatch != mb.index || !IsInput(x)) continue;
      std::map<Ref, c10::IValue> got;
      if (x.channel == Channel::kHost) {
        got = std::move(in.by_transfer[i]);
      } else {
        const TransferKind sent = x.kind == TransferKind::kStashIn
                                      ? TransferKind::kStashOut
                                      : TransferKind::kActivationsOut;
        HARMONY_ASSIGN_OR_RETURN(got, Receive(t.id, x.peer_task, sent, mb.offset, mb.size));
      }
      const bool from_backward = graph.tasks[x.peer_task].kind == TaskKind::kBackward;
      if (t.kind == TaskKind::kBackward && from_backward) {
        gradients->push_back(std::move(got));
      } else {
        for (auto& [ref, v] : got) values[ref] = std::move(v);
      }
    }
    wait_ns += static_cast<int64_t>((Now() - start) * 1e9);
    return absl::OkStatus();
  }

  // Sends the values of one microbatch along the task's ACTIVATIONS_OUT and
  // STASH_OUT transfers. For a backward task, `values` holds the gradients
  // of its inputs. LOCAL and PEER sends are done when this returns; HOST
  // sends are posted on the copy-out stream, which keeps the device tensors
  // until they are on the host and then delivers them.
  absl::Status SendOutputs(const Task& t, int d, const planner::Microbatch& mb,
                           const std::map<Ref, c10::IValue>& values) {
    struct HostSend {
      int to;
      TransferKind kind;
      Piece piece;  // Device tensors until copied.
    };
    std::vector<HostSend> host_sends;
    for (const Transfer& x : t.transfers) {
      if (x.microbatch != mb.index || !IsOutput(x)) continue;
      const Task& to = graph.tasks[x.peer_task];
      const double start = Now();
      const std::vector<Ref>& refs = routes.at({t.id, x.peer_task, static_cast<int>(x.kind)});
      Piece piece;
      piece.offset = mb.offset;
      piece.size = mb.size;
      uint64_t bytes = 0;
      HARMONY_RETURN_IF_ERROR(CallTorch(absl::StrCat("task ", t.id, " sending"), [&] {
        for (const Ref& r : refs) {
          auto it = values.find(r);
          if (it == values.end()) {
            if (t.kind == TaskKind::kBackward) continue;  // Not a float tensor.
            throw std::runtime_error(absl::StrCat(
                "task ", t.id, " holds no value of vLayer ", r.first, " output ", r.second,
                " to send to task ", to.id));
          }
          bytes += BytesOf(it->second);
          piece.values[r] = x.channel == Channel::kPeer
                                ? devices[to.device]->ToDevice(
                                      it->second, absl::StrCat("receiving from task ", t.id))
                                : it->second;
        }
      }, absl::StatusCode::kInternal));
      if (x.channel == Channel::kHost) {
        host_sends.push_back({to.id, x.kind, std::move(piece)});
        continue;
      }
      if (x.channel == Channel::kPeer) {
        counts[kPeerBytes] += bytes;
        Trace(d, kPeer, absl::StrCat("to device ", to.device, " #", mb.index), start);
      }
      Post(to.id, t.id, x.kind, std::move(piece));
    }
    if (host_sends.empty()) return absl::OkStatus();
    devices[d]->copy_out().Post([this, d, from = t.id, index = mb.index,
                               sends = std::move(host_sends)]() mutable {
      for (HostSend& s : sends) {
        const double start = Now();
        uint64_t bytes = 0;
        std::map<Ref, c10::IValue> on_host;
        absl::Status copied = CallTorch(absl::StrCat("task ", from, " sending"), [&] {
          for (const auto& [ref, v] : s.piece.values) {
            bytes += BytesOf(v);
            on_host[ref] = ToHost(v);
          }
        }, absl::StatusCode::kInternal);
        if (!copied.ok()) return Fail(copied);
        Link(1, bytes, start);
        s.piece.values = std::move(on_host);  // The device's copies are released now.
        counts[s.kind == TransferKind::kStashOut ? kStashOut : kActivationsOut] += bytes;
        Trace(d, kSwapOut, absl::StrCat(s.kind == TransferKind::kStashOut ? "stash out "
                                                                          : "activations out ",
                                        from, " #", index),
              start);
        Post(s.to, from, s.kind, std::move(s.piece));
      }
    });
    return absl::OkStatus();
  }

  // --- Tasks.

  absl::Status Forward(const Task& t, int d, DeviceWeights& w,
                       std::vector<std::future<HostInputsResult>>& inputs,
                       const std::function<void()>& first_inputs_in) {
    c10::NoGradGuard no_grad;
    for (size_t m = 0; m < t.microbatches.size(); ++m) {
      const planner::Microbatch& mb = t.microbatches[m];
      std::map<Ref, c10::IValue> values;
      HARMONY_RETURN_IF_ERROR(ReceiveInputs(t, d, mb, inputs[m], values, nullptr));
      if (m == 0) first_inputs_in();
      const double start = Now();
      // What leaves the task; everything else is dropped after its last
      // reader in the pack.
      std::set<Ref> sent;
      for (const Transfer& x : t.transfers) {
        if (x.microbatch != mb.index) continue;
        if (x.kind != TransferKind::kActivationsOut && x.kind != TransferKind::kStashOut) continue;
        for (const Ref& r : routes.at({t.id, x.peer_task, static_cast<int>(x.kind)})) {
          sent.insert(r);
        }
      }
      {
        auto scope = devices[d]->Place(absl::StrCat("task ", t.id, " (forward of vLayers ",
                                             t.vlayers.begin, "-", t.vlayers.end - 1,
                                             "), microbatch ", mb.index));
        for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
          HARMONY_ASSIGN_OR_RETURN(
              std::vector<c10::IValue> outs,
              RunVLayer(d, k, w, w.buffers[k - w.range.begin], InputsOf(k, values), mb.offset));
          for (size_t i = 0; i < outs.size(); ++i) values[{k, static_cast<int>(i)}] = outs[i];
          for (auto it = values.begin(); it != values.end();) {
            const bool later = it->first.first >= 0 && last_reader[it->first.first].count(it->first.second) &&
                               last_reader[it->first.first].at(it->first.second) > k;
            if (!later && !sent.count(it->first) && it->first.first >= 0) {
              it = values.erase(it);
            } else {
              ++it;
            }
          }
        }
      }
      // What it made leaves this thread.
      HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
      compute_ns += static_cast<int64_t>((Now() - start) * 1e9);
      Trace(d, kCompute, absl::StrCat("forward ", t.vlayers.begin, "-", t.vlayers.end - 1,
                                      " #", mb.index),
            start);
      HARMONY_RETURN_IF_ERROR(SendOutputs(t, d, mb, values));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const Task& t, int d, DeviceWeights& w,
                        std::vector<std::future<HostInputsResult>>& inputs,
                        const std::function<void()>& first_inputs_in) {
    // Gradients accumulate over the task's microbatches from zero.
    for (auto& ps : w.params) {
      for (at::Tensor& p : ps) p.mutable_grad() = at::Tensor();
    }
    for (size_t m = 0; m < t.microbatches.size(); ++m) {
      const planner::Microbatch& mb = t.microbatches[m];
      std::map<Ref, c10::IValue> values;
      std::vector<std::map<Ref, c10::IValue>> incoming;
      HARMONY_RETURN_IF_ERROR(ReceiveInputs(t, d, mb, inputs[m], values, &incoming));
      if (m == 0) first_inputs_in();
      const double start = Now();
      std::map<Ref, c10::IValue> input_grads;
      {
        auto scope = devices[d]->Place(absl::StrCat("task ", t.id, " (backward of vLayers ",
                                             t.vlayers.begin, "-", t.vlayers.end - 1,
                                             "), microbatch ", mb.index));
        // Live-ins from earlier vLayers become leaves.
        std::map<Ref, at::Tensor> leaves;
        HARMONY_RETURN_IF_ERROR(CallTorch("leaves", [&] {
          for (auto& [ref, v] : values) {
            if (ref.first < 0 || !v.isTensor()) continue;
            at::Tensor leaf = v.toTensor().detach();
            if (at::isFloatingType(leaf.scalar_type())) leaf.requires_grad_(true);
            leaves[ref] = leaf;
            v = leaf;
          }
        }));
        c10::AutoGradMode grad_mode(true);
        for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
          // The fused forward updates the real buffers; a recompute, copies.
          std::vector<at::Tensor> buffers = w.buffers[k - w.range.begin];
          if (!t.fused_loss) {
            for (at::Tensor& b : buffers) b = b.clone();
          }
          HARMONY_ASSIGN_OR_RETURN(std::vector<c10::IValue> outs,
                                   RunVLayer(d, k, w, buffers, InputsOf(k, values), mb.offset));
          for (size_t i = 0; i < outs.size(); ++i) values[{k, static_cast<int>(i)}] = outs[i];
        }
        std::vector<at::Tensor> roots, root_grads;
        if (t.fused_loss) {
          const c10::IValue& out = values.at({dec->num_vlayers() - 1, 0});
          if (!out.isTensor()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "forward returned ", out.type()->str(), ", expected a tensor"));
          }
          std::vector<at::Tensor> targets;
          if (!takes_targets) {
            for (size_t i = 0; i < batch_targets.size(); ++i) {
              targets.push_back(values.at({-2, static_cast<int>(i)}).toTensor());
            }
          }
          HARMONY_ASSIGN_OR_RETURN(
              at::Tensor loss,
              common::LossFromOutput(out.toTensor(), targets, takes_targets, loss_kind));
          HARMONY_ASSIGN_OR_RETURN(at::Tensor scaled, CallTorch("loss", [&] {
            return loss * (static_cast<double>(mb.size) / minibatch);
          }));
          const double value = scaled.item<double>();
          if (!std::isfinite(value)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "the loss is ", value, " at iteration ", iteration, ", samples ", mb.offset,
                "-", mb.offset + mb.size - 1));
          }
          {
            std::lock_guard<std::mutex> lock(mu);
            losses[mb.offset] = value;
          }
          roots.push_back(scaled);
          root_grads.push_back(at::ones_like(scaled));
        } else {
          // Gradients of the outputs, summed over the later packs that read
          // them (the latest first, as autograd would).
          std::map<Ref, at::Tensor> grads;
          for (auto it = incoming.rbegin(); it != incoming.rend(); ++it) {
            for (auto& [ref, g] : *it) {
              if (!g.isTensor()) continue;
              at::Tensor& acc = grads[ref];
              acc = acc.defined() ? acc + g.toTensor() : g.toTensor();
            }
          }
          for (auto& [ref, g] : grads) {
            const c10::IValue& out = values.at(ref);
            if (!out.isTensor() || !out.toTensor().requires_grad()) continue;
            roots.push_back(out.toTensor());
            root_grads.push_back(g);
          }
        }
        if (!roots.empty()) {
          HARMONY_RETURN_IF_ERROR(CallTorch(
              absl::StrCat("backward of vLayers ", t.vlayers.begin, "-", t.vlayers.end - 1),
              [&] { torch::autograd::backward(roots, root_grads); }));
        }
        for (auto& [ref, leaf] : leaves) {
          if (!at::isFloatingType(leaf.scalar_type())) continue;
          input_grads[ref] = leaf.grad().defined() ? leaf.grad() : at::zeros_like(leaf);
        }
        values.clear();
      }
      HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
      compute_ns += static_cast<int64_t>((Now() - start) * 1e9);
      Trace(d, kCompute, absl::StrCat(t.fused_loss ? "forward+loss+backward " : "backward ",
                                      t.vlayers.begin, "-", t.vlayers.end - 1, " #",
                                      mb.index),
            start);
      HARMONY_RETURN_IF_ERROR(SendOutputs(t, d, mb, input_grads));
    }
    return absl::OkStatus();
  }

  // The task's gradients, as a list per vLayer (zeros where a parameter got
  // none).
  std::vector<std::vector<at::Tensor>> GradientsOf(const DeviceWeights& w) {
    std::vector<std::vector<at::Tensor>> out;
    for (const auto& ps : w.params) {
      std::vector<at::Tensor> gs;
      for (const at::Tensor& p : ps) {
        gs.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
      }
      out.push_back(std::move(gs));
    }
    return out;
  }

  // After a backward task: the vDP reduction and the gradients to the host.
  absl::Status FinishBackward(const Task& t, int d, DeviceWeights& w) {
    bool reduce = false, out = false;
    for (const Transfer& x : t.transfers) {
      reduce = reduce || x.kind == TransferKind::kGradientReduce;
      out = out || x.kind == TransferKind::kGradientsOut;
    }
    std::vector<std::vector<at::Tensor>> grads;
    HARMONY_RETURN_IF_ERROR(CallTorch("gradients", [&] {
      auto scope = devices[d]->Place(absl::StrCat("gradients of task ", t.id));
      grads = GradientsOf(w);
    }, absl::StatusCode::kInternal));
    // They leave this thread: to the device that sums, or the copy-out.
    HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
    if (reduce && !out) {
      // Hand them to the device that sums, and wait until it has (a
      // collective, as the plan has it): the gradients live on this device
      // until then, so its next task must not start beside them.
      const double start = Now();
      std::unique_lock<std::mutex> lock(mu);
      reduce_slots[t.id] = std::move(grads);
      cv.notify_all();
      cv.wait(lock, [&] { return !error.ok() || reduced.count(t.id) > 0; });
      wait_ns += static_cast<int64_t>((Now() - start) * 1e9);
      if (!error.ok()) return absl::CancelledError("stopped: another task failed");
      return absl::OkStatus();
    }
    if (reduce) {
      // Sum the other devices' gradients of this pack, in device order.
      for (const Task& other : graph.tasks) {
        if (other.kind != TaskKind::kBackward || other.pack != t.pack || other.id == t.id) continue;
        const double start = Now();
        std::vector<std::vector<at::Tensor>> theirs;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return !error.ok() || reduce_slots.count(other.id) > 0; });
          if (!error.ok()) return absl::CancelledError("stopped: another task failed");
          theirs = std::move(reduce_slots[other.id]);
          reduce_slots.erase(other.id);
        }
        uint64_t bytes = 0;
        HARMONY_RETURN_IF_ERROR(CallTorch("gradient reduction", [&] {
          auto scope = devices[d]->Place(absl::StrCat("reducing gradients of task ", t.id));
          // One parameter's copy at a time, summed in place: the same
          // sums as out of place, without a second copy of the gradients.
          for (size_t k = 0; k < grads.size(); ++k) {
            for (size_t j = 0; j < grads[k].size(); ++j) {
              const at::Tensor copy =
                  devices[d]->ToDevice(theirs[k][j], "reducing gradients").toTensor();
              bytes += copy.nbytes();
              grads[k][j].add_(copy);
            }
          }
        }, absl::StatusCode::kInternal));
        HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
        theirs.clear();
        {
          std::lock_guard<std::mutex> lock(mu);
          reduced.insert(other.id);
          cv.notify_all();
        }
        counts[kPeerBytes] += bytes;
        wait_ns += static_cast<int64_t>((Now() - start) * 1e9);
        Trace(d, kPeer, absl::StrCat("reduce from task ", other.id), start);
      }
    }
    if (!out) return absl::OkStatus();
    // The plan sends a fused forward's updated buffers with the gradients
    // when this device keeps the statistics (its bytes say so); they are
    // small and copied now.
    uint64_t planned = 0, gradient_bytes = 0;
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kGradientsOut) planned += x.bytes;
    }
    for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
      gradient_bytes += host->owned_gradient_bytes(k);
    }
    const uint64_t buffer_bytes = t.fused_loss && planned > gradient_bytes ? StoreBuffers(w) : 0;
    // The gradients go to the host on the copy-out stream, which holds them
    // on the device until they are there.
    devices[d]->copy_out().Post([this, d, &t, buffer_bytes, grads = std::move(grads)] {
      const double start = Now();
      uint64_t bytes = buffer_bytes;
      absl::Status copied = CallTorch("gradients out", [&] {
        auto on_host = PlaceOnHost();
        for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
          std::vector<at::Tensor> gs = grads[k - t.vlayers.begin];
          for (at::Tensor& g : gs) {
            if (!g.is_cpu()) g = ToHost(g).toTensor();  // A GPU's: to pinned memory first.
          }
          bytes += host->AddGradients(k, gs);
        }
      }, absl::StatusCode::kInternal);
      if (!copied.ok()) return Fail(copied);
      Link(1, bytes, start);
      counts[kGradientsOut] += bytes;
      Trace(d, kSwapOut, absl::StrCat("gradients out ", t.vlayers.begin, "-", t.vlayers.end - 1),
            start);
    });
    return absl::OkStatus();
  }

  // Starts swapping weights in on device `d`'s weights stream.
  std::future<WeightsResult> PostWeights(int d, PackRange range, std::string label) {
    auto promise = std::make_shared<std::promise<WeightsResult>>();
    std::future<WeightsResult> result = promise->get_future();
    devices[d]->weights().Post([this, d, range, label = std::move(label), promise] {
      promise->set_value(LoadWeights(d, range, label));
    });
    return result;
  }

  // Device `d`'s compute thread: its tasks in order. A task starts once the
  // previous one has computed (and, in vDP, reduced); what the previous one
  // copies out may still be on its way.
  absl::Status RunDevice(int d) {
    Device& dev = *devices[d];
    dev.StartCompute();
    common::SetCallingThreadIntraOpThreads(threads_per_device);
    std::vector<int> list = graph.DeviceTasks(d);
    std::shared_ptr<DeviceWeights> kept;  // KEEP_RESIDENT from the previous task.
    std::map<int, std::future<WeightsResult>> prefetched;
    absl::Status status;
    for (int id : list) {
      const Task& t = graph.tasks[id];
      if (options.cancelled && options.cancelled()) {
        status = absl::CancelledError("cancelled");
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!error.ok()) break;
      }
      const std::string label = absl::StrCat("task ", id, " (", planner::TaskKindName(t.kind),
                                             " of vLayers ", t.vlayers.begin, "-",
                                             t.vlayers.end - 1, ")");
      // Inputs from the host: copied in from now on, while the weights come.
      std::vector<std::future<HostInputsResult>> inputs;
      for (const planner::Microbatch& mb : t.microbatches) inputs.push_back(PostInputs(t, d, mb));
      // Weights: kept, prefetched, or swapped in now.
      std::shared_ptr<DeviceWeights> w;
      const double wait_start = Now();
      WeightsResult r = absl::InternalError("no weights");
      if (kept && kept->range == t.vlayers) {
        r = std::move(kept);
      } else if (auto it = prefetched.find(id); it != prefetched.end()) {
        r = it->second.get();
        prefetched.erase(it);
      } else {
        r = PostWeights(d, t.vlayers, label).get();
      }
      kept.reset();
      if (!r.ok()) {
        status = r.status();
        break;
      }
      w = *std::move(r);
      wait_ns += static_cast<int64_t>((Now() - wait_start) * 1e9);
      // Prefetch the next task's weights during this one, once its first
      // microbatch has its inputs (which need the link first).
      auto prefetch = [&] {
        for (const Transfer& x : t.transfers) {
          if (x.kind != TransferKind::kPrefetchWeights) continue;
          const Task& next = graph.tasks[x.peer_task];
          prefetched[next.id] = PostWeights(d, next.vlayers, absl::StrCat("task ", next.id));
        }
      };
      // Exceptions stop here: a plan that does not fit the model (a value
      // a vLayer needs and nobody sent) must not take the process down.
      try {
        status = t.kind == TaskKind::kForward ? Forward(t, d, *w, inputs, prefetch)
                                              : Backward(t, d, *w, inputs, prefetch);
        if (status.ok() && t.kind == TaskKind::kBackward) status = FinishBackward(t, d, *w);
      } catch (const std::exception& e) {
        status = absl::InternalError(absl::StrCat(label, ": ", e.what()));
      }
      if (!status.ok()) break;
      for (const Transfer& x : t.transfers) {
        if (x.kind == TransferKind::kBuffersOut) {
          // Small: copied now; the link time is spent on the copy-out stream.
          const uint64_t bytes = StoreBuffers(*w);
          dev.copy_out().Post([this, d, id, bytes] {
            const double start = Now();
            Link(1, bytes, start);
            counts[kGradientsOut] += bytes;
            Trace(d, kSwapOut, absl::StrCat("buffers out task ", id), start);
          });
        }
        if (x.kind == TransferKind::kKeepResident) kept = w;
      }
      // The task is done when what it copies out has arrived.
      dev.copy_out().Post([this, id] {
        std::lock_guard<std::mutex> lock(mu);
        done[id] = true;
        cv.notify_all();
      });
    }
    // Copies still queued for a failed iteration stop at the error.
    if (!status.ok()) Fail(status);
    dev.copy_in().Drain();
    dev.weights().Drain();
    dev.copy_out().Drain();
    return status;
  }

  absl::Status RunUpdates() {
    for (const Task& t : graph.tasks) {
      if (t.kind != TaskKind::kUpdate) continue;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] {
          if (!error.ok()) return true;
          for (int dep : update_deps.at(t.id)) {
            if (!done[dep]) return false;
          }
          return true;
        });
        if (!error.ok()) return absl::CancelledError("stopped: a task failed");
      }
      const double start = Now();
      for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) host->Update(k);
      optimizer_ns += static_cast<int64_t>((Now() - start) * 1e9);
      Trace(-1, kCompute, absl::StrCat("update ", t.vlayers.begin, "-", t.vlayers.end - 1),
            start);
      std::lock_guard<std::mutex> lock(mu);
      done[t.id] = true;
      cv.notify_all();
    }
    return absl::OkStatus();
  }

  void NextMinibatch() {
    const int64_t n = data.size();
    std::vector<int64_t> rows(minibatch);
    for (int j = 0; j < minibatch; ++j) {
      const int64_t at = iteration * minibatch + j;
      const int64_t epoch_index = at / n;
      if (options.shuffle && (order.empty() || epoch_index != current_epoch)) {
        at::Generator gen = at::detail::createCPUGenerator(
            Mix(options.seed ^ static_cast<uint64_t>(epoch_index + 1)));
        at::Tensor perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
        order.assign(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n);
        current_epoch = epoch_index;
      }
      rows[j] = options.shuffle ? order[at % n] : at % n;
    }
    at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong));
    std::vector<at::Tensor> inputs, targets;
    for (const at::Tensor& t : data.inputs) inputs.push_back(t.index_select(0, index));
    for (const at::Tensor& t : data.targets) targets.push_back(t.index_select(0, index));
    if (devices[0]->wants_pinned_host()) {
      for (at::Tensor& t : inputs) t = t.pin_memory();
      for (at::Tensor& t : targets) t = t.pin_memory();
    }
    batch_inputs = inputs;
    if (takes_targets) batch_inputs.insert(batch_inputs.end(), targets.begin(), targets.end());
    batch_targets = targets;
  }
  int64_t current_epoch = -1;
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

int64_t Runtime::iterations_done() const { return impl_->iteration; }

int Runtime::threads_per_device() const { return impl_->threads_per_device; }

std::vector<uint64_t> Runtime::device_bytes_in_use() const {
  std::vector<uint64_t> used;
  for (const auto& d : impl_->devices) used.push_back(d->used());
  return used;
}

uint64_t Runtime::host_store_bytes() const { return impl_->host->bytes(); }

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const proto::Plan& plan,
                                                         const std::string& model_path,
                                                         const RuntimeOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->plan = plan;
  HARMONY_ASSIGN_OR_RETURN(impl->graph, planner::TaskGraphFromPlan(plan));
  const planner::Config& config = impl->graph.config;
  impl->minibatch = config.minibatch;

  // The devices.
  HARMONY_ASSIGN_OR_RETURN(impl->devices, CreateDevices(options.devices, config.num_devices));
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
  if (host_limit == 0) host_limit = AvailableHostMemory();
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
  impl->aliases = common::TensorAliases(impl->model);
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

  impl->last_reader.resize(impl->dec->num_vlayers());
  for (const common::VLayerInfo& v : impl->dec->vlayers()) {
    for (const common::ValueSource& s : v.inputs) {
      if (s.producer >= 0) impl->last_reader[s.producer][s.index] = v.index;
    }
  }
  // Which outputs are batched, from every profiled size.
  for (const proto::VLayerProfile& v : plan.profile().vlayers()) {
    std::vector<bool> b;
    for (int r = 0; r < v.by_microbatch_size(); ++r) {
      const auto& m = v.by_microbatch(r);
      b.resize(std::max<size_t>(b.size(), m.outputs_size()), true);
      for (int i = 0; i < m.outputs_size(); ++i) {
        const proto::TensorMeta& t = m.outputs(i);
        if (t.shape_size() == 0 || t.shape(0) != static_cast<int64_t>(m.size())) b[i] = false;
      }
    }
    impl->batched.push_back(std::move(b));
  }

  // The host store.
  HARMONY_ASSIGN_OR_RETURN(impl->host,
                           HostStore::Create(impl->model, *impl->dec, options.optimizer,
                                             impl->devices[0]->wants_pinned_host()));
  for (const Task& t : impl->graph.tasks) {
    impl->data_routes[t.id] = impl->RefsBetween({-1, 0}, t.vlayers);
    for (const Transfer& x : t.transfers) {
      if (x.kind != TransferKind::kActivationsOut && x.kind != TransferKind::kStashOut) continue;
      if (x.peer_task < 0 || x.peer_task >= static_cast<int>(impl->graph.tasks.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "malformed plan: task ", t.id, " sends to task ", x.peer_task, ", which does not exist"));
      }
      impl->routes[{t.id, x.peer_task, static_cast<int>(x.kind)}] =
          impl->Route(t, impl->graph.tasks[x.peer_task], x.kind);
    }
  }
  // An update also waits for the backward tasks of its shared parameters'
  // later readers.
  for (const Task& t : impl->graph.tasks) {
    if (t.kind != TaskKind::kUpdate) continue;
    std::vector<int>& deps = impl->update_deps[t.id];
    deps = t.depends_on;
    for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
      for (int b : impl->host->borrowers(k)) {
        for (const Task& other : impl->graph.tasks) {
          if (other.kind == TaskKind::kBackward && other.vlayers.begin <= b &&
              b < other.vlayers.end) {
            deps.push_back(other.id);
          }
        }
      }
    }
  }
  HARMONY_ASSIGN_OR_RETURN(impl->threads_per_device,
                           common::ThreadsPerDevice(options.threads, config.num_devices));
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

absl::Status Runtime::SetData(common::TrainingData data) {
  Impl& m = *impl_;
  HARMONY_RETURN_IF_ERROR(common::ArrangeInputs(m.dec->forward_arguments(), &data));
  const auto& expected = m.plan.model().sample_inputs();
  const auto& expected_targets = m.plan.model().sample_targets();
  auto check = [](const std::vector<at::Tensor>& got,
                  const google::protobuf::RepeatedPtrField<proto::TensorMeta>& want,
                  absl::string_view what) -> absl::Status {
    if (static_cast<int>(got.size()) != want.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the data has ", got.size(), " ", what, " tensor(s), the plan's sample ", want.size(),
          " (data: ", common::DescribeTensors(got), ")"));
    }
    for (size_t i = 0; i < got.size(); ++i) {
      const proto::TensorMeta& w = want[static_cast<int>(i)];
      bool same = got[i].dim() == w.shape_size();
      for (int j = 1; same && j < w.shape_size(); ++j) same = got[i].size(j) == w.shape(j);
      std::vector<std::string> dims = {"N"};
      for (int j = 1; j < w.shape_size(); ++j) dims.push_back(absl::StrCat(w.shape(j)));
      if (!same) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " ", i, " has shape ", common::DescribeTensor(got[i]), ", the plan expects [",
            absl::StrJoin(dims, ", "), "] (N samples)"));
      }
    }
    return absl::OkStatus();
  };
  HARMONY_RETURN_IF_ERROR(check(data.inputs, expected, "input"));
  if (expected_targets.size() > 0 || !data.targets.empty()) {
    HARMONY_RETURN_IF_ERROR(check(data.targets, expected_targets, "target"));
  }
  if (data.size() < 1) return absl::InvalidArgumentError("the data has no samples");
  HARMONY_ASSIGN_OR_RETURN(
      m.takes_targets,
      common::ForwardTakesTargets(m.dec->forward_arguments(), data.inputs, data.targets));
  m.data = std::move(data);
  m.order.clear();
  m.current_epoch = -1;
  return absl::OkStatus();
}

absl::StatusOr<IterationMetrics> Runtime::RunIteration() {
  Impl& m = *impl_;
  if (m.data.inputs.empty()) return absl::FailedPreconditionError("no training data (SetData)");
  const Clock::time_point start = Clock::now();
  HARMONY_RETURN_IF_ERROR(CallTorch("minibatch", [&] { m.NextMinibatch(); }));
  m.error = absl::OkStatus();
  m.done.assign(m.graph.tasks.size(), false);
  m.mail.Reset();
  m.reduce_slots.clear();
  m.reduced.clear();
  m.losses.clear();
  for (auto& c : m.counts) c = 0;
  m.compute_ns = 0;
  m.wait_ns = 0;
  m.optimizer_ns = 0;
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
  absl::Status updates = m.RunUpdates();
  for (std::thread& t : threads) t.join();
  if (!m.error.ok()) {
    absl::Status s = m.error;
    m.mail.Reset();
    m.reduce_slots.clear();
    return s;
  }
  HARMONY_RETURN_IF_ERROR(updates);

  IterationMetrics out;
  out.iteration = m.iteration;
  for (const auto& [offset, loss] : m.losses) out.loss += loss;
  out.seconds = Since(start);
  out.samples_per_s = m.minibatch / out.seconds;
  out.bytes.weights_in = m.counts[Impl::kWeightsIn];
  out.bytes.gradients_out = m.counts[Impl::kGradientsOut];
  out.bytes.activations_in = m.counts[Impl::kActivationsIn];
  out.bytes.activations_out = m.counts[Impl::kActivationsOut];
  out.bytes.stash_out = m.counts[Impl::kStashOut];
  out.bytes.stash_in = m.counts[Impl::kStashIn];
  out.bytes.peer = m.counts[Impl::kPeerBytes];
  out.bytes.data_in = m.counts[Impl::kDataIn];
  out.bytes.targets_in = m.counts[Impl::kTargetsIn];
  for (size_t d = 0; d < m.devices.size(); ++d) {
    out.device_peak_bytes.push_back(m.devices[d]->peak());
    out.device_allocations.push_back(m.devices[d]->allocations() -
                                     allocations_before[d]);
    out.device_reused.push_back(m.devices[d]->reused() - reused_before[d]);
  }
  out.compute_s = m.compute_ns * 1e-9;
  out.swap_wait_s = m.wait_ns * 1e-9;
  out.optimizer_s = m.optimizer_ns * 1e-9;
  out.emulated_link = m.options.emulate_host_link > 0;
  ++m.iteration;
  return out;
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
  std::string bytes;
  HARMONY_RETURN_IF_ERROR(CallTorch(absl::StrCat("saving ", path), [&] {
    std::ostringstream out;
    m.model.save(out);
    bytes = out.str();
  }, absl::StatusCode::kInternal));
  return common::WriteFileAtomically(path, bytes);
}

std::string Runtime::ChromeTrace() const {
  const Impl& m = *impl_;
  return m.tracer->ChromeJson(static_cast<int>(m.devices.size()), m.options.emulate_host_link);
}

uint64_t DropoutSeed(uint64_t seed, int64_t iteration, int microbatch_offset, int vlayer) {
  return Mix(Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(iteration)) ^
                 static_cast<uint64_t>(microbatch_offset)) ^
             static_cast<uint64_t>(vlayer));
}

}  // namespace harmony::executor
