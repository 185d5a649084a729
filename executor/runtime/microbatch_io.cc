// A microbatch's inputs and outputs: Runtime::Impl's copies over the host
// link on the device's copy streams, and hand-overs to the same or another
// device (runtime_impl.h).

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/runtime_impl.h"

namespace harmony::executor {
namespace {

using common::CallTorch;

uint64_t BytesOf(const c10::IValue& v) {
  return v.isTensor() ? static_cast<uint64_t>(v.toTensor().nbytes()) : 0;
}

// A value kept on the device for a later task, holding no more than its
// own bytes: a view into a larger tensor (a slice, a gradient of a chunk)
// would keep all of that storage alive until the receiver runs, where the
// plan counts the view's bytes.
c10::IValue OwnStorage(const c10::IValue& v) {
  if (!v.isTensor()) return v;
  const at::Tensor& t = v.toTensor();
  if (!t.defined() || t.storage().nbytes() <= t.nbytes()) return v;
  return t.clone(at::MemoryFormat::Contiguous);
}

}  // namespace

Runtime::Impl::HostInputsResult Runtime::Impl::CopyInputsIn(const Task& t, int d, const plan::Microbatch& mb) {
  HostInputs in;
  auto scope = devices[d]->Place(absl::StrCat("inputs of task ", t.id, ", microbatch ", mb.index));
  const double start = Now();
  uint64_t data_bytes = 0, target_bytes = 0;
  HARMONY_ASSIGN_OR_RETURN(const std::vector<Ref>* data_refs, routes.DataOf(t));
  for (const Ref& r : *data_refs) {
    if (r.second < 0 || r.second >= static_cast<int>(batch.arguments.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", t.id, " reads forward's argument ", r.second, "; the data has ",
          batch.arguments.size(), " input(s)"));
    }
  }
  HARMONY_RETURN_IF_ERROR(CallTorch(absl::StrCat("task ", t.id, " data"), [&] {
    for (const Ref& r : *data_refs) {
      at::Tensor host_rows = batch.arguments[r.second].narrow(0, mb.offset, mb.size);
      in.data[r] = devices[d]->ToDevice(host_rows, "data");
      data_bytes += host_rows.nbytes();
    }
    if (t.fused_loss && !takes_targets()) {
      for (size_t i = 0; i < batch.targets.size(); ++i) {
        at::Tensor rows = batch.targets[i].narrow(0, mb.offset, mb.size);
        in.data[{-2, static_cast<int>(i)}] = devices[d]->ToDevice(rows, "targets");
        target_bytes += rows.nbytes();
      }
    }
  }, absl::StatusCode::kInternal));
  Link(0, data_bytes + target_bytes, start);
  counters.data_in += data_bytes;
  counters.targets_in += target_bytes;
  if (data_bytes + target_bytes > 0) {
    Trace(d, kSwapIn, absl::StrCat("data in task ", t.id, " #", mb.index), start);
  }
  for (const Transfer& x : t.transfers) {
    if (x.microbatch != mb.index || x.kind != TransferKind::kKeptIn) continue;
    HARMONY_ASSIGN_OR_RETURN(in.kept, RestoreKept(t, d, x, mb));
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
    (x.kind == TransferKind::kStashIn ? counters.stash_in : counters.activations_in) += bytes;
    Trace(d, kSwapIn, absl::StrCat(x.kind == TransferKind::kStashIn ? "stash in " : "activations in ",
                                   t.id, " #", mb.index),
          copy_start);
    in.by_transfer[i] = std::move(got);
  }
  return in;
}

std::future<Runtime::Impl::HostInputsResult> Runtime::Impl::PostInputs(const Task& t, int d, const plan::Microbatch& mb) {
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

absl::Status Runtime::Impl::ReceiveInputs(const Task& t, int d, const plan::Microbatch& mb,
                           std::future<HostInputsResult>& host,
                           std::map<Ref, c10::IValue>& values,
                           std::vector<std::map<Ref, c10::IValue>>* gradients,
                           std::shared_ptr<KeptMicrobatch>* kept) {
  const double start = Now();
  HARMONY_ASSIGN_OR_RETURN(HostInputs in, host.get());
  if (kept != nullptr) *kept = std::move(in.kept);
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
  IterationCounters::AddSeconds(counters.wait_ns, Now() - start);
  return absl::OkStatus();
}

Runtime::Impl::PendingSends::PendingSends(Impl& impl, const Task& t)
    : impl_(impl),
      bound_(static_cast<size_t>(std::max(0, impl.graph.config.host_outputs_pending))),
      left_(bound_ > 0 ? t.microbatches.size() : 0) {}

absl::Status Runtime::Impl::PendingSends::Before(size_t m) {
  if (bound_ == 0 || m < bound_ || !left_[m - bound_].valid()) return absl::OkStatus();
  const double start = impl_.Now();
  left_[m - bound_].wait();
  IterationCounters::AddSeconds(impl_.counters.wait_ns, impl_.Now() - start);
  return impl_.completion.error();
}

absl::Status Runtime::Impl::SendOutputs(const Task& t, int d, const plan::Microbatch& mb,
                         const std::map<Ref, c10::IValue>& values, std::future<void>* left) {
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
    HARMONY_ASSIGN_OR_RETURN(const std::vector<Ref>* route, routes.Of(t, x));
    const std::vector<Ref>& refs = *route;
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
        if (x.channel == Channel::kPeer) {
          piece.values[r] = devices[to.device]->ToDevice(
              it->second, absl::StrCat("receiving from task ", t.id));
        } else {
          piece.values[r] = OwnStorage(it->second);
        }
      }
    }, absl::StatusCode::kInternal));
    if (x.channel == Channel::kHost) {
      host_sends.push_back({to.id, x.kind, std::move(piece)});
      continue;
    }
    if (x.channel == Channel::kPeer) {
      counters.peer += bytes;
      Trace(d, kPeer, absl::StrCat("to device ", to.device, " #", mb.index), start);
    }
    Post(to.id, t.id, x.kind, std::move(piece));
  }
  std::shared_ptr<std::promise<void>> done;
  if (left != nullptr) {
    done = std::make_shared<std::promise<void>>();
    *left = done->get_future();
    if (host_sends.empty()) done->set_value();
  }
  if (host_sends.empty()) return absl::OkStatus();
  devices[d]->copy_out().Post([this, d, from = t.id, index = mb.index,
                             sends = std::move(host_sends), done]() mutable {
    // Ready however this ends (a failed copy fails the iteration).
    struct Signal {
      std::promise<void>* p;
      ~Signal() {
        if (p != nullptr) p->set_value();
      }
    } signal{done.get()};
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
      (s.kind == TransferKind::kStashOut ? counters.stash_out : counters.activations_out) += bytes;
      Trace(d, kSwapOut, absl::StrCat(s.kind == TransferKind::kStashOut ? "stash out "
                                                                        : "activations out ",
                                      from, " #", index),
            start);
      Post(s.to, from, s.kind, std::move(s.piece));
    }
  });
  return absl::OkStatus();
}

}  // namespace harmony::executor
