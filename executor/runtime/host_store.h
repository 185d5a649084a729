// The host store (docs/DESIGN.md §6): the host's copy of every vLayer's master
// weights, gradients, buffers and optimizer state, allocated once.
//
// Per vLayer, the parameters it owns are views into one flat fp32 buffer
// (as the CPU optimizer wants them), with their gradients in another. A
// parameter read by several vLayers (tied or shared weights) is owned by the
// first; the others read the owner's master copy and get their own gradient
// slot, added into the owner's before the owner's update. Buffers (BatchNorm
// statistics) are replaced as a whole, never written in place, so a reader
// holds a consistent snapshot.
//
// Thread-safety: thread-safe for the calls that say so (devices' threads
// deliver gradients and buffers while the host updates other vLayers);
// params() views are written only by Update, which the runtime runs when no
// device reads that vLayer's weights.

#ifndef HARMONY_EXECUTOR_RUNTIME_HOST_STORE_H_
#define HARMONY_EXECUTOR_RUNTIME_HOST_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/runtime/world.h"
#include "optim/cpu_optimizer.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace harmony::common {
class Decomposition;
}  // namespace harmony::common

namespace harmony::executor {

class HostStore {
 public:
  // The store for `dec`'s vLayers, initialised from `model`'s tensors.
  // FailedPrecondition for a parameter that is not float32;
  // ResourceExhausted when host memory runs out. `pinned`: master weights
  // and buffers in pinned memory (for CUDA devices; needs a CUDA build).
  static absl::StatusOr<std::unique_ptr<HostStore>> Create(const torch::jit::Module& model,
                                                           const common::Decomposition& dec,
                                                           const optim::OptimizerOptions& optimizer,
                                                           bool pinned = false);
  ~HostStore();

  int num_vlayers() const { return static_cast<int>(layers_.size()); }

  // Master weights of vLayer k, in its parameter order (a borrowed one is
  // the owner's).
  const std::vector<at::Tensor>& params(int k) const { return layers_[k]->params; }
  // The flat buffer params(k) are views of, when vLayer k owns every one of
  // its parameters (none tied to an earlier vLayer's): a weight swap then
  // moves it in one copy (Device::ToDeviceFlat). Undefined otherwise.
  at::Tensor flat_params_if_all_owned(int k) const;
  // A snapshot of vLayer k's buffers. Thread-safe.
  std::vector<at::Tensor> buffers(int k) const;
  // Replaces them. Thread-safe.
  void SetBuffers(int k, std::vector<at::Tensor> buffers);
  // vLayers that read a parameter vLayer k owns (k itself included when it
  // reads one twice).
  std::vector<int> borrowers(int k) const;

  // vLayer k's gradients arrive `count` times an iteration; AddGradients
  // numbers them 0..count-1 (plan::GradientSumOrder) and they are summed in
  // that order, whatever order they arrive in. 0 (the default): in arrival
  // order.
  void SetGradientCount(int k, int count);
  // Adds `grads` (vLayer k's, in parameter order, on any device the host
  // reads) into its gradient slots, or copies them if none arrived yet this
  // iteration. Returns the bytes. Thread-safe. bf16 gradients are summed
  // as bf16 (rounded after each add), as a device sums them. With a count
  // set, `slot` is their place in the sum: one that arrives before those
  // ahead of it is copied (on the calling thread's memory scope: the host's)
  // and added after them (`*early` set, when given).
  uint64_t AddGradients(int k, const std::vector<at::Tensor>& grads, int slot = -1,
                        bool* early = nullptr);
  // Sums the borrowers' gradients into vLayer k's, steps its optimizer and
  // clears for the next iteration (zero gradients if none arrived):
  // Finalize then Step.
  // Thread-safe against AddGradients / SetBuffers of other vLayers.
  // With a distributed `world`, the summed gradients (one flat tensor) are
  // first summed over the ranks and scaled by 1 / ranks: allreduced, or,
  // with sharded optimizer state, reduced into the vLayer's owner, which
  // steps and broadcasts the new weights. A failed collective skips the
  // step and is returned.
  absl::Status Update(int k, const World* world = nullptr);
  // The first half of Update: vLayer k's gradients become the minibatch's
  // (the borrowers' added, summed over the ranks). Its gradients stay until
  // the next iteration's first AddGradients, so a step can be redone.
  absl::Status Finalize(int k, const World* world = nullptr);
  // The second half: steps vLayer k's optimizer on its finalized gradients,
  // first multiplied by `scale` (a 0-d fp32 tensor: gradient clipping) when
  // defined.
  absl::Status Step(int k, const World* world = nullptr, const at::Tensor& scale = {});
  // The 2-norm of each gradient vLayer k owns, finalized (as
  // torch.norm(grad) computes it, on the calling thread's intra-op
  // threads), with the parameter's name.
  std::vector<std::pair<std::string, at::Tensor>> GradientNorms(int k) const;
  // The names of the parameters vLayer k owns (GradientNorms' names).
  std::vector<std::string> owned_parameter_names(int k) const;
  // Keeps vLayer k's master weights, optimizer state and step count as they
  // are now (before a speculative Step), in buffers allocated on first use
  // and reused; Redo puts them back, scales the gradients and steps again.
  void SaveForRedo(int k);
  absl::Status Redo(int k, const at::Tensor& scale);
  // Bytes SaveForRedo copies for vLayer k.
  uint64_t redo_bytes(int k) const;
  // The learning rate of the next steps of every vLayer (a schedule's).
  void SetLearningRate(double lr);
  // Parameters `no_decay` picks (by canonical name and tensor) take no
  // weight decay. Returns their names.
  std::vector<std::string> SetNoDecay(
      const std::function<bool(const std::string&, const at::Tensor&)>& no_decay);
  // The names SetNoDecay picked, in vLayer order (canonical).
  const std::vector<std::string>& no_decay_names() const { return no_decay_names_; }
  // ZeRO-1 across `world` (which shards): each vLayer's optimizer state is
  // kept by its owner only (OptimizerStateOwners); the others free theirs.
  void ShardOptimizerState(const World& world);
  // The rank that keeps vLayer k's optimizer state; -1: every rank.
  int optimizer_state_owner(int k) const { return layers_[k]->owner; }
  // A new iteration: no gradients have arrived.
  void StartIteration();

