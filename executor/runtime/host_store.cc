#include "executor/runtime/host_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/decomposer.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::executor {

using common::CallTorch;

absl::StatusOr<std::unique_ptr<HostStore>> HostStore::Create(const torch::jit::Module& model,
                                                             const common::Decomposition& dec,
                                                             const optim::OptimizerOptions& optimizer,
                                                             bool pinned) {
  std::unique_ptr<HostStore> store(new HostStore());
  std::vector<std::unique_ptr<Layer>>& layers = store->layers_;
  std::map<std::string, std::pair<int, int>> owner;  // Name -> (vLayer, index).
  for (int k = 0; k < dec.num_vlayers(); ++k) {
    const common::VLayerInfo& info = dec.vlayers()[k];
    auto h = std::make_unique<Layer>();
    h->param_names = info.parameters;
    h->buffer_names = info.buffers;
    int64_t elements = 0;
    HARMONY_ASSIGN_OR_RETURN(std::vector<at::Tensor> params,
                             common::ResolveTensors(model, info.parameters));
    std::vector<bool>& owned = h->owned;
    owned.assign(params.size(), true);
    for (size_t j = 0; j < params.size(); ++j) {
      if (params[j].scalar_type() != at::kFloat) {
        return absl::FailedPreconditionError(absl::StrCat(
            "parameter ", info.parameters[j], " is ", params[j].scalar_type(),
            "; the runtime trains float32 parameters"));
      }
      auto [it, fresh] = owner.emplace(info.parameters[j], std::make_pair(k, static_cast<int>(j)));
      if (!fresh) {
        owned[j] = false;
        Layer& first = it->second.first == k ? *h : *layers[it->second.first];
        first.borrowers.emplace_back(k, static_cast<int>(j), it->second.second);
        continue;
      }
      elements += params[j].numel();
    }
    HARMONY_RETURN_IF_ERROR(CallTorch("host store", [&] {
      // Pinned for a GPU: weights are copied in from here while it computes.
      h->flat_params = at::empty({elements}, at::TensorOptions().dtype(at::kFloat).pinned_memory(pinned));
      h->flat_grads = at::zeros({elements}, at::kFloat);
      int64_t at = 0;
      for (size_t j = 0; j < params.size(); ++j) {
        const at::Tensor& p = params[j];
        if (!owned[j]) {
          const auto& [ok, oj] = owner.at(info.parameters[j]);
          h->params.push_back(ok == k ? h->params[oj] : layers[ok]->params[oj]);
          h->grads.push_back(at::zeros_like(p));
          continue;
        }
        at::Tensor view = h->flat_params.narrow(0, at, p.numel()).view(p.sizes());
        view.copy_(p.detach());
        h->params.push_back(view);
        h->grads.push_back(h->flat_grads.narrow(0, at, p.numel()).view(p.sizes()));
        at += p.numel();
      }
    }, absl::StatusCode::kResourceExhausted));
    HARMONY_ASSIGN_OR_RETURN(std::vector<at::Tensor> buffers,
                             common::ResolveTensors(model, info.buffers));
    for (const at::Tensor& b : buffers) {
      h->buffers.push_back(pinned ? b.detach().pin_memory() : b.detach().clone());
    }
    HARMONY_ASSIGN_OR_RETURN(h->optimizer,
                             optim::CpuOptimizer::Create(optimizer, static_cast<size_t>(elements)));
    if (k == 0) store->state_names_ = h->optimizer->state_names();
    layers.push_back(std::move(h));
  }
  return store;
}

HostStore::~HostStore() = default;

std::vector<at::Tensor> HostStore::buffers(int k) const {
  std::lock_guard<std::mutex> lock(layers_[k]->mu);
  return layers_[k]->buffers;
}

void HostStore::SetBuffers(int k, std::vector<at::Tensor> buffers) {
  std::lock_guard<std::mutex> lock(layers_[k]->mu);
  layers_[k]->buffers = std::move(buffers);
}

