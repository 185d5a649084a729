// Runtime::Impl's weights in and gradients out (runtime_impl.h): a task's
// weights loaded onto its device (from the host store, or copied from a
// peer device's), its updated buffers stored, and its gradients copied to
// the host store after its microbatches (or after each one, summed on the
// host).

#include <algorithm>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/precision.h"
#include "absl/strings/str_join.h"
#include "common/denormals.h"
#include "common/intra_op_threads.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/peer_weights.h"
#include "executor/runtime/runtime_impl.h"

namespace harmony::executor {

using common::CallTorch;

Runtime::Impl::WeightsResult Runtime::Impl::LoadWeights(int d, int id, int room_of,
                                                        int after_copies_of,
                                                        const std::string& label) {
  const PackRange range = graph.tasks[id].vlayers;
  if (after_copies_of >= 0) {
    const double wait_start = Now();
    HARMONY_RETURN_IF_ERROR(completion.WaitDone({after_copies_of}));
    if (Now() - wait_start > 1e-4) {
      Trace(d, TraceStream::kWeightsIn,
            absl::StrCat("room for ", label, ": copies out of task ", after_copies_of),
            wait_start);
    }
  }
  {
    // Weights other devices still copy from stay until they have.
    const double wait_start = Now();
    HARMONY_ASSIGN_OR_RETURN(const int waited_for, peer_weights->WaitForRoom(d, room_of));
    if (waited_for >= 0) {
      Trace(d, TraceStream::kWeightsIn,
            absl::StrCat("room for ", label, ": copies of task ", waited_for), wait_start);
    }
  }
  const std::optional<int> source = peer_weights->SourceOf(id);
  const bool from_peer = source.has_value();
  std::vector<std::vector<at::Tensor>> peer_params;
  int peer_device = -1;
  if (from_peer) {
    HARMONY_ASSIGN_OR_RETURN(PeerWeights::Published published, peer_weights->Take(*source));
    peer_params = std::move(published.params);
    peer_device = published.device;
  }
  const double start = Now();
  auto w = std::make_shared<DeviceWeights>();
  w->range = range;
  uint64_t host_bytes = 0, peer_bytes = 0;
  auto scope = devices[d]->Place(absl::StrCat("weights in for ", label));
  HARMONY_RETURN_IF_ERROR(CallTorch(label, [&] {
    for (int k = range.begin; k < range.end; ++k) {
      const std::vector<at::Tensor> buffers = host->buffers(k);
      std::vector<at::Tensor> ps, bs;
      // One vLayer at a time on the link, so a microbatch's inputs
      // waiting for it are not held behind a whole pack's weights.
      const double copy_start = Now();
      std::vector<at::Tensor> source = from_peer ? peer_params[k - range.begin] : host->params(k);
      if (!bf16_params.empty() && !from_peer) {
        // Converted on the host: half the bytes cross the link.
        auto on_host = PlaceOnHost();
        source = common::AsBf16(source, bf16_params[k]);
      }
      // The vLayer's parameters in one copy where they are one flat buffer
      // on the host (as the store keeps fp32 masters it owns).
      const at::Tensor flat = from_peer || !bf16_params.empty()
                                  ? at::Tensor()
                                  : host->flat_params_if_all_owned(k);
      ps = flat.defined() ? devices[d]->ToDeviceFlat(flat, source, label)
                          : devices[d]->ToDeviceMany(source, label);
      bs = devices[d]->ToDeviceMany(buffers, label);
      uint64_t param_bytes = 0, buffer_bytes = 0;
      for (at::Tensor& t : ps) {
        t.requires_grad_(true);
        param_bytes += t.nbytes();
      }
      for (const at::Tensor& b : bs) buffer_bytes += b.nbytes();
      const uint64_t over_link = from_peer ? buffer_bytes : param_bytes + buffer_bytes;
      host_bytes += over_link;
      if (from_peer) peer_bytes += param_bytes;
      Link(0, over_link, copy_start);
      w->params.push_back(std::move(ps));
      w->buffers.push_back(std::move(bs));
    }
  }, absl::StatusCode::kInternal));
  if (from_peer) {
    // Copied: the source's room may be freed once every copier has.
    peer_params.clear();
    peer_weights->Taken(*source);
  }
  peer_weights->Publish(id, d, w->params);
  counters.weights_in += host_bytes;
  counters.peer += peer_bytes;
  Trace(d, TraceStream::kWeightsIn,
        from_peer ? absl::StrCat("weights from device ", peer_device, " for ", label)
                  : absl::StrCat("weights in ", label),
        start);
  return w;
}

uint64_t Runtime::Impl::StoreBuffers(const DeviceWeights& w) {
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

absl::Status Runtime::Impl::GradientsOutAfter(const Task& t, int d, DeviceWeights& w, int mb) {
  const bool planned = std::any_of(t.transfers.begin(), t.transfers.end(), [&](const Transfer& x) {
    return x.kind == TransferKind::kGradientsOut && x.microbatch == mb;
  });
  if (!planned) return absl::OkStatus();
  std::vector<std::vector<at::Tensor>> grads;
  HARMONY_RETURN_IF_ERROR(CallTorch("gradients", [&] {
    auto scope = devices[d]->Place(absl::StrCat("gradients of task ", t.id, ", microbatch ", mb));
    grads = GradientsOf(w);
    for (auto& ps : w.params) {
      for (at::Tensor& p : ps) p.mutable_grad() = at::Tensor();
    }
  }, absl::StatusCode::kInternal));
  HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
  // On this thread: the next microbatch's backward starts once they are on
  // the host, so they never exist beside its fresh ones.
  return CopyGradientsOut(t, d, mb, grads, 0, absl::StrCat(" #", mb));
}

absl::Status Runtime::Impl::CopyGradientsOut(const Task& t, int d, int mb,
                                             const std::vector<std::vector<at::Tensor>>& grads,
                                             uint64_t extra_bytes, const std::string& what) {
  const double start = Now();
  uint64_t bytes = extra_bytes;
  std::vector<int> slots;
  for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
    const auto& order = gradient_sum_order[k];
    const auto slot = order.find({t.id, mb});
    if (slot == order.end()) {
      return absl::InternalError(absl::StrCat(
          "task ", t.id, " sends vLayer ", k, "'s gradients", mb < 0 ? "" : " after microbatch ",
          mb < 0 ? "" : absl::StrCat(mb), ", which the plan's GRADIENTS_OUT transfers do not"));
    }
    slots.push_back(slot->second);
  }
  HARMONY_RETURN_IF_ERROR(CallTorch("gradients out", [&] {
    auto on_host = PlaceOnHost();
    for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
      std::vector<at::Tensor> gs = grads[k - t.vlayers.begin];
      for (at::Tensor& g : gs) {
        if (!g.is_cpu()) g = ToHost(g).toTensor();  // A GPU's: to pinned memory first.
      }
      const double sum_start = Now();
      bool early = false;
      const uint64_t sent = host->AddGradients(k, gs, slots[k - t.vlayers.begin], &early);
      IterationCounters::AddSeconds(counters.host_sum_ns, Now() - sum_start);
      if (early) counters.host_sum_early += sent;
      bytes += sent;
    }
  }, absl::StatusCode::kInternal));
  Link(1, bytes, start);
  counters.gradients_out += bytes;
  Trace(d, kSwapOut, absl::StrCat("gradients out ", t.vlayers.begin, "-", t.vlayers.end - 1, what),
        start);
  return absl::OkStatus();
}

