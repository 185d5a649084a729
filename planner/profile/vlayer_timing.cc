#include "planner/profile/vlayer_timing.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "absl/strings/str_cat.h"
#include "common/autocast.h"
#include "common/intra_op_threads.h"
#include "common/model_output.h"
#include "common/saved_tensors.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "planner/profile/machine.h"
#include "planner/profile/step_barrier.h"
#include "planner/profile/vlayer_step.h"

namespace harmony::planner::timing {

using machine::Median;
using machine::Now;

std::vector<c10::IValue> Context::InputsOf(int k) const {
  std::vector<c10::IValue> in;
  for (const common::ValueSource& s : d->vlayers()[k].inputs) {
    in.push_back(s.producer < 0 ? model_args.at(s.index) : outputs[s.producer].at(s.index));
  }
  return in;
}

absl::StatusOr<uint64_t> KeptBytes(const Context& c, int k) {
  common::InstallSavedTensorHooks();
  uint64_t bytes = 0;
  HARMONY_RETURN_IF_ERROR(common::CallTorch(absl::StrCat("vLayer ", k, "'s kept activations"), [&] {
    const std::vector<common::ValueSource>& sources = c.d->vlayers()[k].inputs;
    std::vector<c10::IValue> inputs = c.InputsOf(k);
    for (size_t i = 0; i < inputs.size() && i < sources.size(); ++i) {
      if (sources[i].producer < 0 || !inputs[i].isTensor() ||
          !at::isFloatingType(inputs[i].toTensor().scalar_type())) {
        continue;
      }
      inputs[i] = inputs[i].toTensor().detach().requires_grad_(true);
    }
    std::vector<at::Tensor> params, buffers;
    for (const at::Tensor& t : c.params[k]) {
      at::Tensor leaf = t.detach();
      if (at::isFloatingType(leaf.scalar_type())) leaf.requires_grad_(true);
      params.push_back(leaf);
    }
    for (const at::Tensor& b : c.buffers[k]) buffers.push_back(b.clone());
    auto saved = std::make_shared<common::SavedTensors>(params);
    c10::AutoGradMode grad_mode(true);
    common::Autocast autocast(c.bf16);
    {
      common::SaveInto into(saved);
      absl::StatusOr<std::vector<c10::IValue>> out = c.d->Run(k, params, buffers, inputs);
      if (!out.ok()) throw std::runtime_error(std::string(out.status().message()));
    }
    bytes = saved->bytes();
  }));
  return bytes;
}

absl::Status OutputGradients(Context& c) {
  const int n = c.d->num_vlayers();
  if (static_cast<int>(c.outputs.size()) != n) {
    return absl::InternalError("OutputGradients: the forward chain has not run");
  }
  c.output_grads.assign(n, {});
  for (int k = 0; k < n; ++k) c.output_grads[k].resize(c.outputs[k].size());
  return common::CallTorch("the backward of the sample input", [&] {
    c10::AutoGradMode grad_mode(true);
    common::Autocast autocast(c.bf16);
    for (int k = n - 1; k >= 0; --k) {
      const std::vector<common::ValueSource>& sources = c.d->vlayers()[k].inputs;
      std::vector<c10::IValue> inputs = c.InputsOf(k);
      std::vector<at::Tensor> leaves;
      std::vector<int> leaf_of;  // Index into `sources` of each leaf.
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (sources[i].producer < 0 || !inputs[i].isTensor() ||
            !at::isFloatingType(inputs[i].toTensor().scalar_type())) {
          continue;
        }
        at::Tensor leaf = inputs[i].toTensor().detach().requires_grad_(true);
        inputs[i] = leaf;
        leaves.push_back(leaf);
        leaf_of.push_back(static_cast<int>(i));
      }
      if (leaves.empty()) continue;  // Nothing earlier needs a gradient.
      std::vector<at::Tensor> buffers;
      for (const at::Tensor& b : c.buffers[k]) buffers.push_back(b.detach().clone());
      absl::StatusOr<std::vector<c10::IValue>> out = c.d->Run(k, c.params[k], buffers, inputs);
      if (!out.ok()) throw std::runtime_error(std::string(out.status().message()));
      const BackwardRoots r = RootsOf(c, k, *out, c.targets, &c.output_grads[k]);
      if (r.roots.empty()) continue;
      std::vector<at::Tensor> in_grads = torch::autograd::grad(
          r.roots, leaves, r.grads, /*retain_graph=*/false, /*create_graph=*/false,
          /*allow_unused=*/true);
      for (size_t l = 0; l < leaves.size(); ++l) {
        if (!in_grads[l].defined()) continue;
        const common::ValueSource& s = sources[leaf_of[l]];
        if (s.index < 0 || s.index >= static_cast<int>(c.output_grads[s.producer].size())) {
          throw std::runtime_error(absl::StrCat("vLayer ", k, " reads output ", s.index,
                                                " of vLayer ", s.producer, ", which has ",
                                                c.output_grads[s.producer].size()));
        }
        at::Tensor& acc = c.output_grads[s.producer][s.index];
        acc = acc.defined() ? acc + in_grads[l] : in_grads[l];
      }
    }
  });
}

