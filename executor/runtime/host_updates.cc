#include "executor/runtime/host_updates.h"

#include <set>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/intra_op_threads.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::executor {

using plan::Task;
using plan::TaskKind;

namespace {

// The update tasks whose dependencies (theirs, and before them each task's
// depends_on and the tasks before it on its device) reach every backward
// task: the plan orders them after the whole backward.
std::set<int> AfterEveryBackward(const plan::TaskGraph& graph,
                                 const std::map<int, std::vector<int>>& deps,
                                 size_t backward_tasks) {
  std::vector<std::vector<int>> before(graph.tasks.size());
  std::map<int, int> last_on_device;
  for (const Task& t : graph.tasks) {
    if (t.kind == TaskKind::kUpdate) continue;
    before[t.id] = t.depends_on;
    auto last = last_on_device.find(t.device);
    if (last != last_on_device.end()) before[t.id].push_back(last->second);
    last_on_device[t.device] = t.id;
  }
  std::set<int> out;
  for (const auto& [update, direct] : deps) {
    std::vector<bool> seen(graph.tasks.size(), false);
    std::vector<int> stack = direct;
    size_t reached = 0;
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (id < 0 || id >= static_cast<int>(seen.size()) || seen[id]) continue;
      seen[id] = true;
      if (graph.tasks[id].kind == TaskKind::kBackward) ++reached;
      stack.insert(stack.end(), before[id].begin(), before[id].end());
    }
    if (reached == backward_tasks) out.insert(update);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostUpdates>> HostUpdates::Create(
    const plan::TaskGraph& graph, HostStore& host, std::vector<std::string> parameter_order,
    const UpdateRecipe& recipe) {
  std::unique_ptr<HostUpdates> u(new HostUpdates(graph, host, recipe));
  // An update also waits for the backward tasks of its shared parameters'
  // later readers.
  for (const Task& t : graph.tasks) {
    if (t.kind == TaskKind::kBackward) u->backward_tasks_.push_back(t.id);
    if (t.kind != TaskKind::kUpdate) continue;
    std::vector<int>& deps = u->deps_[t.id];
    deps = t.depends_on;
    for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
      for (int b : host.borrowers(k)) {
        for (const Task& other : graph.tasks) {
          if (other.kind == TaskKind::kBackward && other.vlayers.begin <= b &&
              b < other.vlayers.end) {
            deps.push_back(other.id);
          }
        }
      }
    }
  }
  u->after_every_backward_ = AfterEveryBackward(graph, u->deps_, u->backward_tasks_.size());
  for (size_t i = 0; i < parameter_order.size(); ++i) {
    u->parameter_index_.emplace(parameter_order[i], static_cast<int>(i));
  }
  if (recipe.clip_grad_norm > 0) {
    for (int k = 0; k < host.num_vlayers(); ++k) {
      for (const std::string& name : host.owned_parameter_names(k)) {
        if (!u->parameter_index_.count(name)) {
          return absl::InternalError(absl::StrCat(
              "gradient clipping: parameter ", name, " of vLayer ", k,
              " is not among the model's parameters()"));
        }
      }
    }
  }
  return u;
}

absl::Status HostUpdates::Finalize(int k, const World& world) {
  if (finalized_[k]) return absl::OkStatus();
  absl::Status s = host_.Finalize(k, &world);
  if (!s.ok()) {
    return common::Annotate(s, absl::StrCat("summing vLayer ", k, "'s gradients across servers"));
  }
  finalized_[k] = true;
  if (recipe_.clip_grad_norm <= 0) return absl::OkStatus();
  return common::CallTorch("gradient norms", [&] {
    common::ScopedIntraOpThreads threads(recipe_.norm_threads);
    for (auto& [name, norm] : host_.GradientNorms(k)) {
      norms_[parameter_index_.find(name)->second] = std::move(norm);  // Create checked it.
    }
  }, absl::StatusCode::kInternal);
}

absl::Status HostUpdates::ComputeCoefficient() {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& n : norms_) {
    if (n.defined()) norms.push_back(n);
  }
  return common::CallTorch("gradient clipping", [&] {
    common::ScopedIntraOpThreads threads(recipe_.norm_threads);
    // clip_grad_norm_ (PyTorch 1.13): torch.norm(torch.stack(norms), 2);
    // max_norm / (total + 1e-6), which Tensor.__rtruediv__ computes as
    // reciprocal(total + 1e-6) * max_norm; clamp(max=1).
    total_norm_ = norms.empty() ? at::zeros({}, at::kFloat)
                                : at::norm(at::stack(norms), 2, {0}, false);
    coef_ = at::clamp(at::reciprocal(total_norm_ + 1e-6) * recipe_.clip_grad_norm,
                      c10::nullopt, 1.0);
    // Not firing, coef is 1 and multiplying by it changes nothing: skipped.
    fires_ = !(coef_.item<float>() >= 1.0f);
  }, absl::StatusCode::kInternal);
}

