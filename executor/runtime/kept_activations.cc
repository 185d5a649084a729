// Kept activations (plan::Config::keep; docs/DESIGN.md §6.10): a kept
// pack's forward runs its vLayers with autograd, saving what autograd keeps
// into common::SavedTensors; the copy-out stream sends those to the host and
// the backward task's copy-in stream brings them back; the backward runs
// autograd's engine from the outputs' gradients, without a recompute.

#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/runtime_impl.h"

namespace harmony::executor {

using common::CallTorch;

std::shared_ptr<Runtime::Impl::KeptWeights> Runtime::Impl::KeptLeaves(const DeviceWeights& w,
                                                                      PackRange range) {
  auto kw = std::make_shared<KeptWeights>();
  kw->range = range;
  for (int k = range.begin; k < range.end; ++k) {
    std::vector<at::Tensor> leaves;
    for (const at::Tensor& p : w.params[k - w.range.begin]) {
      at::Tensor leaf = p.detach();
      if (at::isFloatingType(leaf.scalar_type())) leaf.requires_grad_(true);
      leaves.push_back(std::move(leaf));
    }
    kw->leaves.push_back(std::move(leaves));
  }
  return kw;
}

absl::StatusOr<std::vector<c10::IValue>> Runtime::Impl::RunKeptVLayer(
    int d, int k, const DeviceWeights& w, std::vector<c10::IValue> in, int offset,
    KeptMicrobatch& km) {
  const std::vector<common::ValueSource>& sources = Info(k).inputs;
  HARMONY_RETURN_IF_ERROR(CallTorch("kept live-ins", [&] {
    for (size_t i = 0; i < in.size() && i < sources.size(); ++i) {
      const Ref ref{sources[i].producer, sources[i].index};
      // forward's arguments have no gradient; values made inside the pack
      // carry their graph already.
      if (ref.first < 0 || ref.first >= km.range.begin || !in[i].isTensor()) continue;
      const at::Tensor& v = in[i].toTensor();
      if (!at::isFloatingType(v.scalar_type())) continue;
      auto it = km.leaves.find(ref);
      if (it == km.leaves.end()) {
        at::Tensor leaf = v.detach().requires_grad_(true);
        it = km.leaves.emplace(ref, KeptMicrobatch::Leaf{leaf, v.sizes().vec(), v.options()})
                 .first;
      }
      in[i] = it->second.tensor;
    }
  }));
  const std::vector<at::Tensor>& leaves = km.weights->leaves[k - km.range.begin];
  auto saved = std::make_shared<common::SavedTensors>(leaves);
  km.saved.push_back(saved);
  c10::AutoGradMode grad_mode(true);
  common::SaveInto into(saved);
  return RunVLayer(d, k, w, w.buffers[k - w.range.begin], in, offset, &leaves);
}

void Runtime::Impl::SealKept(KeptMicrobatch& km, std::map<Ref, c10::IValue>& values) {
  for (auto& [ref, v] : values) {
    if (ref.first < km.range.begin || ref.first >= km.range.end || !v.isTensor()) continue;
    const at::Tensor t = v.toTensor();
    if (!t.defined() || !t.requires_grad()) continue;
    km.roots[ref] = torch::autograd::impl::gradient_edge(t);
    v = t.detach();
  }
  // The leaves hold no data until the backward: their edges are enough.
  for (auto& [ref, leaf] : km.leaves) {
    leaf.tensor.set_data(at::empty({0}, leaf.options));
  }
}

std::future<void> Runtime::Impl::OffloadKept(const Task& t, int d, const plan::Microbatch& mb,
                                             int back, std::shared_ptr<KeptMicrobatch> km) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> out = done->get_future();
  devices[d]->copy_out().Post([this, &t, d, mb, back, km, done] {
    struct Signal {
      std::promise<void>& p;
      ~Signal() { p.set_value(); }
    } signal{*done};
    const double start = Now();
    uint64_t bytes = 0;
    const absl::Status s = CallTorch(absl::StrCat("kept activations of task ", t.id), [&] {
      for (const auto& saved : km->saved) {
        saved->Offload([](const at::Tensor& b) { return ToHost(b).toTensor(); });
      }
      bytes = km->bytes();
    }, absl::StatusCode::kInternal);
    if (!s.ok()) {
      Fail(s);
      return;
    }
    Link(1, bytes, start);
    counters.kept_out += bytes;
    Trace(d, kSwapOut, absl::StrCat("kept out ", t.id, " #", mb.index), start);
    {
      std::lock_guard<std::mutex> lock(kept_mu);
      kept[{back, mb.index}] = km;
    }
    Post(back, t.id, TransferKind::kKeptOut, Piece{mb.offset, mb.size, {}});
  });
  return out;
}