// One run of vLayer k's forward (or recompute + backward) with its weights
// and inputs copied onto `device` (a fresh one of the given capacity when
// null). Repeats share a device, so that they reuse its cache of freed
// storages as the runtime's devices do from their second iteration on: a
// fresh allocation of a large activation costs page faults the runtime
// does not pay (at microbatch 64 of a 34 MiB GPT, 0.3 s of 2.1 s).
absl::StatusOr<Measurement> RunOnce(const Context& c, int k, bool backward, int64_t u,
                                    bool with_gradients, Target::Meter* device) {
  std::unique_ptr<Target::Meter> fresh;
  if (device == nullptr) {
    fresh = c.target->NewMeter(c.capacity);
    device = fresh.get();
  }
  Target::Meter& memory = *device;
  memory.ResetPeak();
  Measurement m;
  double elapsed = 0;
  const std::string activity = absl::StrCat("vLayer ", k, backward ? " backward" : " forward",
                                            ", microbatch ", u);
  absl::Status status = common::CallTorch("", [&] {
    std::unique_ptr<Target::Scope> scope = memory.Enter(0, Target::Role::kCompute, activity);
    Prepared p = Prepare(c, k, backward, with_gradients);
    elapsed = Execute(c, k, backward, p, &memory, &m.saved);
  });
  if (status.ok()) status = memory.CheckPeak(activity);
  if (absl::IsResourceExhausted(status)) {
    m.fits = false;
    m.peak = memory.peak();
    m.error = std::string(status.message());
    return m;
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vLayer ", k, backward ? " backward" : " forward", " at microbatch ",
        u, " failed", status.message()));
  }
  m.fits = true;
  m.time_s = elapsed;
  m.peak = memory.peak();
  return m;
}

// Median of `repeats` runs, after a warm-up run when `warm_up` (a vLayer's
// first call is the slow one; later sizes need none). repeats 0: one run,
// memory only.
absl::StatusOr<Measurement> Measure(const Context& c, int k, bool backward, int64_t u,
                                    int repeats, bool warm_up) {
  std::unique_ptr<Target::Meter> device = c.target->NewMeter(c.capacity);
  HARMONY_ASSIGN_OR_RETURN(Measurement first, RunOnce(c, k, backward, u, true, device.get()));
  if (!first.fits && backward) {
    // Too large beside the gradients it accumulates into (an embedding
    // table's: its weights, their sum and the next microbatch's fresh dense
    // gradient). Summed on the host after each microbatch it needs only a
    // first microbatch's peak: when that fits the cap, what it needs beside
    // the sum is measured without the cap, for the planner to weigh.
    HARMONY_ASSIGN_OR_RETURN(Measurement fresh, RunOnce(c, k, backward, u, false));
    if (!fresh.fits) return first;
    Context uncapped = c;
    uncapped.capacity = std::numeric_limits<uint64_t>::max() / 4;
    device = c.target->NewMeter(uncapped.capacity);
    HARMONY_ASSIGN_OR_RETURN(first, RunOnce(uncapped, k, backward, u, true, device.get()));
    if (!first.fits) return first;
    first.first_peak = fresh.peak;
  } else if (!first.fits) {
    return first;
  } else if (backward) {  // A task's first microbatch: memory only.
    HARMONY_ASSIGN_OR_RETURN(Measurement fresh, RunOnce(c, k, backward, u, false));
    first.first_peak = fresh.peak;
  }
  if (repeats == 0) return first;
  std::vector<double> times;
  if (!warm_up) {
    times.push_back(first.time_s);
    --repeats;
  }
  for (int r = 0; r < repeats; ++r) {
    HARMONY_ASSIGN_OR_RETURN(Measurement m, RunOnce(c, k, backward, u, true, device.get()));
    times.push_back(m.time_s);
    first.peak = std::max(first.peak, m.peak);
    first.saved = std::max(first.saved, m.saved);
  }
  first.time_s = Median(times);
  return first;
}