std::vector<int> HostStore::borrowers(int k) const {
  std::vector<int> out;
  for (const auto& [b, j, jj] : layers_[k]->borrowers) out.push_back(b);
  return out;
}

void HostStore::SetGradientCount(int k, int count) {
  Layer& h = *layers_[k];
  std::lock_guard<std::mutex> lock(h.mu);
  h.grad_count = count;
  h.next_slot = 0;
  h.early.clear();
}

namespace {

// Into vLayer k's gradient slots: added, or copied when the first this
// iteration. h.mu held.
void SumInto(std::vector<at::Tensor>& into, bool& grads_in, const std::vector<at::Tensor>& grads) {
  for (size_t j = 0; j < grads.size(); ++j) {
    if (grads_in) {
      into[j].add_(grads[j]);
      // bf16 gradients (a bf16 plan's) sum as the device would have summed
      // them into its bf16 .grad: rounded to bf16 after each add, so where
      // they are added (on the device, or here after each microbatch) does
      // not change the result.
      if (grads[j].scalar_type() == at::kBFloat16) into[j].copy_(into[j].to(at::kBFloat16));
    } else {
      into[j].copy_(grads[j]);
    }
  }
  grads_in = true;
}

}  // namespace

uint64_t HostStore::AddGradients(int k, const std::vector<at::Tensor>& grads, int slot,
                                 bool* early) {
  if (early != nullptr) *early = false;
  Layer& h = *layers_[k];
  uint64_t bytes = 0;
  for (const at::Tensor& g : grads) bytes += g.nbytes();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.grad_count == 0 || slot < 0) {
    SumInto(h.grads, h.grads_in, grads);
    return bytes;
  }
  if (slot != h.next_slot) {
    // Early: kept (a copy, so the sender's memory is free) until its turn.
    std::vector<at::Tensor> copies;
    for (const at::Tensor& g : grads) {
      copies.push_back(g.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
    }
    h.early[slot] = std::move(copies);
    if (early != nullptr) *early = true;
    return bytes;
  }
  SumInto(h.grads, h.grads_in, grads);
  ++h.next_slot;
  for (auto it = h.early.find(h.next_slot); it != h.early.end(); it = h.early.find(h.next_slot)) {
    SumInto(h.grads, h.grads_in, it->second);
    h.early.erase(it);
    ++h.next_slot;
  }
  return bytes;
}

absl::Status HostStore::Update(int k, const World* world) {
  HARMONY_RETURN_IF_ERROR(Finalize(k, world));
  return Step(k, world);
}

absl::Status HostStore::Finalize(int k, const World* world) {
  Layer& h = *layers_[k];
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.grad_count > 0 && (h.next_slot != h.grad_count || !h.early.empty())) {
    const int summed = h.next_slot;
    const size_t early = h.early.size();
    h.next_slot = 0;
    h.early.clear();
    return absl::InternalError(absl::StrCat(
        "vLayer ", k, "'s gradients: ", summed, " of the ", h.grad_count,
        " sends the plan has per iteration were summed when its update began (", early,
        " more arrived out of order): a send of the plan's did not happen"));
  }
  h.next_slot = 0;
  if (!h.grads_in) h.flat_grads.zero_();
  for (const auto& [b, j, jj] : h.borrowers) {
    if (b == k) {
      h.grads[jj].add_(h.grads[j]);
      continue;
    }
    Layer& reader = *layers_[b];
    std::lock_guard<std::mutex> reader_lock(reader.mu);
    h.grads[jj].add_(reader.grads[j]);
  }
  h.grads_in = false;
  if (h.elements() == 0 || world == nullptr || !world->distributed()) return absl::OkStatus();
  const double scale = 1.0 / world->size;
  if (h.owner < 0) {
    HARMONY_RETURN_IF_ERROR(world->all_reduce_sum(h.flat_grads));
    h.flat_grads.mul_(scale);
    return absl::OkStatus();
  }
  HARMONY_RETURN_IF_ERROR(world->reduce_sum_to(h.flat_grads, h.owner));
  if (world->rank == h.owner) h.flat_grads.mul_(scale);
  return absl::OkStatus();
}