absl::StatusOr<std::shared_ptr<Runtime::Impl::KeptMicrobatch>> Runtime::Impl::RestoreKept(
    const Task& t, int d, const Transfer& x, const plan::Microbatch& mb) {
  HARMONY_RETURN_IF_ERROR(
      Receive(t.id, x.peer_task, TransferKind::kKeptOut, mb.offset, mb.size).status());
  std::shared_ptr<KeptMicrobatch> km;
  {
    std::lock_guard<std::mutex> lock(kept_mu);
    auto it = kept.find({t.id, mb.index});
    if (it != kept.end()) {
      km = std::move(it->second);
      kept.erase(it);
    }
  }
  if (km == nullptr) {
    return absl::InternalError(absl::StrCat("task ", t.id, " (backward of vLayers ",
                                            t.vlayers.begin, "-", t.vlayers.end - 1,
                                            ") has no kept activations for microbatch ",
                                            mb.index, " from task ", x.peer_task));
  }
  const double start = Now();
  const std::string activity = absl::StrCat("kept activations of task ", t.id);
  HARMONY_RETURN_IF_ERROR(CallTorch(activity, [&] {
    for (const auto& saved : km->saved) {
      saved->Restore([&](const at::Tensor& h) {
        return devices[d]->ToDevice(h, activity).toTensor();
      });
    }
  }, absl::StatusCode::kInternal));
  const uint64_t bytes = km->bytes();
  Link(0, bytes, start);
  counters.kept_in += bytes;
  Trace(d, kSwapIn, absl::StrCat("kept in ", t.id, " #", mb.index), start);
  return km;
}

absl::Status Runtime::Impl::KeptBackward(const Task& t, DeviceWeights& w, KeptMicrobatch& km,
                                         const std::map<Ref, at::Tensor>& output_grads,
                                         std::map<Ref, c10::IValue>& input_grads) {
  using torch::autograd::Edge;
  std::vector<Edge> roots;
  std::vector<at::Tensor> root_grads;
  for (const auto& [ref, g] : output_grads) {
    auto it = km.roots.find(ref);
    if (it == km.roots.end()) continue;  // Made without autograd: no gradient.
    roots.push_back(it->second);
    root_grads.push_back(g);
  }
  // What the engine returns: every parameter leaf's gradient, then every
  // live-in's.
  std::vector<Edge> outputs;
  std::vector<std::pair<int, int>> params;
  for (int k = km.range.begin; k < km.range.end; ++k) {
    const std::vector<at::Tensor>& leaves = km.weights->leaves[k - km.range.begin];
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i].requires_grad()) continue;
      outputs.push_back(torch::autograd::impl::gradient_edge(leaves[i]));
      params.emplace_back(k, static_cast<int>(i));
    }
    // The backward reads this task's weights where the forward's were.
    km.saved[k - km.range.begin]->SetWeights(w.params[k - w.range.begin]);
  }
  for (const auto& [ref, leaf] : km.leaves) {
    outputs.push_back(torch::autograd::impl::gradient_edge(leaf.tensor));
  }
  return CallTorch(
      absl::StrCat("backward of kept vLayers ", t.vlayers.begin, "-", t.vlayers.end - 1), [&] {
        std::vector<at::Tensor> got;
        if (!roots.empty()) {
          got = torch::autograd::Engine::get_default_engine().execute(
              roots, root_grads, /*keep_graph=*/false, /*create_graph=*/false,
              /*accumulate_grad=*/false, outputs);
        }
        got.resize(outputs.size());
        c10::NoGradGuard no_grad;
        // Into the parameters' gradients as AccumulateGrad would: the first
        // taken in the parameter's layout, the next added.
        for (size_t j = 0; j < params.size(); ++j) {
          const at::Tensor& g = got[j];
          if (!g.defined()) continue;
          at::Tensor& p = w.params[params[j].first - w.range.begin][params[j].second];
          at::Tensor& grad = p.mutable_grad();
          if (grad.defined()) {
            grad.add_(g);
          } else if (g.strides() == p.strides()) {
            grad = g.detach();
          } else {
            grad = at::empty_strided(p.sizes(), p.strides(), g.options()).copy_(g);
          }
        }
        size_t j = params.size();
        for (const auto& [ref, leaf] : km.leaves) {
          const at::Tensor& g = got[j++];
          input_grads[ref] = g.defined() ? g : at::zeros(leaf.sizes, leaf.options);
        }
      });
}

}  // namespace harmony::executor