namespace {

// One step of a device's work: vLayer k's forward, or its forward and
// backward.
struct Step {
  int k = 0;
  bool backward = false;
  bool beside = false;  // Computed beside the other lanes (at the barrier).
  bool pair = false;    // vLayers k and k + 1 as one task (ExecutePair).
};

// Runs `steps` as a device of the runtime does: a copy thread copies each
// step's weights and inputs onto the device one step ahead (the prefetch)
// while the calling thread computes the step before, so the compute reads
// what another core wrote, beside that core's copying. Returns each step's
// compute seconds. With `barrier`, lane 0 (the timed one) runs steps in
// pairs, alone then beside the other lanes (MeasureInTurn), and each of the
// others runs the second of each pair: it waits, its copies out done, while
// lane 0 runs the first, then its compute starts when lane 0's does. A lane
// that stops early leaves the barrier. With `handoffs`, each gap from a
// step's end to the next one's start (the barrier left out) where the next
// step was ready when the compute thread came for it.
absl::StatusOr<std::vector<double>> RunPipelined(const Context& c, const std::vector<Step>& steps,
                                                 StepBarrier* barrier, int lane,
                                                 std::vector<double>* handoffs = nullptr) {
  const int threads = common::CallingThreadIntraOpThreads();  // The device's share.
  const bool bounded_out = c.target->kind() != "cpu";
  // Fits were measured already: no cap here (two steps' copies at once).
  std::unique_ptr<Target::Meter> memory =
      c.target->NewMeter(std::numeric_limits<uint64_t>::max() / 4);
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<Prepared>> ready;  // A step's vLayers.
  bool done = false;
  absl::Status copy_status;
  std::thread copier([&] {
    common::SetCallingThreadIntraOpThreads(threads);
    std::unique_ptr<Target::Scope> scope = memory->Enter(lane, Target::Role::kCopyIn, "copies");
    for (const Step& step : steps) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return ready.empty() || done; });
        if (done) return;
      }
      std::vector<Prepared> parts;
      absl::Status s = common::CallTorch("", [&] {
        for (int k = step.k; k <= step.k + (step.pair ? 1 : 0); ++k) {
          parts.push_back(Prepare(c, k, step.backward, /*with_gradients=*/true));
        }
      });
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        copy_status = s;
        done = true;
      } else {
        ready.push_back(std::move(parts));
      }
      cv.notify_all();
      if (done) return;
    }
  });
  // What a step made leaves the device on a third thread, as the
  // runtime's copy-out does: a forward's outputs, a backward's gradients
  // (added into the host's, as HostStore::AddGradients does).
  std::deque<Prepared> finished;
  bool copying_out = false;  // One taken from `finished` is being copied.
  bool finishing = false;
  std::thread copy_out([&] {
    common::SetCallingThreadIntraOpThreads(threads);
    std::unique_ptr<Target::Scope> scope =
        memory->Enter(lane, Target::Role::kCopyOut, "copies out");
    std::map<std::pair<int, size_t>, at::Tensor> host_grads;
    while (true) {
      Prepared p;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !finished.empty() || finishing; });
        if (finished.empty()) return;
        p = std::move(finished.front());
        finished.pop_front();
        copying_out = true;
        cv.notify_all();
      }
      common::CallTorch("", [&] {
        c10::NoGradGuard no_grad;
        for (const c10::IValue& v : p.outputs) {
          if (v.isTensor()) c.target->ToHost(v.toTensor());
        }
        for (size_t j = 0; j < p.params.size(); ++j) {
          const at::Tensor& g = p.params[j].grad();
          if (!g.defined()) continue;
          at::Tensor& acc = host_grads[{p.k, j}];
          at::Tensor copy = c.target->ToHost(g);
          if (acc.defined()) {
            acc.add_(copy);
          } else {
            acc = copy;
          }
        }
      }).IgnoreError();
      std::lock_guard<std::mutex> lock(mu);
      copying_out = false;
      cv.notify_all();
    }
  });
  std::vector<double> times;
  absl::Status status;
  double previous_end = -1;  // Of the step before, once computed.
  {
    std::unique_ptr<Target::Scope> scope =
        memory->Enter(lane, Target::Role::kCompute, "compute");
    for (const Step& step : steps) {
      std::vector<Prepared> parts;
      bool was_ready = false;
      {
        std::unique_lock<std::mutex> lock(mu);
        was_ready = !ready.empty();
        cv.wait(lock, [&] { return !ready.empty() || done; });
        if (ready.empty()) break;  // The copier failed.
        parts = std::move(ready.front());
        ready.pop_front();
        cv.notify_all();
      }
      if (barrier != nullptr && lane > 0) {
        // Before the timed lane's step alone: this lane's copies out are
        // done, so that they do not run beside it.
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return finished.empty() && !copying_out; });
        }
        if (!barrier->Arrive()) break;
      }
      if (handoffs != nullptr && was_ready && previous_end >= 0) {
        handoffs->push_back(Now() - previous_end);
      }
      if (barrier != nullptr && !barrier->Arrive()) break;
      double t = 0;
      status = common::CallTorch("", [&] {
        t = step.pair ? ExecutePair(c, step.backward, parts[0], parts[1])
                      : Execute(c, step.k, step.backward, parts[0]);
      });
      if (!status.ok()) break;
      times.push_back(t);
      previous_end = Now();
      std::unique_lock<std::mutex> lock(mu);
      // On a GPU a step waits (untimed) while the copy-out is two behind,
      // as a device of the runtime holds only its own tasks' tensors: an
      // unbounded queue of weights and gradients can fill the GPU until the
      // caching allocator flushes its cache (a device-wide synchronisation)
      // mid-pass; the likely cause of 50-180 ms spikes on vLayers of 0.1-14
      // ms (GPT-2 XL on an H100, 11-27; not yet rerun).
      cv.wait(lock, [&] { return !bounded_out || finished.size() < 2; });
      for (Prepared& p : parts) finished.push_back(std::move(p));
      cv.notify_all();
    }
  }
  if (barrier != nullptr && times.size() < steps.size()) barrier->Leave();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    ready.clear();
    cv.notify_all();
  }
  copier.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    finishing = true;
    cv.notify_all();
  }
  copy_out.join();
  HARMONY_RETURN_IF_ERROR(copy_status);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing the vLayers in turn failed: ", status.message()));
  }
  return times;
}

