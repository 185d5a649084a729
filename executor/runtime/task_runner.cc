// The task runner: Runtime::Impl's vLayers, forward and backward
// tasks, each device's task list and the host's updates (runtime_impl.h;
// weights in and gradients out: weights_io.cc).

#include <algorithm>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/autocast.h"
#include "common/denormals.h"
#include "common/dropout.h"
#include "common/intra_op_threads.h"
#include "common/leaf_gradients.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/runtime_impl.h"

namespace harmony::executor {

using common::CallTorch;

absl::StatusOr<std::vector<c10::IValue>> Runtime::Impl::InputsOf(
    int k, const std::map<Ref, c10::IValue>& values, const Task& task) const {
  std::vector<c10::IValue> in;
  for (const common::ValueSource& s : Info(k).inputs) {
    const auto it = values.find({s.producer, s.index});
    if (it == values.end()) {
      return absl::InternalError(absl::StrCat(
          "task ", task.id, " (", task.kind == TaskKind::kBackward ? "backward" : "forward",
          " of vLayers ", task.vlayers.begin, "-", task.vlayers.end - 1, ") holds no ",
          s.producer < 0 ? absl::StrCat("argument ", s.index, " of forward")
                         : absl::StrCat("output ", s.index, " of vLayer ", s.producer),
          " for vLayer ", k, " (", Info(k).scope.empty() ? "the model" : Info(k).scope,
          "): it was not received or was dropped too early"));
    }
    in.push_back(it->second);
  }
  return in;
}

absl::StatusOr<std::vector<c10::IValue>> Runtime::Impl::RunVLayer(int d, int k, const DeviceWeights& w,
                                                   const std::vector<at::Tensor>& buffers,
                                                   const std::vector<c10::IValue>& in,
                                                   int offset,
                                                   const std::vector<at::Tensor>* override) {
  const std::vector<at::Tensor>& params =
      override != nullptr ? *override : w.params[k - w.range.begin];
  common::Autocast autocast(options.bf16.value_or(false), devices[d]->type());
  if (!Info(k).uses_rng) return dec->Run(k, params, buffers, in);
  const uint64_t seed =
      DropoutSeed(options.seed, iteration, options.world.rank * minibatch + offset, k);
  // Dropout on a CPU device draws from the thread's own generator; the
  // devices compute at once. Other random ops share the global one.
  if (!Info(k).global_rng && devices[d]->type() == c10::DeviceType::CPU) {
    common::DropoutGeneratorScope own(seed);
    return dec->Run(k, params, buffers, in);
  }
  std::lock_guard<std::mutex> lock(rng_mu);
  at::Generator gen = devices[d]->generator();
  {
    std::lock_guard<std::mutex> g(gen.mutex());
    gen.set_current_seed(seed);
  }
  return dec->Run(k, params, buffers, in);
}

absl::Status Runtime::Impl::Forward(const Task& t, int d, DeviceWeights& w, TaskInputs& inputs,
                     const std::function<void()>& first_inputs_in) {
  c10::NoGradGuard no_grad;
  // The kept packs this task computes (Config::keep): their vLayers run
  // with autograd on leaves of the weights, saving for their backward task.
  struct Keep {
    PackRange range;
    int back;
    std::shared_ptr<KeptWeights> weights;
  };
  std::vector<Keep> keeps;
  for (const Transfer& x : t.transfers) {
    if (x.kind != TransferKind::kKeptOut || x.microbatch != t.microbatches.front().index) continue;
    keeps.push_back({x.vlayers, x.peer_task, nullptr});
  }
  HARMONY_RETURN_IF_ERROR(CallTorch("kept weights", [&] {
    for (Keep& keep : keeps) keep.weights = KeptLeaves(w, keep.range);
  }));
  auto keep_of = [&](int k) -> Keep* {
    for (Keep& keep : keeps) {
      if (k >= keep.range.begin && k < keep.range.end) return &keep;
    }
    return nullptr;
  };
  // Microbatch m's kept activations leaving the device: microbatch m + 2
  // waits for them, so that at most two microbatches' are on it at once (as
  // the plan counts them).
  std::vector<std::vector<std::future<void>>> offloaded(t.microbatches.size());
  PendingSends pending(*this, t);
  for (size_t m = 0; m < t.microbatches.size(); ++m) {
    HARMONY_RETURN_IF_ERROR(pending.Before(m));
    const plan::Microbatch& mb = t.microbatches[m];
    std::map<Ref, c10::IValue> values;
    std::map<int, std::shared_ptr<KeptMicrobatch>> kept_now;  // By backward task.
    if (m >= 2) {
      const double wait = Now();
      for (std::future<void>& f : offloaded[m - 2]) f.wait();
      IterationCounters::AddSeconds(counters.wait_ns, Now() - wait);
      if (!completion.error().ok()) return completion.error();
    }
    HARMONY_RETURN_IF_ERROR(ReceiveInputs(t, d, mb, inputs.For(m), values, nullptr));
    if (m == 0) first_inputs_in();
    const double start = Now();
    // What leaves the task; everything else is dropped after its last
    // reader in the pack.
    std::set<Ref> sent;
    for (const Transfer& x : t.transfers) {
      if (x.microbatch != mb.index) continue;
      if (x.kind != TransferKind::kActivationsOut && x.kind != TransferKind::kStashOut) continue;
      HARMONY_ASSIGN_OR_RETURN(const std::vector<Ref>* route, routes.Of(t, x));
      sent.insert(route->begin(), route->end());
    }
    {
      auto scope = devices[d]->Place(absl::StrCat("task ", t.id, " (forward of vLayers ",
                                           t.vlayers.begin, "-", t.vlayers.end - 1,
                                           "), microbatch ", mb.index));
      for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
        HARMONY_ASSIGN_OR_RETURN(std::vector<c10::IValue> in, InputsOf(k, values, t));
        Keep* keep = keep_of(k);
        std::vector<c10::IValue> outs;
        if (keep == nullptr) {
          HARMONY_ASSIGN_OR_RETURN(outs, RunVLayer(d, k, w, w.buffers[k - w.range.begin], in,
                                                   mb.offset));
        } else {
          std::shared_ptr<KeptMicrobatch>& km = kept_now[keep->back];
          if (km == nullptr) {
            km = std::make_shared<KeptMicrobatch>();
            km->range = keep->range;
            km->weights = keep->weights;
          }
          HARMONY_ASSIGN_OR_RETURN(outs, RunKeptVLayer(d, k, w, std::move(in), mb.offset, *km));
        }
        for (size_t i = 0; i < outs.size(); ++i) values[{k, static_cast<int>(i)}] = outs[i];
        for (auto it = values.begin(); it != values.end();) {
          const bool later = routes.ReadBetween(it->first, k, dec->num_vlayers());
          if (!later && !sent.count(it->first) && it->first.first >= 0) {
            it = values.erase(it);
          } else {
            ++it;
          }
        }
        if (keep != nullptr && k == keep->range.end - 1) {
          HARMONY_RETURN_IF_ERROR(
              CallTorch("kept outputs", [&] { SealKept(*kept_now[keep->back], values); }));
        }
      }
    }
    // What it made leaves this thread.
    HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
    for (auto& [back, km] : kept_now) {
      offloaded[m].push_back(OffloadKept(t, d, mb, back, std::move(km)));
    }
    counters.AddCompute(d, Now() - start);
    Trace(d, kCompute, absl::StrCat("forward ", t.vlayers.begin, "-", t.vlayers.end - 1,
                                    " #", mb.index),
          start);
    HARMONY_RETURN_IF_ERROR(SendOutputs(t, d, mb, values, pending.Of(m)));
  }
  // The weights the kept vLayers ran on leave with the task's: their
  // leaves keep only their graph edges.
  return CallTorch("kept weights", [&] {
    for (Keep& keep : keeps) {
      for (auto& leaves : keep.weights->leaves) {
        for (at::Tensor& leaf : leaves) leaf.set_data(at::empty({0}, leaf.options()));
      }
    }
  });
}

