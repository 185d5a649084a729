// Runtime::Impl: the runtime's state and its task runner, shared by the
// files that implement it (internal to executor/runtime):
//   - runtime.cc: Create (plan checks, model, routes), SetData, RunIteration,
//     Evaluate and the rest of the public API;
//   - weights_io.cc: a task's weights in (from the host or a peer device)
//     and its gradients and buffers out;
//   - task_runner.cc: routes, vLayers, forward / backward tasks,
//     each device's task list, the host's updates;
//   - microbatch_io.cc: a microbatch's inputs and outputs over the host
//     link and between devices.
//
// Thread-safety: see runtime.h; the per-iteration state is guarded by `mu`
// where several threads reach it.

#ifndef HARMONY_EXECUTOR_RUNTIME_RUNTIME_IMPL_H_
#define HARMONY_EXECUTOR_RUNTIME_RUNTIME_IMPL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <torch/csrc/autograd/edge.h>
#include <torch/script.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/decomposer.h"
#include "common/loss.h"
#include "common/saved_tensors.h"
#include "common/tensor_file.h"
#include "executor/runtime/data_loader.h"
#include "executor/runtime/device.h"
#include "executor/runtime/evaluation.h"
#include "executor/runtime/host_link.h"
#include "executor/runtime/host_store.h"
#include "executor/runtime/host_updates.h"
#include "executor/runtime/gradient_reduction.h"
#include "executor/runtime/mailbox.h"
#include "executor/runtime/peer_weights.h"
#include "executor/runtime/routes.h"
#include "executor/runtime/task_completion.h"
#include "executor/runtime/runtime.h"
#include "executor/runtime/trace.h"
#include "plan/plan_reader.h"

namespace harmony::executor {

struct Runtime::Impl {
  using Channel = plan::Channel;
  using PackRange = plan::PackRange;
  using Task = plan::Task;
  using TaskGraph = plan::TaskGraph;
  using TaskKind = plan::TaskKind;
  using Transfer = plan::Transfer;
  using TransferKind = plan::TransferKind;

  // A pack's weights on a device.
  struct DeviceWeights {
    PackRange range;
    std::vector<std::vector<at::Tensor>> params, buffers;  // Per vLayer of range.
  };
  using WeightsResult = absl::StatusOr<std::shared_ptr<DeviceWeights>>;

  // A kept pack (plan::Config::keep) in its forward task: the parameters
  // its vLayers ran on, as autograd leaves of their own (per vLayer of the
  // range), whose data is released when the forward task ends; the
  // backward's gradients are read at their edges.
  struct KeptWeights {
    PackRange range;
    std::vector<std::vector<at::Tensor>> leaves;
  };
  // One microbatch of a kept pack, from its forward task to its backward
  // task: what autograd saved per vLayer, the outputs the backward starts
  // from (their graph edges), and the live-ins from before the pack (leaves,
  // their data released) whose gradients it sends back.
  struct KeptMicrobatch {
    PackRange range;
    std::shared_ptr<KeptWeights> weights;
    std::vector<std::shared_ptr<common::SavedTensors>> saved;  // Per vLayer of range.
    std::map<Ref, torch::autograd::Edge> roots;
    struct Leaf {
      at::Tensor tensor;
      std::vector<int64_t> sizes;
      at::TensorOptions options;
    };
    std::map<Ref, Leaf> leaves;
    uint64_t bytes() const {
      uint64_t total = 0;
      for (const auto& s : saved) total += s->bytes();
      return total;
    }
  };

