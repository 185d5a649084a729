#include "planner/profile/vlayer_step.h"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "absl/strings/str_cat.h"
#include "common/autocast.h"
#include "common/model_output.h"
#include "planner/profile/machine.h"

namespace harmony::planner::timing {

using machine::Now;

namespace {

at::Tensor OnDevice(const Context& c, const at::Tensor& t, bool requires_grad) {
  at::Tensor copy = c.target->ToDevice(t);
  if (requires_grad && at::isFloatingType(copy.scalar_type())) {
    copy.requires_grad_(true);
  }
  return copy;
}

}  // namespace

Prepared Prepare(const Context& c, int k, bool backward, bool with_gradients) {
  Prepared p;
  p.k = k;
  for (const at::Tensor& t : c.params[k]) {
    p.params.push_back(OnDevice(c, t, backward && t.requires_grad()));
  }
  for (const at::Tensor& b : c.buffers[k]) p.buffers.push_back(OnDevice(c, b, false));
  p.inputs = c.InputsOf(k);
  for (c10::IValue& v : p.inputs) {
    if (v.isTensor()) v = OnDevice(c, v.toTensor(), backward);
  }
  for (const at::Tensor& t : c.targets) p.targets.push_back(OnDevice(c, t, false));
  if (backward && !c.output_grads.empty()) {
    for (const at::Tensor& g : c.output_grads[k]) {
      p.output_grads.push_back(g.defined() ? OnDevice(c, g, false) : at::Tensor());
    }
  }
  if (backward && with_gradients) {
    for (at::Tensor& t : p.params) {
      if (!t.requires_grad()) continue;
      // fp32 gradients of bf16 parameters, as the runtime sums them.
      t.mutable_grad() = c.fp32_gradients && t.scalar_type() == at::kBFloat16
                             ? at::zeros_like(t, t.options().dtype(at::kFloat))
                             : at::zeros_like(t);
    }
  }
  return p;
}

BackwardRoots RootsOf(const Context& c, int k, const std::vector<c10::IValue>& out,
                      const std::vector<at::Tensor>& targets,
                      const std::vector<at::Tensor>* output_grads) {
  BackwardRoots r;
  if (k == c.d->num_vlayers() - 1) {
    if (out.empty() || !out[0].isTensor()) {
      throw std::runtime_error(absl::StrCat("vLayer ", k, " (the last) returned no tensor"));
    }
    absl::StatusOr<at::Tensor> loss =
        common::LossFromOutput(out[0].toTensor(), targets, c.takes_targets, c.loss);
    if (!loss.ok()) throw std::runtime_error(std::string(loss.status().message()));
    r.roots.push_back(*loss);
    r.grads.push_back(at::ones_like(*loss));
    return r;
  }
  for (size_t o = 0; o < out.size(); ++o) {
    const c10::IValue& v = out[o];
    if (!v.isTensor() || !v.toTensor().requires_grad()) continue;
    if (output_grads == nullptr) {
      r.roots.push_back(v.toTensor());
      r.grads.push_back(at::ones_like(v.toTensor()));
    } else if (o < output_grads->size() && (*output_grads)[o].defined()) {
      r.roots.push_back(v.toTensor());
      r.grads.push_back((*output_grads)[o]);
    }
  }
  return r;
}

namespace {

std::vector<c10::IValue> RunOrThrow(const Context& c, int k, Prepared& p) {
  absl::StatusOr<std::vector<c10::IValue>> out = c.d->Run(k, p.params, p.buffers, p.inputs);
  if (!out.ok()) {
    if (absl::IsResourceExhausted(out.status())) {
      throw c10::OutOfMemoryError({__func__, __FILE__, __LINE__},
                                  std::string(out.status().message()));
    }
    throw std::runtime_error(std::string(out.status().message()));
  }
  return *std::move(out);
}

// The backward of vLayer `p.k` from its outputs (p.outputs), then, as the
// runtime does after each backward, bf16 gradients made fp32 (both exist
// for a moment: the peak counts it) in each of `parts`.
void BackwardOf(const Context& c, Prepared& p, std::initializer_list<Prepared*> parts) {
  const BackwardRoots r = RootsOf(c, p.k, p.outputs, p.targets,
                                  p.output_grads.empty() ? nullptr : &p.output_grads);
  if (!r.roots.empty()) torch::autograd::backward(r.roots, r.grads);
  if (!c.fp32_gradients) return;
  for (Prepared* part : parts) {
    for (at::Tensor& t : part->params) {
      if (t.grad().defined() && t.grad().scalar_type() == at::kBFloat16) {
        t.mutable_grad() = t.grad().to(at::kFloat);
      }
    }
  }
}

}  // namespace

double Execute(const Context& c, int k, bool backward, Prepared& p, Target::Meter* memory,
               uint64_t* saved) {
  c10::AutoGradMode grad_mode(backward);
  common::Autocast autocast(c.bf16);
  const uint64_t before = memory != nullptr ? memory->used() : 0;
  const double start = Now();
  p.k = k;
  p.outputs = RunOrThrow(c, k, p);
  if (backward) {
    if (saved != nullptr && memory != nullptr) {
      *saved = memory->used() > before ? memory->used() - before : 0;
    }
    BackwardOf(c, p, {&p});
  }
  c.target->Synchronize();
  return Now() - start;
}

bool OnlyReaderIsNext(const common::Decomposition& d, int k) {
  const int n = d.num_vlayers();
  if (k + 1 >= n) return false;
  for (int j = k + 2; j < n; ++j) {
    for (const common::ValueSource& s : d.vlayers()[j].inputs) {
      if (s.producer == k) return false;
    }
  }
  for (const common::ValueSource& s : d.vlayers()[k + 1].inputs) {
    if (s.producer == k) return true;
  }
  return false;
}

double ExecutePair(const Context& c, bool backward, Prepared& first, Prepared& second) {
  if (second.k != first.k + 1) {
    throw std::runtime_error(absl::StrCat("a pair of vLayers ", first.k, " and ", second.k,
                                          ": the second must follow the first"));
  }
  c10::AutoGradMode grad_mode(backward);
  common::Autocast autocast(c.bf16);
  const double start = Now();
  first.outputs = RunOrThrow(c, first.k, first);
  // The second reads the first's outputs as they come (a pack's vLayers
  // hand them on, on the device), its host copies dropped.
  const std::vector<common::ValueSource>& sources = c.d->vlayers()[second.k].inputs;
  for (size_t i = 0; i < sources.size() && i < second.inputs.size(); ++i) {
    if (sources[i].producer != first.k) continue;
    if (sources[i].index < 0 || sources[i].index >= static_cast<int>(first.outputs.size())) {
      throw std::runtime_error(absl::StrCat("vLayer ", second.k, " reads output ",
                                            sources[i].index, " of vLayer ", first.k,
                                            ", which has ", first.outputs.size()));
    }
    second.inputs[i] = first.outputs[sources[i].index];
  }
  second.outputs = RunOrThrow(c, second.k, second);
  if (backward) BackwardOf(c, second, {&first, &second});
  c.target->Synchronize();
  return Now() - start;
}

}  // namespace harmony::planner::timing