std::map<Ref, at::Tensor> Runtime::Impl::SumOutputGradients(
    const std::vector<std::map<Ref, c10::IValue>>& incoming) {
  // Summed over the later packs that read them, the latest first, as
  // autograd would.
  std::map<Ref, at::Tensor> grads;
  for (auto it = incoming.rbegin(); it != incoming.rend(); ++it) {
    for (const auto& [ref, g] : *it) {
      if (!g.isTensor()) continue;
      at::Tensor& acc = grads[ref];
      acc = acc.defined() ? acc + g.toTensor() : g.toTensor();
    }
  }
  return grads;
}

absl::Status Runtime::Impl::ToFp32Gradients(DeviceWeights& w) const {
  if (!fp32_gradients) return absl::OkStatus();
  // fp32 from here on: the next microbatches' bf16 gradients are added
  // into them in fp32 (AccumulateGrad's +=).
  return CallTorch("fp32 gradients", [&] {
    for (const std::vector<at::Tensor>& ps : w.params) {
      for (const at::Tensor& p : ps) {
        if (p.grad().defined() && p.grad().scalar_type() == at::kBFloat16) {
          p.mutable_grad() = p.grad().to(at::kFloat);
        }
      }
    }
  });
}

absl::Status Runtime::Impl::Backward(const Task& t, int d, DeviceWeights& w, TaskInputs& inputs,
                      const std::function<void()>& first_inputs_in) {
  // Gradients accumulate over the task's microbatches from zero.
  for (auto& ps : w.params) {
    for (at::Tensor& p : ps) p.mutable_grad() = at::Tensor();
  }
  PendingSends pending(*this, t);
  for (size_t m = 0; m < t.microbatches.size(); ++m) {
    HARMONY_RETURN_IF_ERROR(pending.Before(m));
    const plan::Microbatch& mb = t.microbatches[m];
    std::map<Ref, c10::IValue> values;
    std::vector<std::map<Ref, c10::IValue>> incoming;
    std::shared_ptr<KeptMicrobatch> km;
    HARMONY_RETURN_IF_ERROR(ReceiveInputs(t, d, mb, inputs.For(m), values, &incoming, &km));
    if (m == 0) first_inputs_in();
    const double start = Now();
    std::map<Ref, c10::IValue> input_grads;
    if (graph.config.Keeps(t.pack)) {
      if (km == nullptr) {
        return absl::InternalError(absl::StrCat("task ", t.id, " keeps its activations but got "
                                                "none for microbatch ", mb.index));
      }
      auto scope = devices[d]->Place(absl::StrCat("task ", t.id, " (kept backward of vLayers ",
                                                  t.vlayers.begin, "-", t.vlayers.end - 1,
                                                  "), microbatch ", mb.index));
      std::map<Ref, at::Tensor> grads;
      HARMONY_RETURN_IF_ERROR(CallTorch("gradients in", [&] {
        grads = SumOutputGradients(incoming);
      }));
      HARMONY_RETURN_IF_ERROR(KeptBackward(t, w, *km, grads, input_grads));
      HARMONY_RETURN_IF_ERROR(ToFp32Gradients(w));
      km.reset();
    } else {
      auto scope = devices[d]->Place(absl::StrCat("task ", t.id, " (backward of vLayers ",
                                           t.vlayers.begin, "-", t.vlayers.end - 1,
                                           "), microbatch ", mb.index));
      // Live-ins from earlier vLayers become leaves.
      // Their gradients are handed on as autograd computed them
      // (common/leaf_gradients.h).
      std::map<Ref, at::Tensor> leaves;
      common::LeafGradients leaf_grads;
      HARMONY_RETURN_IF_ERROR(CallTorch("leaves", [&] {
        for (auto& [ref, v] : values) {
          if (ref.first < 0 || !v.isTensor()) continue;
          at::Tensor leaf = v.toTensor().detach();
          if (at::isFloatingType(leaf.scalar_type())) {
            leaf.requires_grad_(true);
            leaf_grads.Watch(leaf);
          }
          leaves[ref] = leaf;
          v = leaf;
        }
      }));
      // The outputs the backward starts from: the model's (a fused loss) or
      // those whose gradients came in. The pack's other outputs are dropped
      // after their last reader in the pack, as the forward drops them:
      // autograd keeps what it saved, and the vLayer's profile counts no more
      // (holding every output until the end cost resnet's fused backward
      // 9% beyond its first microbatch's profiled peak).
      std::set<Ref> roots_needed;
      if (t.fused_loss) {
        roots_needed.insert({dec->num_vlayers() - 1, 0});
      } else {
        for (const auto& in : incoming) {
          for (const auto& [ref, g] : in) roots_needed.insert(ref);
        }
      }
      c10::AutoGradMode grad_mode(true);
      for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
        // The fused forward updates the real buffers; a recompute, copies.
        std::vector<at::Tensor> buffers = w.buffers[k - w.range.begin];
        if (!t.fused_loss) {
          for (at::Tensor& b : buffers) b = b.clone();
        }
        HARMONY_ASSIGN_OR_RETURN(std::vector<c10::IValue> in, InputsOf(k, values, t));
        HARMONY_ASSIGN_OR_RETURN(std::vector<c10::IValue> outs,
                                 RunVLayer(d, k, w, buffers, in, mb.offset));
        for (size_t i = 0; i < outs.size(); ++i) values[{k, static_cast<int>(i)}] = outs[i];
        for (auto it = values.begin(); it != values.end();) {
          const Ref& ref = it->first;
          const bool here = ref.first >= t.vlayers.begin;  // Computed in this pack.
          const bool read_later = here && routes.ReadBetween(ref, k, t.vlayers.end);
          if (here && !read_later && !roots_needed.count(ref)) {
            it = values.erase(it);
          } else {
            ++it;
          }
        }
      }
      std::vector<at::Tensor> roots, root_grads;
      if (t.fused_loss) {
        HARMONY_ASSIGN_OR_RETURN(const c10::IValue* model_out, common::Lookup(values, Ref{dec->num_vlayers() - 1, 0}, [&] {
          return absl::StrCat("task ", t.id, ": the model's output (vLayer ", dec->num_vlayers() - 1, " output 0)");
        }));
        const c10::IValue& out = *model_out;
        if (!out.isTensor()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "forward returned ", out.type()->str(), ", expected a tensor"));
        }
        std::vector<at::Tensor> targets;
        if (!takes_targets()) {
          for (size_t i = 0; i < batch.targets.size(); ++i) {
            HARMONY_ASSIGN_OR_RETURN(const c10::IValue* target, common::Lookup(values, Ref{-2, static_cast<int>(i)}, [&] {
              return absl::StrCat("task ", t.id, ": target ", i);
            }));
            targets.push_back(target->toTensor());
          }
        }
        // The loss under the same autocast as the vLayers (cross-entropy in
        // fp32 on bf16 logits).
        std::optional<common::Autocast> autocast(std::in_place, options.bf16.value_or(false),
                                                 devices[d]->type());
        HARMONY_ASSIGN_OR_RETURN(
            at::Tensor loss,
            common::LossFromOutput(out.toTensor(), targets, takes_targets(), loss_kind));
        HARMONY_ASSIGN_OR_RETURN(at::Tensor scaled, CallTorch("loss", [&] {
          return loss * (static_cast<double>(mb.size) / minibatch);
        }));
        autocast.reset();
        const double value = scaled.item<double>();
        if (!std::isfinite(value)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the loss is ", value, " at iteration ", iteration, ", samples ", mb.offset,
              "-", mb.offset + mb.size - 1));
        }
        completion.AddLoss(mb.offset, value);
        roots.push_back(scaled);
        root_grads.push_back(at::ones_like(scaled));
      } else {
        std::map<Ref, at::Tensor> grads = SumOutputGradients(incoming);
        for (auto& [ref, g] : grads) {
          HARMONY_ASSIGN_OR_RETURN(const c10::IValue* held, common::Lookup(values, ref, [&] {
            return absl::StrCat("task ", t.id, " got a gradient for vLayer ", ref.first, " output ",
                                ref.second, ", but its value");
          }));
          const c10::IValue& out = *held;
          if (!out.isTensor() || !out.toTensor().requires_grad()) continue;
          roots.push_back(out.toTensor());
          root_grads.push_back(g);
        }
      }
      if (!roots.empty()) {
        HARMONY_RETURN_IF_ERROR(CallTorch(
            absl::StrCat("backward of vLayers ", t.vlayers.begin, "-", t.vlayers.end - 1),
            [&] {
              torch::autograd::backward(roots, root_grads);
            }));
        HARMONY_RETURN_IF_ERROR(ToFp32Gradients(w));
      }
      for (auto& [ref, leaf] : leaves) {
        if (!at::isFloatingType(leaf.scalar_type())) continue;
        at::Tensor g = leaf_grads.Take(leaf);
        input_grads[ref] = g.defined() ? g : at::zeros_like(leaf);
      }
      values.clear();
    }
    HARMONY_RETURN_IF_ERROR(devices[d]->Sync());
    counters.AddCompute(d, Now() - start);
    Trace(d, kCompute, absl::StrCat(t.fused_loss ? "forward+loss+backward " : "backward ",
                                    t.vlayers.begin, "-", t.vlayers.end - 1, " #",
                                    mb.index),
          start);
    HARMONY_RETURN_IF_ERROR(SendOutputs(t, d, mb, input_grads, pending.Of(m)));
    HARMONY_RETURN_IF_ERROR(GradientsOutAfter(t, d, w, mb.index));
  }
  return absl::OkStatus();
}