absl::Status HostUpdates::Run(int64_t iteration, const World& world, TaskCompletion& completion,
                              const HostLink& clock, TraceRecorder& tracer,
                              IterationCounters& counters, IterationMetrics& out) {
  const double lr = optim::LearningRateAt(recipe_.schedule, recipe_.learning_rate, iteration);
  host_.SetLearningRate(lr);
  out.learning_rate = lr;
  const bool clip = recipe_.clip_grad_norm > 0;
  out.clipping = clip;
  finalized_.assign(host_.num_vlayers(), false);
  norms_.assign(parameter_index_.size(), at::Tensor());
  total_norm_ = coef_ = at::Tensor();
  fires_ = false;
  std::vector<int> speculated;
  bool known = !clip;  // Whether the clipping factor is known.
  const bool hold = recipe_.clip_mode == ClipMode::kHold ||
                    (recipe_.clip_mode == ClipMode::kAuto && recipe_.hold_after_clipping &&
                     fired_before_);
  out.clip_mode = hold ? "hold" : "speculate";
  // Every vLayer finalized and the factor computed: once every backward is
  // done.
  auto learn_norm = [&]() -> absl::Status {
    for (const Task& t : graph_.tasks) {
      if (t.kind != TaskKind::kUpdate) continue;
      for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
        HARMONY_RETURN_IF_ERROR(Finalize(k, world));
      }
    }
    HARMONY_RETURN_IF_ERROR(ComputeCoefficient());
    known = true;
    return absl::OkStatus();
  };
  for (const Task& t : graph_.tasks) {
    if (t.kind != TaskKind::kUpdate) continue;
    HARMONY_ASSIGN_OR_RETURN(const std::vector<int>* deps, common::Lookup(deps_, t.id, [&] {
      return absl::StrCat("the tasks update task ", t.id, " waits for");
    }));
    HARMONY_RETURN_IF_ERROR(completion.WaitDone(*deps));
    if (!known && hold) {
      HARMONY_RETURN_IF_ERROR(completion.WaitDone(backward_tasks_));
    }
    const double start = clock.Now();
    for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
      HARMONY_RETURN_IF_ERROR(Finalize(k, world));
    }
    // Auto learns the norm as soon as the whole backward happens to be
    // done; speculate only where the plan orders the update after it, so
    // that what it speculates does not depend on the threads' timing.
    const bool norm_ready = recipe_.clip_mode == ClipMode::kSpeculate
                                ? after_every_backward_.count(t.id) > 0
                                : completion.AllDone(backward_tasks_);
    if (!known && norm_ready) {
      HARMONY_RETURN_IF_ERROR(completion.WaitDone(backward_tasks_));
      HARMONY_RETURN_IF_ERROR(learn_norm());
    }
    for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
      if (!known) {
        host_.SaveForRedo(k);
        speculated.push_back(k);
      }
      HARMONY_RETURN_IF_ERROR(host_.Step(k, &world, known && fires_ ? coef_ : at::Tensor()));
    }
    IterationCounters::AddSeconds(counters.optimizer_ns, clock.Now() - start);
    if (tracer.on()) {
      tracer.Add(-1, kCompute,
                 absl::StrCat(known ? "update " : "update (speculative) ", t.vlayers.begin, "-",
                              t.vlayers.end - 1),
                 start, clock.Now());
    }
    completion.MarkDone(t.id);
  }
  if (!clip) return absl::OkStatus();
  if (!known) {
    HARMONY_RETURN_IF_ERROR(completion.WaitDone(backward_tasks_));
    HARMONY_RETURN_IF_ERROR(learn_norm());
  }
  out.grad_norm = total_norm_.item<float>();
  out.clip_coef = coef_.item<float>();
  out.speculated_vlayers = static_cast<int>(speculated.size());
  fired_before_ = fires_;
  if (fires_ && !speculated.empty()) {
    const double start = clock.Now();
    for (int k : speculated) HARMONY_RETURN_IF_ERROR(host_.Redo(k, coef_));
    out.redone = true;
    out.redo_s = clock.Now() - start;
    IterationCounters::AddSeconds(counters.optimizer_ns, out.redo_s);
    if (tracer.on()) tracer.Add(-1, kCompute, "redo clipped updates", start, clock.Now());
  }
  return absl::OkStatus();
}

}  // namespace harmony::executor