// The simulator adds the durations up, so what it needs of a vLayer is the
// expected time, slow calls included: a median drops the tail the runtime
// pays (on the bench's vgg config the per-invocation means are 45-75 us
// above the medians), and over 3 passes it also swings more from one
// profile to the next than the mean does.
double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// `c` with its host tensors in pinned memory, as the runtime's host store
// keeps a GPU's weights: from pageable memory each copy to the device is
// staged by the driver at a fraction of the link (7.9 GB/s against 54 on an
// H100), so busy neighbours wait for their copies more than they compute:
// part of why a GPT-2 XL vLayer beside 3 busy partitions of an H100 timed
// 0.86x its time alone, where training measured 2.9x (pinned on the H200,
// 11-28: 3.29x forward, 1.18x backward; the rest was the neighbours'
// timing, MeasureInTurn).
Context Pinned(const Context& c) {
  Context p = c;
  auto pin = [](at::Tensor& t) {
    if (t.defined() && !t.is_cuda()) {
      const bool grad = t.requires_grad();
      t = t.detach().pin_memory();
      if (grad) t.requires_grad_(true);
    }
  };
  auto pin_value = [&](c10::IValue& v) {
    if (!v.isTensor()) return;
    at::Tensor t = v.toTensor();
    pin(t);
    v = t;
  };
  for (auto& ts : p.params) for (at::Tensor& t : ts) pin(t);
  for (auto& ts : p.buffers) for (at::Tensor& t : ts) pin(t);
  for (at::Tensor& t : p.targets) pin(t);
  for (auto& ts : p.output_grads) for (at::Tensor& t : ts) pin(t);
  for (c10::IValue& v : p.model_args) pin_value(v);
  for (auto& vs : p.outputs) for (c10::IValue& v : vs) pin_value(v);
  return p;
}

}  // namespace