absl::Status Runtime::Impl::RunDevice(int d) {
  Device& dev = *devices[d];
  dev.StartCompute();
  common::SetCallingThreadIntraOpThreads(threads_per_device);
  common::ApplyFlushDenormal(flush_denormal);
  std::vector<int> list = graph.DeviceTasks(d);
  std::shared_ptr<DeviceWeights> kept;  // KEEP_RESIDENT from the previous task.
  std::map<int, std::future<WeightsResult>> prefetched;
  // The next task's host inputs, when this task started them early.
  std::unique_ptr<TaskInputs> next_inputs;
  absl::Status status;
  for (size_t position = 0; position < list.size(); ++position) {
    const int id = list[position];
    const Task& t = graph.tasks[id];
    if (options.cancelled && options.cancelled()) {
      status = absl::CancelledError("cancelled");
      break;
    }
    {
      // What the task two before this one copies out (gradients, buffers)
      // has left the device: the plan counts a task's copies out on the
      // device until the next task has computed, and a copy-out thread
      // starved of a core would otherwise hold them longer.
      const double copy_wait = Now();
      if (position >= 2) {
        const absl::Status copied = completion.WaitDone({list[position - 2]});
        IterationCounters::AddSeconds(counters.wait_ns, Now() - copy_wait);
        if (!copied.ok()) break;
      }
      if (!completion.error().ok()) break;
    }
    const std::string label = absl::StrCat("task ", id, " (", plan::TaskKindName(t.kind),
                                           " of vLayers ", t.vlayers.begin, "-",
                                           t.vlayers.end - 1, ")");
    // Inputs from the host: copied in from now on (or from the end of the
    // previous task's compute), while the weights come, a few microbatches
    // ahead of the compute.
    std::unique_ptr<TaskInputs> inputs =
        next_inputs ? std::move(next_inputs) : std::make_unique<TaskInputs>(*this, t, d);
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
      // In the room of the previous task's, which has finished.
      r = PostWeights(d, id, static_cast<int>(position) - 1, -1, label).get();
    }
    kept.reset();
    if (!r.ok()) {
      status = r.status();
      break;
    }
    w = *std::move(r);
    if (position >= 1) {
      // Weights this device's earlier tasks published (vDP peer weights)
      // have been copied by every device that takes them: the plan frees
      // them before this task computes (the simulator waits so too), and a
      // device running behind would otherwise keep them in this task's
      // room and push the device over its memory.
      const double room_wait = Now();
      absl::StatusOr<int> waited_for = peer_weights->WaitForRoom(d, static_cast<int>(position) - 1);
      if (!waited_for.ok()) {
        status = waited_for.status();
        break;
      }
      if (*waited_for >= 0) {
        IterationCounters::AddSeconds(counters.peer_wait_ns, Now() - room_wait);
        Trace(d, kCompute, absl::StrCat("room for ", label, ": copies of task ", *waited_for),
              room_wait);
      }
    }
    IterationCounters::AddSeconds(counters.wait_ns, Now() - wait_start);
    if (options.before_task) options.before_task(d, id);
    // Prefetch the next task's weights during this one, once its first
    // microbatch has its inputs (which need the link first).
    auto prefetch = [&] {
      for (const Transfer& x : t.transfers) {
        if (x.kind != TransferKind::kPrefetchWeights) continue;
        const Task& next = graph.tasks[x.peer_task];
        // In the room of the task before this one, which has finished.
        prefetched[next.id] =
            PostWeights(d, next.id, static_cast<int>(position) - 1,
                        position >= 1 ? list[position - 1] : -1, absl::StrCat("task ", next.id));
      }
    };
    // After a backward that reduces (vDP), the next backward's first host
    // inputs copy in during this one's last microbatches (TaskInputs::
    // Follow), once what this device's previous task copies out has left
    // (the next task's own rule, below); not a kept pack's activations.
    if (t.kind == TaskKind::kBackward && plan::ReducesGradients(t) &&
        position + 1 < list.size()) {
      const Task& next = graph.tasks[list[position + 1]];
      if (next.kind == TaskKind::kBackward && !graph.config.Keeps(next.pack)) {
        next_inputs = std::make_unique<TaskInputs>(*this, next, d, /*start=*/false);
        const int before = position >= 1 ? list[position - 1] : -1;
        inputs->Follow(next_inputs.get(), [this, before] {
          return before < 0 || completion.AllDone({before});
        });
      }
    }
    // Exceptions stop here: a plan that does not fit the model (a value
    // a vLayer needs and nobody sent) must not take the process down.
    try {
      status = t.kind == TaskKind::kForward ? Forward(t, d, *w, *inputs, prefetch)
                                            : Backward(t, d, *w, *inputs, prefetch);
      if (status.ok() && t.kind == TaskKind::kBackward) {
        // The next task's host inputs copy in from now, while this task's
        // gradients are reduced (a wait for the other devices) and sent out:
        // the plan holds their bytes beside this task's from here. First,
        // the next task's own rule: what this device's previous task copies
        // out has left. Without a reduce to wait for, they come after this
        // task's weights are freed (the next task's start, below), as the
        // plan has them: copied in beside the weights, a kept pack's
        // activations went over the device's memory when this thread was
        // slow to free them.
        if (plan::ReducesGradients(t) && position + 1 < list.size()) {
          if (position >= 1) {
            const double copy_wait = Now();
            status = completion.WaitDone({list[position - 1]});
            IterationCounters::AddSeconds(counters.wait_ns, Now() - copy_wait);
          }
          if (status.ok()) {
            if (next_inputs) {
              next_inputs->Start();  // Those not yet copied in early.
            } else {
              next_inputs =
                  std::make_unique<TaskInputs>(*this, graph.tasks[list[position + 1]], d);
            }
          }
        }
        if (status.ok()) status = FinishBackward(t, d, *w);
      }
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
          counters.gradients_out += bytes;
          Trace(d, kSwapOut, absl::StrCat("buffers out task ", id), start);
        });
      }
      if (x.kind == TransferKind::kKeepResident) kept = w;
    }
    // The task is done when what it copies out has arrived.
    dev.copy_out().Post([this, id] { completion.MarkDone(id); });
  }
  // Copies still queued for a failed iteration stop at the error.
  if (!status.ok()) Fail(status);
  dev.copy_in().Drain();
  dev.weights().Drain();
  dev.copy_out().Drain();
  return status;
}

}  // namespace harmony::executor