absl::Status HostStore::Step(int k, const World* world, const at::Tensor& scale) {
  Layer& h = *layers_[k];
  if (h.elements() == 0) return absl::OkStatus();
  if (scale.defined()) h.flat_grads.mul_(scale);
  if (h.optimizer != nullptr) {
    h.optimizer->Step(h.flat_params.data_ptr<float>(), h.flat_grads.data_ptr<float>());
  }
  if (h.owner >= 0 && world != nullptr && world->distributed()) {
    return world->broadcast(h.flat_params, h.owner);
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, at::Tensor>> HostStore::GradientNorms(int k) const {
  const Layer& h = *layers_[k];
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t j = 0; j < h.grads.size(); ++j) {
    if (!h.owned[j]) continue;
    const at::Tensor& g = h.grads[j];
    std::vector<int64_t> dims(static_cast<size_t>(g.dim()));
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int64_t>(d);
    // torch.norm(g, 2) in PyTorch 1.13 (torch/functional.py) is
    // _VF.norm(g, 2, dim=[all], keepdim=False): the same call.
    out.emplace_back(h.param_names[j], at::norm(g, 2, dims, false));
  }
  return out;
}

std::vector<std::string> HostStore::owned_parameter_names(int k) const {
  const Layer& h = *layers_[k];
  std::vector<std::string> out;
  for (size_t j = 0; j < h.param_names.size(); ++j) {
    if (h.owned[j]) out.push_back(h.param_names[j]);
  }
  return out;
}

void HostStore::SaveForRedo(int k) {
  Layer& h = *layers_[k];
  if (h.elements() == 0) return;
  if (!h.saved_params.defined()) h.saved_params = at::empty_like(h.flat_params);
  h.saved_params.copy_(h.flat_params);
  if (h.optimizer != nullptr) {
    h.saved_state = h.optimizer->state();  // Same size: reuses the allocation.
    h.saved_steps = h.optimizer->steps();
  }
}

absl::Status HostStore::Redo(int k, const at::Tensor& scale) {
  Layer& h = *layers_[k];
  if (h.elements() == 0) return absl::OkStatus();
  if (!h.saved_params.defined()) {
    return absl::InternalError(absl::StrCat("vLayer ", k, " was not saved before its step"));
  }
  h.flat_params.copy_(h.saved_params);
  if (h.optimizer != nullptr) {
    h.optimizer->state() = h.saved_state;
    h.optimizer->set_steps(h.saved_steps);
  }
  return Step(k, nullptr, scale);
}

uint64_t HostStore::redo_bytes(int k) const {
  const Layer& h = *layers_[k];
  return h.flat_params.nbytes() +
         (h.optimizer != nullptr ? h.optimizer->state().size() * sizeof(float) : 0);
}

void HostStore::SetLearningRate(double lr) {
  for (auto& h : layers_) {
    if (h->optimizer != nullptr) h->optimizer->set_learning_rate(lr);
  }
}

std::vector<std::string> HostStore::SetNoDecay(
    const std::function<bool(const std::string&, const at::Tensor&)>& no_decay) {
  std::vector<std::string> names;
  for (auto& h : layers_) {
    std::vector<std::pair<size_t, size_t>> ranges;
    size_t at = 0;
    for (size_t j = 0; j < h->params.size(); ++j) {
      if (!h->owned[j]) continue;
      const size_t n = static_cast<size_t>(h->params[j].numel());
      if (no_decay(h->param_names[j], h->params[j])) {
        ranges.emplace_back(at, at + n);
        names.push_back(h->param_names[j]);
      }
      at += n;
    }
    if (h->optimizer != nullptr) h->optimizer->SetNoDecay(std::move(ranges));
  }
  no_decay_names_ = names;
  return names;
}

void HostStore::ShardOptimizerState(const World& world) {
  // Largest first onto the least loaded rank (ties: the lowest), so every
  // rank computes the same owners and keeps about 1 / ranks of the state.
  std::vector<int> order(layers_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return layers_[a]->elements() > layers_[b]->elements();
  });
  std::vector<int64_t> load(world.size, 0);
  for (int k : order) {
    Layer& h = *layers_[k];
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    h.owner = r;
    load[r] += h.elements();
    if (r != world.rank) h.optimizer.reset();
  }
}