absl::StatusOr<TurnTimes> MeasureInTurn(const Context& given, int repeats, int others,
                                        const std::vector<bool>& forward_fits,
                                        const std::vector<bool>& backward_fits) {
  std::optional<Context> pinned;
  if (given.target->pins_host_memory()) {
    HARMONY_RETURN_IF_ERROR(common::CallTorch("pinning the vLayers' host tensors",
                                              [&] { pinned = Pinned(given); }));
  }
  const Context& c = pinned ? *pinned : given;
  const int n = c.d->num_vlayers();
  // Every other pair of vLayers that a task can run together (k even:
  // (0, 1), (2, 3), ...) is also timed as one task, right after the second
  // of the two in the pass: what a pack's later vLayers take beside their
  // times in turn (TurnTimes::forward_chained).
  auto pairs = [&](int k, const std::vector<bool>& fits) {
    return k % 2 == 0 && k + 1 < n && fits[k] && fits[k + 1] && OnlyReaderIsNext(*c.d, k);
  };
  std::vector<Step> one_pass;
  for (int k = 0; k < n; ++k) {
    if (forward_fits[k]) one_pass.push_back({k, false});
    if (k > 0 && pairs(k - 1, forward_fits)) one_pass.push_back({k - 1, false, false, true});
  }
  for (int k = n - 1; k >= 0; --k) {
    if (backward_fits[k]) one_pass.push_back({k, true});
    if (pairs(k, backward_fits)) one_pass.push_back({k, true, false, true});
  }
  // Lane 0 runs each step alone and, with others, at once again beside
  // them (the others wait at the barrier meanwhile), so that both times of
  // a step are taken within milliseconds of each other. Timed in separate
  // passes a second apart, the ratio of the two swung 1.06-1.85x from one
  // profile to the next on the 2-core Intel bench VM, whose speed drifts.
  std::vector<Step> steps, beside_steps;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    for (const Step& s : one_pass) {
      steps.push_back(s);
      if (others > 0) {
        steps.push_back({s.k, s.backward, true, s.pair});
        beside_steps.push_back(steps.back());
      }
    }
  }
  // On a GPU every device first pays what the runtime pays once, in its
  // first iteration: a cuBLAS workspace for each new thread and stream, the
  // caching allocator's first cudaMalloc of each size. In the mean of a few
  // passes that was 10-60x a vLayer's time (H100: ln_f's backward 53 ms in
  // turn against 0.4 ms alone). So there each device runs one untimed pass
  // first. A virtual CPU device has none of that (it reuses freed storages
  // from the first pass on).
  const bool warm_up = c.target->kind() != "cpu";
  // Beside `others`, every lane computes the same step at the same time,
  // and a step's time is the mean of the lanes'. Neighbours that ran their
  // own passes freely were busy at random moments: beside 3 partitions of
  // one H200, GPT-2 XL's blocks read 1.4-8.6x their time alone forward and
  // 1.0-1.5x backward, where its vDP training (the devices side by side on
  // the same tasks) computed 3.1x its time alone (11-28).
  const int lanes = others + 1;
  StepBarrier barrier(lanes);
  std::vector<absl::StatusOr<std::vector<double>>> times(lanes, std::vector<double>());
  std::vector<double> handoffs;  // Lane 0's.
  auto run_lane = [&](int lane) {
    if (warm_up) times[lane] = RunPipelined(c, one_pass, nullptr, lane);
    if (!times[lane].ok()) {
      barrier.Leave();
      return;
    }
    times[lane] = RunPipelined(c, lane == 0 ? steps : beside_steps,
                               others > 0 ? &barrier : nullptr, lane,
                               lane == 0 ? &handoffs : nullptr);
  };
  std::vector<std::thread> neighbours;
  const int threads = common::CallingThreadIntraOpThreads();
  for (int lane = 1; lane < lanes; ++lane) {
    neighbours.emplace_back([&, lane] {
      common::SetCallingThreadIntraOpThreads(threads);
      run_lane(lane);
    });
  }
  run_lane(0);
  for (std::thread& t : neighbours) t.join();
  if (!times[0].ok()) return times[0].status();
  for (int lane = 1; lane < lanes; ++lane) {
    if (!times[lane].ok()) {
      return absl::InternalError(absl::StrCat("timing the vLayers beside ", others,
                                              " busy devices: device ", lane, " stopped: ",
                                              times[lane].status().message()));
    }
  }
  for (int lane = 0; lane < lanes; ++lane) {
    const size_t want = lane == 0 ? steps.size() : beside_steps.size();
    if (times[lane]->size() != want) {
      return absl::InternalError(absl::StrCat("timing the vLayers in turn: device ", lane,
                                              " stopped after ", times[lane]->size(), " of ",
                                              want, " steps"));
    }
  }
  // Per vLayer, the passes' times alone and beside (the mean of the lanes'),
  // and of the pairs that start at it.
  std::vector<std::vector<double>> f(n), b(n), fb(n), bb(n), pf(n), pb(n), pfb(n), pbb(n);
  size_t beside = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    double time = (*times[0])[i];
    if (s.beside) {
      time = 0;
      for (int lane = 0; lane < lanes; ++lane) {
        time += (lane == 0 ? (*times[0])[i] : (*times[lane])[beside]) / lanes;
      }
      ++beside;
    }
    auto& to = s.pair ? (s.beside ? (s.backward ? pbb : pfb) : (s.backward ? pb : pf))
                      : (s.beside ? (s.backward ? bb : fb) : (s.backward ? b : f));
    to[s.k].push_back(time);
  }
  TurnTimes t;
  if (others > 0) t.beside.emplace();
  for (int k = 0; k < n; ++k) {
    t.alone.forward.push_back(Mean(f[k]));
    t.alone.backward.push_back(Mean(b[k]));
    if (others > 0) {
      t.beside->forward.push_back(Mean(fb[k]));
      t.beside->backward.push_back(Mean(bb[k]));
    }
  }
  // What the second of each pair added to the first's time in turn, over
  // its own: alone and beside together.
  auto chained = [&](const std::vector<std::vector<double>>& pair,
                     const std::vector<std::vector<double>>& single) -> std::optional<double> {
    double added = 0, own = 0;
    for (int k = 0; k + 1 < n; ++k) {
      if (pair[k].empty()) continue;
      added += Mean(pair[k]) - Mean(single[k]);
      own += Mean(single[k + 1]);
    }
    if (!(own > 0)) return std::nullopt;
    return added / own;
  };
  auto factor = [](std::optional<double> alone, std::optional<double> beside) {
    if (!alone) return 1.0;
    // Alone and beside weigh the same; a factor is at most 1 (a task's
    // later vLayer does not take longer than in turn: above is noise) and at
    // least kLeastChained.
    const double mean = beside ? (*alone + *beside) / 2 : *alone;
    return std::clamp(mean, kLeastChained, 1.0);
  };
  // The mean, as the simulator adds them up (the median was 0.4-0.8x it
  // on vgg: a third of the gaps far longer than the rest).
  t.step_handoff_s = Mean(handoffs);
  t.forward_chained = factor(chained(pf, f), others > 0 ? chained(pfb, fb) : std::nullopt);
  t.backward_chained = factor(chained(pb, b), others > 0 ? chained(pbb, bb) : std::nullopt);
  return t;
}


}  // namespace harmony::planner::timing