  RuntimeOptions options;
  int threads_per_device = 1;  // Intra-op threads of each device's compute thread.
  bool flush_denormal = false;  // RuntimeOptions::flush_denormal, resolved.
  proto::Plan plan;
  TaskGraph graph;
  torch::jit::Module model;
  std::unique_ptr<common::Decomposition> dec;
  // A bf16 plan's: per vLayer and parameter, whether the devices take it as
  // bf16 (common/precision.h); empty in fp32.
  std::vector<std::vector<bool>> bf16_params;
  // A bf16 plan's Configuration.fp32_gradients: bf16 parameters' gradients
  // become fp32 after each backward, so later microbatches sum into them
  // in fp32 and they return in fp32.
  bool fp32_gradients = false;
  // Every parameter and buffer name -> the name vLayers use (tied weights).
  std::map<std::string, std::string> aliases;
  common::LossKind loss_kind = common::LossKind::kAuto;
  // The rows of its first embedding table (0: none): token ids from a token
  // file must be below it.
  int64_t vocab = 0;
  std::unique_ptr<HostStore> host;
  std::vector<std::unique_ptr<Device>> devices;
  // What travels between tasks (immutable after Create).
  Routes routes;
  // vDP: the tasks whose gradients each summing task (device 0's, one per
  // pack and wave) takes, in task order (their GRADIENT_REDUCE to it).
  std::map<int, std::vector<int>> reduce_senders;
  // Per vLayer, each gradient send's place in the host's sum
  // (plan::GradientSumOrder): runs of a plan sum alike.
  std::vector<std::map<std::pair<int, int>, int>> gradient_sum_order;
  // The host's update thread's part: the update order, the schedule,
  // clipping (runtime_recipe.cc sets it up).
  std::unique_ptr<HostUpdates> updates;
  // vDP weights copied from another device (WEIGHTS_IN over PEER).
  std::unique_ptr<PeerWeights> peer_weights;
  // The training data and its minibatches; the evaluation's
  // (executor/runtime/data_loader.h, evaluation.h).
  MinibatchLoader train_data, eval_data;
  std::unique_ptr<Evaluator> evaluator;
  int64_t iteration = 0;
  int minibatch = 0;

  std::unique_ptr<HostLink> link;  // Emulated or not: the clock.
  std::unique_ptr<TraceRecorder> tracer;

  std::mutex rng_mu;  // The global CPU generator, for vLayers with dropout.

  // --- Per iteration.
  // Which tasks are done, the first error, the losses.
  TaskCompletion completion;
  Mailbox mail{[this](const Ref& r, const c10::IValue& v, int size) {
    return routes.IsBatched(r, v, size);
  }};
  // vDP: the devices' gradients summed before an update.
  GradientReduction reduction;
  // Kept microbatches on the host, by (backward task, microbatch index);
  // the mailbox (KEPT_OUT) says when one has arrived.
  std::mutex kept_mu;
  std::map<std::pair<int, int>, std::shared_ptr<KeptMicrobatch>> kept;  // Guarded by kept_mu.
  // The minibatch: forward's arguments (the inputs, plus the targets when
  // forward takes them) and the targets.
  Minibatch batch;
  bool takes_targets() const { return train_data.takes_targets(); }
  IterationCounters counters;

  double Now() const { return link->Now(); }

  void Trace(int device, TraceStream stream, std::string name, double start) {
    if (tracer->on()) tracer->Add(device, stream, std::move(name), start, Now());
  }

  // Holds the caller until `bytes` have crossed the (emulated) host link
  // to the devices (0) or to the host (1), counting from `since`.
  void Link(int direction, uint64_t bytes, double since) {
    link->Cross(direction == 0 ? LinkDirection::kToDevice : LinkDirection::kToHost, bytes, since);
  }

  // Ends the iteration: every part's waits end with Cancelled.
  void Fail(const absl::Status& s) {
    completion.Fail(s);
    mail.Stop();
    if (peer_weights != nullptr) peer_weights->Stop();
    reduction.Stop();
  }

  // --- Plan facts.

  const common::VLayerInfo& Info(int k) const { return dec->vlayers()[k]; }


  void Post(int to, int from, TransferKind kind, Piece piece) {
    mail.Post(to, from, static_cast<int>(kind), std::move(piece));
  }

  absl::StatusOr<std::map<Ref, c10::IValue>> Receive(int to, int from, TransferKind kind,
                                                      int offset, int size) {
    return mail.Receive(to, from, static_cast<int>(kind), offset, size);
  }

  // --- Weights.