std::vector<std::vector<at::Tensor>> Runtime::Impl::GradientsOf(const DeviceWeights& w) {
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

absl::Status Runtime::Impl::FinishBackward(const Task& t, int d, DeviceWeights& w) {
  const bool reduce = plan::ReducesGradients(t);
  bool out = false;
  for (const Transfer& x : t.transfers) out = out || x.kind == TransferKind::kGradientsOut;
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
    absl::Status handed = reduction.Hand(t.id, std::move(grads));
    IterationCounters::AddSeconds(counters.wait_ns, Now() - start);
    IterationCounters::AddSeconds(counters.peer_wait_ns, Now() - start);
    return handed;
  }
  if (reduce) {
    // Sum the gradients the other devices hand this task (of its pack and
    // wave), in device order.
    const auto senders = reduce_senders.find(t.id);
    const size_t count = senders == reduce_senders.end() ? 0 : senders->second.size();
    for (size_t i = 0; i < count; ++i) {
      const Task& other = graph.tasks[senders->second[i]];
      const double start = Now();
      HARMONY_ASSIGN_OR_RETURN(std::vector<std::vector<at::Tensor>> theirs,
                               reduction.Take(other.id));
      IterationCounters::AddSeconds(counters.peer_wait_ns, Now() - start);
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
      reduction.Summed(other.id);
      counters.peer += bytes;
      IterationCounters::AddSeconds(counters.wait_ns, Now() - start);
      Trace(d, kPeer, absl::StrCat("reduce from task ", other.id), start);
    }
  }
  if (!out) return absl::OkStatus();
  // The plan sends a fused forward's updated buffers with the gradients
  // when this device keeps the statistics (its bytes say so); they are
  // small and copied now.
  uint64_t planned = 0, gradient_bytes = 0;
  for (const Transfer& x : t.transfers) {
    // The task's own (not those sent after a microbatch of a host-summed pack).
    if (x.kind == TransferKind::kGradientsOut && x.microbatch < 0) planned += x.bytes;
  }
  // The gradients' bytes as the plan counts them (the profile's: bf16 in a
  // bf16 plan, where the host's fp32 gradients are twice as large and hid
  // the buffers' bytes, so that a fused task's statistics were never kept).
  for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
    gradient_bytes += plan.profile().vlayers(k).gradient_bytes();
  }
  const uint64_t buffer_bytes = t.fused_loss && planned > gradient_bytes ? StoreBuffers(w) : 0;
  // A pack summed on the host sends its last microbatch's gradients on this
  // thread too, as it sent the others: the plan has the device's next task
  // start once they are out, not beside them.
  if (plan::SumsGradientsOnHost(t)) return CopyGradientsOut(t, d, -1, grads, buffer_bytes, "");
  // The gradients go to the host on the copy-out stream, which holds them
  // on the device until they are there.
  devices[d]->copy_out().Post([this, d, &t, buffer_bytes, grads = std::move(grads)] {
    absl::Status copied = CopyGradientsOut(t, d, -1, grads, buffer_bytes, "");
    if (!copied.ok()) return Fail(copied);
  });
  return absl::OkStatus();
}

std::future<Runtime::Impl::WeightsResult> Runtime::Impl::PostWeights(int d, int id, int room_of,
                                                                     int after_copies_of,
                                                                     std::string label) {
  auto promise = std::make_shared<std::promise<WeightsResult>>();
  std::future<WeightsResult> result = promise->get_future();
  devices[d]->weights().Post([this, d, id, room_of, after_copies_of, label = std::move(label),
                              promise] {
    promise->set_value(LoadWeights(d, id, room_of, after_copies_of, label));
  });
  return result;
}

}  // namespace harmony::executor