void HostStore::StartIteration() {
  for (auto& h : layers_) {
    std::lock_guard<std::mutex> lock(h->mu);
    h->grads_in = false;
  }
}

absl::StatusOr<at::Tensor> HostStore::Find(const std::string& name) const {
  for (const auto& h : layers_) {
    for (size_t j = 0; j < h->param_names.size(); ++j) {
      if (h->param_names[j] == name) return h->params[j];
    }
    for (size_t j = 0; j < h->buffer_names.size(); ++j) {
      if (h->buffer_names[j] == name) {
        std::lock_guard<std::mutex> lock(h->mu);
        return h->buffers[j];
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("the model has no parameter or buffer ", name));
}

absl::Status HostStore::WriteInto(torch::jit::Module& model) const {
  return CallTorch("writing the weights into the model", [&] {
    c10::NoGradGuard no_grad;
    for (const auto& h : layers_) {
      for (size_t j = 0; j < h->param_names.size(); ++j) {
        common::ResolveTensor(model, h->param_names[j])->copy_(h->params[j]);
      }
      std::lock_guard<std::mutex> lock(h->mu);
      for (size_t j = 0; j < h->buffer_names.size(); ++j) {
        common::ResolveTensor(model, h->buffer_names[j])->copy_(h->buffers[j]);
      }
    }
  }, absl::StatusCode::kInternal);
}

absl::Status HostStore::ExportState(std::map<std::string, at::Tensor>& weights,
                                    std::map<std::string, at::Tensor>& optimizer_state,
                                    const World* world) const {
  const std::vector<std::string>& parts = state_names_;
  for (const auto& h : layers_) {
    const int64_t elements = h->elements();
    // The optimizer's state as one tensor per part, over the owned elements.
    at::Tensor state;
    if (!parts.empty() && elements > 0) {
      const std::vector<int64_t> shape = {static_cast<int64_t>(parts.size()), elements};
      if (h->optimizer != nullptr) {
        state = at::from_blob(const_cast<float*>(h->optimizer->state().data()), shape, at::kFloat);
      }
      if (h->owner >= 0 && world != nullptr && world->distributed()) {
        // Sharded: the owner's state to every rank.
        state = state.defined() ? state.clone() : at::empty(shape, at::kFloat);
        HARMONY_RETURN_IF_ERROR(world->broadcast(state, h->owner));
      }
    }
    int64_t at = 0;
    for (size_t j = 0; j < h->param_names.size(); ++j) {
      const std::string& name = h->param_names[j];
      if (weights.count(name)) continue;  // Tied: owned by an earlier vLayer.
      const at::Tensor& p = h->params[j];
      weights[name] = p.clone();
      for (size_t i = 0; i < parts.size() && state.defined(); ++i) {
        optimizer_state[absl::StrCat(name, "/", parts[i])] =
            state[static_cast<int64_t>(i)].narrow(0, at, p.numel()).view(p.sizes()).clone();
      }
      at += p.numel();
    }
    std::lock_guard<std::mutex> lock(h->mu);
    for (size_t j = 0; j < h->buffer_names.size(); ++j) {
      weights[h->buffer_names[j]] = h->buffers[j].clone();
    }
  }
  return absl::OkStatus();
}

absl::Status HostStore::ImportState(const std::map<std::string, at::Tensor>& weights,
                                    const std::map<std::string, at::Tensor>& optimizer_state,
                                    int64_t optimizer_steps) {
  auto find = [](const std::map<std::string, at::Tensor>& from, const std::string& name,
                 const at::Tensor& like, const char* what) -> absl::StatusOr<at::Tensor> {
    auto it = from.find(name);
    if (it == from.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint has no ", what, " ", name));
    }
    if (it->second.sizes() != like.sizes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoint's ", what, " ", name, " has shape ", c10::str(it->second.sizes()),
          "; the model's is ", c10::str(like.sizes())));
    }
    return it->second;
  };
  // Check everything before changing anything.
  std::set<std::string> seen;
  const std::vector<std::string>& parts = state_names_;
  for (const auto& h : layers_) {
    for (size_t j = 0; j < h->param_names.size(); ++j) {
      if (!seen.insert(h->param_names[j]).second) continue;
      HARMONY_RETURN_IF_ERROR(find(weights, h->param_names[j], h->params[j], "parameter").status());
      for (const std::string& part : parts) {
        HARMONY_RETURN_IF_ERROR(find(optimizer_state, absl::StrCat(h->param_names[j], "/", part),
                                     h->params[j], "optimizer state").status());
      }
    }
    for (size_t j = 0; j < h->buffer_names.size(); ++j) {
      HARMONY_RETURN_IF_ERROR(find(weights, h->buffer_names[j], h->buffers[j], "buffer").status());
    }
  }
  seen.clear();
  return CallTorch("restoring the checkpoint", [&] {
    c10::NoGradGuard no_grad;
    for (const auto& h : layers_) {
      const int64_t elements = h->elements();
      at::Tensor state;  // Not kept here (sharded): the weights only.
      if (!parts.empty() && h->optimizer != nullptr) {
        state = at::from_blob(h->optimizer->state().data(),
                              {static_cast<int64_t>(parts.size()), elements}, at::kFloat);
      }
      int64_t at = 0;
      for (size_t j = 0; j < h->param_names.size(); ++j) {
        const std::string& name = h->param_names[j];
        if (!seen.insert(name).second) continue;
        at::Tensor& p = h->params[j];
        p.copy_(weights.at(name));
        for (size_t i = 0; i < parts.size() && state.defined(); ++i) {
          state[static_cast<int64_t>(i)].narrow(0, at, p.numel()).copy_(
              optimizer_state.at(absl::StrCat(name, "/", parts[i])).reshape({-1}));
        }
        at += p.numel();
      }
      if (h->optimizer != nullptr) h->optimizer->set_steps(optimizer_steps);
      std::lock_guard<std::mutex> lock(h->mu);
      for (size_t j = 0; j < h->buffer_names.size(); ++j) {
        const at::Tensor& from = weights.at(h->buffer_names[j]);
        h->buffers[j] = h->buffers[j].is_pinned() ? from.pin_memory() : from.clone();
      }
    }
  }, absl::StatusCode::kInternal);
}

uint64_t HostStore::bytes() const {
  uint64_t bytes = 0;
  for (const auto& h : layers_) {
    bytes += h->flat_params.nbytes() + h->flat_grads.nbytes();
    std::lock_guard<std::mutex> lock(h->mu);
    for (const at::Tensor& b : h->buffers) bytes += b.nbytes();
  }
  return bytes + optimizer_state_bytes();
}

uint64_t HostStore::optimizer_state_bytes() const {
  uint64_t bytes = 0;
  for (const auto& h : layers_) {
    if (h->optimizer != nullptr) bytes += h->optimizer->state().size() * sizeof(float);
  }
  return bytes;
}

at::Tensor HostStore::flat_params_if_all_owned(int k) const {
  const Layer& h = *layers_[k];
  if (h.params.empty()) return at::Tensor();
  for (bool o : h.owned) {
    if (!o) return at::Tensor();
  }
  return h.flat_params;
}

}  // namespace harmony::executor