  // Copies task `id`'s weights onto device `d`: from the host, or its
  // parameters from the device it copies them from (buffers from the host).
  // First waits until the weights of this device's tasks up to position
  // `room_of` in its list, whose room they take, have been copied by every
  // device that copies them; a prefetch also until what task
  // `after_copies_of` (-1: none) copies out (gradients) has left the device,
  // so its buffer and those gradients are never on the device together (the
  // simulator counts the larger of the two there).
  WeightsResult LoadWeights(int d, int id, int room_of, int after_copies_of,
                            const std::string& label);

  // Buffers of the vLayers in `w` that update them, back to the host.
  uint64_t StoreBuffers(const DeviceWeights& w);

  // --- Running vLayers.

  // `params` (may be null): the vLayer's parameters instead of w's.
  absl::StatusOr<std::vector<c10::IValue>> RunVLayer(int d, int k, const DeviceWeights& w,
                                                     const std::vector<at::Tensor>& buffers,
                                                     const std::vector<c10::IValue>& in,
                                                     int offset,
                                                     const std::vector<at::Tensor>* params = nullptr);

  // The gradients of a backward's outputs from the later backward packs.
  static std::map<Ref, at::Tensor> SumOutputGradients(
      const std::vector<std::map<Ref, c10::IValue>>& incoming);
  // fp32 gradients (Configuration.fp32_gradients): w's bf16 gradients to fp32.
  absl::Status ToFp32Gradients(DeviceWeights& w) const;

  // --- Kept activations (kept_activations.cc).

  // The leaves a forward task runs kept pack `range`'s vLayers on.
  std::shared_ptr<KeptWeights> KeptLeaves(const DeviceWeights& w, PackRange range);
  // Runs vLayer k of a kept pack with autograd, saving into `km`: live-ins
  // from before the pack become leaves.
  absl::StatusOr<std::vector<c10::IValue>> RunKeptVLayer(int d, int k, const DeviceWeights& w,
                                                         std::vector<c10::IValue> in,
                                                         int offset, KeptMicrobatch& km);
  // After the pack's last vLayer: the outputs in `values` it made become
  // the backward's roots (and are detached for everyone else).
  void SealKept(KeptMicrobatch& km, std::map<Ref, c10::IValue>& values);
  // Sends `km` to the host on the copy-out stream, for backward task `back`;
  // ready once it has left the device (or failed).
  std::future<void> OffloadKept(const Task& t, int d, const plan::Microbatch& mb, int back,
                                std::shared_ptr<KeptMicrobatch> km);
  // On the copy-in stream: waits for the kept microbatch and copies it in.
  absl::StatusOr<std::shared_ptr<KeptMicrobatch>> RestoreKept(const Task& t, int d,
                                                              const Transfer& x,
                                                              const plan::Microbatch& mb);
  // The backward of a kept microbatch from the gradients of its outputs:
  // the parameters' gradients into w, the live-ins' into `input_grads`.
  absl::Status KeptBackward(const Task& t, DeviceWeights& w, KeptMicrobatch& km,
                            const std::map<Ref, at::Tensor>& output_grads,
                            std::map<Ref, c10::IValue>& input_grads);


  // vLayer k's live-ins from `values`; Internal naming the missing one
  // (a value the task dropped or never received) and `task`.
  absl::StatusOr<std::vector<c10::IValue>> InputsOf(int k, const std::map<Ref, c10::IValue>& values,
                                                    const Task& task) const;

  // --- Inputs and outputs of a microbatch.
  //
  // What crosses the host link runs on the device's copy streams, beside
  // its compute (docs/DESIGN.md §6): a task's inputs from the host (data,
  // targets, activations, stashes and kept activations sent through the
  // host) are copied in on the copy-in stream, the task's microbatches in
  // order from when the device starts the task, at most the plan's
  // Config::InputsAhead() ahead of the one computing (TaskInputs); what it
  // sends through the host, and its gradients, are copied out on the
  // copy-out stream, the device tensors counting against the device until
  // their copy has finished (a task's microbatch waits for the sends of
  // the one Config::host_outputs_pending before it: PendingSends).
  // Values that stay on the device (LOCAL) or go to another device (PEER)
  // are handed over by the compute thread itself.