  // The master copy of a parameter or buffer by its name in the
  // decomposition (canonical names; the runtime maps aliases).
  absl::StatusOr<at::Tensor> Find(const std::string& name) const;
  // Copies the master weights and buffers into `model`'s tensors.
  absl::Status WriteInto(torch::jit::Module& model) const;

  // Copies of every parameter and buffer, and of the optimizer's state per
  // parameter ("<name>/momentum_buffer", "<name>/exp_avg", "<name>/exp_avg_sq",
  // as torch.optim names them), by canonical name. Call between iterations.
  // With sharded state, a collective: every rank of `world` calls it, and
  // each vLayer's owner broadcasts its state.
  absl::Status ExportState(std::map<std::string, at::Tensor>& weights,
                           std::map<std::string, at::Tensor>& optimizer_state,
                           const World* world = nullptr) const;
  // Sets them from such copies, and the optimizer's step count.
  // FailedPrecondition naming the tensor when one is missing or has another
  // shape. Call between iterations. With sharded state, a rank keeps the
  // state of the vLayers it owns only.
  absl::Status ImportState(const std::map<std::string, at::Tensor>& weights,
                           const std::map<std::string, at::Tensor>& optimizer_state,
                           int64_t optimizer_steps);
  // Host memory held: weights, gradients, optimizer state, buffers.
  uint64_t bytes() const;
  // Of which optimizer state.
  uint64_t optimizer_state_bytes() const;

 private:
  struct Layer {
    std::vector<std::string> param_names, buffer_names;
    at::Tensor flat_params, flat_grads;  // Owned parameters only.
    std::vector<at::Tensor> params, grads;
    std::vector<bool> owned;  // Per parameter: not another vLayer's (tied).
    // (vLayer, index in it, index here) of every later reader of a
    // parameter this vLayer owns.
    std::vector<std::tuple<int, int, int>> borrowers;
    mutable std::mutex mu;            // Guards `buffers` and `grads_in`.
    std::vector<at::Tensor> buffers;  // Replaced, never written in place.
    bool grads_in = false;            // Some gradients arrived this iteration.
    // SetGradientCount's: sends per iteration, the next slot to sum, and
    // those that came early (copies), by slot.
    int grad_count = 0;
    int next_slot = 0;
    std::map<int, std::vector<at::Tensor>> early;
    // Null on a rank that does not own the state (sharded).
    std::unique_ptr<optim::CpuOptimizer> optimizer;
    int owner = -1;  // The rank that keeps the optimizer state; -1: every rank.
    // SaveForRedo's copies (allocated on first use).
    at::Tensor saved_params;
    std::vector<float> saved_state;
    int64_t saved_steps = 0;
    int64_t elements() const { return flat_params.numel(); }
  };
  HostStore() = default;

  std::vector<std::unique_ptr<Layer>> layers_;
  // The optimizer's state parts per element (CpuOptimizer::state_names).
  std::vector<std::string> state_names_;
  std::vector<std::string> no_decay_names_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_HOST_STORE_H_