  // One microbatch's inputs from the host, on the device: by the index of
  // their transfer in the task, and the data (forward's arguments and the
  // loss's targets).
  struct HostInputs {
    std::map<size_t, std::map<Ref, c10::IValue>> by_transfer;
    std::map<Ref, c10::IValue> data;
    std::shared_ptr<KeptMicrobatch> kept;  // A kept pack's backward.
  };
  using HostInputsResult = absl::StatusOr<HostInputs>;

  static bool IsInput(const Transfer& x) {
    return x.kind == TransferKind::kActivationsIn || x.kind == TransferKind::kStashIn;
  }
  static bool IsOutput(const Transfer& x) {
    return x.kind == TransferKind::kActivationsOut || x.kind == TransferKind::kStashOut;
  }

  // Runs on the copy-in stream of device `d`.
  HostInputsResult CopyInputsIn(const Task& t, int d, const plan::Microbatch& mb);

  // Starts copying one microbatch's host inputs in on device `d`'s copy-in
  // stream.
  std::future<HostInputsResult> PostInputs(const Task& t, int d, const plan::Microbatch& mb);

  // Everything task `t` reads for one microbatch, into `values` (keyed by
  // tensor): the host inputs `host` brings, and what other tasks left on
  // this device or sent from another. Gradients a backward task receives
  // from later backward tasks go to `gradients`, in the order of the task's
  // transfers. A kept pack's backward gets its kept microbatch in `kept`.
  absl::Status ReceiveInputs(const Task& t, int d, const plan::Microbatch& mb,
                             std::future<HostInputsResult>& host,
                             std::map<Ref, c10::IValue>& values,
                             std::vector<std::map<Ref, c10::IValue>>* gradients,
                             std::shared_ptr<KeptMicrobatch>* kept = nullptr);

  // Sends the values of one microbatch along the task's ACTIVATIONS_OUT and
  // STASH_OUT transfers. For a backward task, `values` holds the gradients
  // of its inputs. LOCAL and PEER sends are done when this returns; HOST
  // sends are posted on the copy-out stream, which keeps the device tensors
  // until they are on the host and then delivers them; `left`, when given,
  // becomes ready when they have left the device (at once without any).
  absl::Status SendOutputs(const Task& t, int d, const plan::Microbatch& mb,
                           const std::map<Ref, c10::IValue>& values,
                           std::future<void>* left = nullptr);

  // A task's microbatches waiting for their host sends to leave
  // (Config::host_outputs_pending): Before(m) waits until microbatch
  // m - N's have, so at most N microbatches' are on the device.
  class PendingSends {
   public:
    PendingSends(Impl& impl, const Task& t);
    absl::Status Before(size_t m);
    std::future<void>* Of(size_t m) { return bound_ > 0 ? &left_[m] : nullptr; }

   private:
    Impl& impl_;
    const size_t bound_;
    std::vector<std::future<void>> left_;
  };

  // --- Tasks.

  // A task's host inputs, copied in on the copy-in stream from when the
  // task starts, at most the plan's Config::InputsAhead() microbatches
  // ahead of the one computing: what they hold on the device does not grow
  // with the number of microbatches (a large minibatch's stashes, kept
  // activations).
  class TaskInputs {
   public:
    // Starts copying the first microbatches' inputs, unless `start` is
    // false (Follow, then Start).
    TaskInputs(Impl& impl, const Task& t, int d, bool start = true)
        : impl_(impl),
          t_(t),
          d_(d),
          ahead_(static_cast<size_t>(impl.graph.config.InputsAhead())) {
      futures_.resize(t.microbatches.size());
      if (start) Start();
    }
    // Copies the first microbatches' inputs in, those not yet posted.
    void Start() { PostUpTo(ahead_); }
    // Microbatch m's; first starts copying microbatch m + ahead's, and,
    // past this task's last, the next task's (Follow).
    std::future<HostInputsResult>& For(size_t m) {
      if (m >= futures_.size()) {
        throw std::out_of_range(absl::StrCat("task ", t_.id, " has ", futures_.size(),
                                             " microbatches; asked for the inputs of ", m));
      }
      PostUpTo(m + ahead_);
      // The next task's microbatch j once this one's n - ahead - 1 + j has
      // computed (from its first on): ahead of the computing microbatch,
      // across the tasks, as many as within one. The simulator's rule
      // (sim_build.cc, `early`).
      if (next_ != nullptr && m >= 1 && m + ahead_ >= futures_.size() && next_ready_()) {
        next_->PostUpTo(std::min(m + ahead_ - futures_.size(), ahead_ - 1));
      }
      return futures_[m];
    }
    // The next task's first inputs copy in during this task's last
    // microbatches, once `ready` (polled; it must not wait) says they may.
    void Follow(TaskInputs* next, std::function<bool()> ready) {
      next_ = next;
      next_ready_ = std::move(ready);
    }

   private:
    void PostUpTo(size_t last) {
      for (; posted_ <= last && posted_ < futures_.size(); ++posted_) {
        futures_[posted_] = impl_.PostInputs(t_, d_, t_.microbatches[posted_]);
      }
    }
    Impl& impl_;
    const Task& t_;
    const int d_;
    const size_t ahead_;
    std::vector<std::future<HostInputsResult>> futures_;
    size_t posted_ = 0;
    TaskInputs* next_ = nullptr;
    std::function<bool()> next_ready_;
  };

  absl::Status Forward(const Task& t, int d, DeviceWeights& w, TaskInputs& inputs,
                       const std::function<void()>& first_inputs_in);

  absl::Status Backward(const Task& t, int d, DeviceWeights& w, TaskInputs& inputs,
                        const std::function<void()>& first_inputs_in);

  // The task's gradients, as a list per vLayer (zeros where a parameter got
  // none).
  std::vector<std::vector<at::Tensor>> GradientsOf(const DeviceWeights& w);

  // After a backward task: the vDP reduction and the gradients to the host.
  absl::Status FinishBackward(const Task& t, int d, DeviceWeights& w);

  // Copies `grads` (a list per vLayer of `t`) into the host's sums, on the
  // calling thread, in their place in the plan's order (gradient_sum_order:
  // after microbatch `mb`, -1 at the task's end); `extra_bytes` (buffers
  // stored with them) count on the link too. `what` names the copy in the
  // trace.
  absl::Status CopyGradientsOut(const Task& t, int d, int mb,
                                const std::vector<std::vector<at::Tensor>>& grads,
                                uint64_t extra_bytes, const std::string& what);

  // A pack summed on the host (the plan's host_summed_packs): after
  // microbatch `mb`, when the plan sends its gradients out, they go to the
  // host's sums and are freed here, so the next microbatch's backward makes
  // fresh ones instead of accumulating beside them.
  absl::Status GradientsOutAfter(const Task& t, int d, DeviceWeights& w, int mb);

  // Starts swapping weights in on device `d`'s weights stream.
  std::future<WeightsResult> PostWeights(int d, int id, int room_of, int after_copies_of,
                                         std::string label);

  // Device `d`'s compute thread: its tasks in order. A task starts once the
  // previous one has computed (and, in vDP, reduced); what the previous one
  // copies out may still be on its way.
  absl::Status RunDevice(int d);

  // The evaluation's data, and the evaluator made on first use.
  absl::Status SetEvalLoader(MinibatchLoader loader);

  // --- The recipe (runtime_recipe.cc).

  // The schedule checked, the no-decay group applied, clipping's mode
  // chosen, `updates` made. After the host store.
  absl::Status SetUpRecipe();
  // The recipe as a checkpoint records it (JSON), and the check of a
  // checkpoint's against this run's.
  std::string RecipeJson() const;
  absl::Status CheckRecipe(const std::string& json) const;
  // Rank 0's buffers to every rank of the world (after an iteration).
  absl::Status BroadcastBuffers();
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_RUNTIME_IMPL_H_
