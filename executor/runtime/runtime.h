// The runtime (docs/DESIGN.md §6): trains a model with a plan from harmony-plan.
//
// Runtime::Create loads the model, checks its SHA-256 against the plan,
// re-creates the plan's vLayers from the cut points, and sets up the host
// store (master weights, gradients and optimizer state per vLayer, allocated
// once) and the devices. RunIteration then trains one minibatch:
//
//   - one worker thread per device runs that device's task list in order;
//     before a task computes, its weights are swapped in (prefetched during
//     the device's previous task by the device's swap thread, or kept
//     resident when the plan says so);
//   - every transfer in the plan is performed as a real copy and counted:
//     activations device to device (PEER), through the host (HOST) or left
//     in place (LOCAL); stashes to and from the host; data from the loader;
//     gradients (summed over the task's microbatches, and in vDP over the
//     devices) and updated BatchNorm statistics to the host;
//   - the host's update thread runs the CPU optimizer on a backward pack as
//     soon as its gradients are in, while devices run earlier packs.
//
// Exactness: each microbatch's loss is scaled by its share of the minibatch
// (size / D) and gradients are accumulated over microbatches in order, as a
// plain LibTorch loop over the same microbatches does. Random numbers
// (dropout) come from a stream defined per (iteration, first sample of the
// microbatch, vLayer), seeded from RuntimeOptions::seed, so a forward and
// its recompute draw the same masks and results do not depend on the
// schedule. A recompute updates scratch copies of the buffers: BatchNorm
// statistics are updated once, by the forward.
//
// Virtual CPU devices have a hard capacity enforced by the accounting
// allocator (common/device_memory.h): going over it fails the iteration
// with ResourceExhausted naming the device, the task and the bytes.
//
// Thread-safety: one thread drives a Runtime; it runs its own threads.

#ifndef HARMONY_EXECUTOR_RUNTIME_RUNTIME_H_
#define HARMONY_EXECUTOR_RUNTIME_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "common/tensor_file.h"
#include "common/token_file.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/metrics.h"
#include "executor/runtime/recipe.h"
#include "executor/runtime/world.h"
#include "optim/cpu_optimizer.h"
#include "optim/lr_schedule.h"
#include "proto/plan.pb.h"

namespace harmony::executor {

struct RuntimeOptions {
  // The devices to train on: virtual CPU devices "cpu:NxSIZE", or CUDA
  // ("cuda", "cuda:NxSIZE") in a build with it.
  common::DeviceSpec devices;
  // Which of `devices` the plan's devices are (one index each, in order);
  // empty: the first ones (device.h's CreateDevices).
  std::vector<int> device_indices;
  optim::OptimizerOptions optimizer;
  // Schedules, clipping, weight-decay groups (executor/runtime/recipe.h).
  TrainingRecipe recipe;
  // Seeds the dropout stream and, with `shuffle`, the sample order.
  uint64_t seed = 0;
  // Minibatches are taken in order, wrapping around; shuffled per epoch
  // when set.
  bool shuffle = false;
  // > 0: host<->device copies share one link of this many bytes per second
  // per direction (full duplex). Figures made so are labelled emulated.
  double emulate_host_link = 0;
  // Refuse devices smaller than the plan's per-device memory (the default).
  // Off, a run on smaller devices fails with an out-of-memory error if the
  // plan does not fit them.
  bool check_device_memory = true;
  // Host memory the run may use, in bytes; 0: what the machine has available
  // now (MemAvailable). A plan whose host store and stashes need more is
  // refused before anything is allocated.
  uint64_t host_memory_limit = 0;
  // Intra-op threads of LibTorch's kernels on each device's compute thread
  // (common/intra_op_threads.h); 0: the host's hardware threads divided
  // among the plan's devices, at least 1 (the devices compute at once, each
  // on its share of the cores). Some kernels (oneDNN's convolutions,
  // LayerNorm's weight gradient) round differently at another count, so a
  // loop Harmony's results are compared with bit for bit must compute on
  // threads_per_device() threads (torch.set_num_threads in Python).
  int threads = 0;
  // Denormal floats flushed to zero (FTZ/DAZ) on every thread that computes
  // or updates (common/denormals.h); unset: as the plan's profile was
  // measured (off for profiles made before the policy existed). A loop
  // compared bit for bit must compute under the same policy.
  std::optional<bool> flush_denormal;
  // Mixed precision (proto::Configuration.precision BF16): each swap-in
  // sends the pack's parameters as bf16 (converted from the fp32 masters on
  // the host), the vLayers compute under LibTorch's autocast to bf16 (matrix
  // products and convolutions in bf16; norms, softmax and the loss in fp32,
  // as torch.autocast("cpu", dtype=torch.bfloat16) does), gradients come
  // back as bf16 and are summed into the host's fp32 gradients; buffers,
  // optimizer state and checkpoints stay fp32. Unset: the plan's precision;
  // set to another than the plan's: FailedPrecondition (the plan's bytes
  // and peaks are its precision's). Create resolves it.
  std::optional<bool> bf16;
  // Data parallel across servers: this server is rank
  // world.rank of world.size. The global minibatch is world.size x the
  // plan's, split by rank in a fixed order (rank r takes the r-th slice), and
  // the dropout stream follows the global sample index, so the world trains
  // as one server with the global minibatch would. Each vLayer's gradients
  // (one flat fp32 tensor, borrowers' added) are summed across the ranks on
  // the host's update thread in the plan's update order, the same on every
  // rank, and scaled by 1 / world.size before its update (HostStore::Update);
  // so a pack's reduction overlaps the backward of the packs after it. After
  // each iteration the buffers (BatchNorm statistics) are rank 0's on every
  // rank, as DDP's broadcast_buffers does.
  World world;
  // Record a Chrome trace of the executed iterations.
  bool trace = false;
  // Checked at task boundaries; when it returns true the iteration stops
  // with Cancelled.
  std::function<bool()> cancelled;
  // Called on a device's thread before each of its tasks computes, with
  // the device's index and the task's id: tests use it to make one device
  // run behind the others.
  std::function<void(int device, int task)> before_task;
};

class Runtime {
 public:
  // Errors before anything runs: NotFound / InvalidArgument for a missing or
  // corrupt model, FailedPrecondition for a model whose SHA-256 differs from
  // the plan's, too few or too small devices, a plan this runtime cannot
  // run; InvalidArgument for a malformed plan.
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const proto::Plan& plan,
                                                         const std::string& model_path,
                                                         const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The training data. InvalidArgument, with expected and found shapes, when
  // it does not match the plan's sample input (shapes past dimension 0,
  // dtypes, number of tensors) or has fewer samples than the minibatch.
  absl::Status SetData(common::TrainingData data);
  // The training data from a token file (common/token_file.h): windows of
  // seq_len + 1 tokens, forward's tokens and the targets; sequential, or
  // placed at random by the seed with RuntimeOptions::shuffle. Token ids
  // are checked against the model's first nn.Embedding as each window is
  // read.
  absl::Status SetTokenData(std::shared_ptr<const common::TokenFile> tokens);

  // The validation data (executor/runtime/evaluation.h): checked as SetData
  // checks the training data, and forward must take its targets as it takes
  // the training data's. FailedPrecondition when the model in eval mode
  // cannot run through the plan's vLayers.
  absl::Status SetEvalData(common::TrainingData data);
  absl::Status SetEvalTokenData(std::shared_ptr<const common::TokenFile> tokens);
  // The mean loss over the first `minibatches` minibatches of the
  // evaluation data (0: every whole minibatch it holds, at least 1; of a
  // token file, at most 50),
  // forward-only in eval mode through the plan's packs.
  // Call between iterations; every rank of a world calls it at once.
  absl::StatusOr<EvalMetrics> Evaluate(int64_t minibatches);

  // Trains the next minibatch. On an error (out of memory, a non-finite
  // loss, a cancellation) every thread is stopped and the error returned;
  // packs updated before it keep their update, so the caller should treat
  // the run as failed (the daemon fails the job).
  absl::StatusOr<IterationMetrics> RunIteration();

  int64_t iterations_done() const;

  // Intra-op threads each device computes on (RuntimeOptions::threads).
  int threads_per_device() const;
  // The denormal policy it computes under (RuntimeOptions::flush_denormal).
  bool flush_denormal() const;
  // How clipping proceeds: the recipe's clip mode; kAuto resolved to
  // kSpeculate, or kept as kAuto when it holds after an iteration that
  // clipped (executor/runtime/host_updates.h).
  ClipMode clip_mode() const;
  // The parameters without weight decay (RuntimeOptions::no_decay), by
  // canonical name.
  const std::vector<std::string>& no_decay_parameters() const;

  // The host's master copy of a parameter or buffer, by qualified name.
  absl::StatusOr<at::Tensor> HostTensor(const std::string& name) const;

  // Writes the trained weights and buffers into the model and saves it as a
  // TorchScript file (written atomically).
  absl::Status SaveModel(const std::string& path);

  // The training state after the iterations done so far (executor/runtime/
  // checkpoint.h), copied out of the host store: call between iterations;
  // writing it may then overlap the next iteration. Its metrics are empty
  // (the caller keeps them).
  // With sharded optimizer state, a collective: every rank calls it.
  absl::StatusOr<Checkpoint> MakeCheckpoint() const;
  // Continues from `checkpoint`: weights, buffers, optimizer state, the
  // iteration (and so the learning-rate schedule's position), the seed and
  // the sample order. FailedPrecondition, naming both, for a checkpoint of
  // another model, optimizer, minibatch, schedule or weight-decay groups,
  // or one missing a tensor the model has. Call before the first iteration or
  // between iterations.
  absl::Status Restore(const Checkpoint& checkpoint);

  // Chrome trace (same layout as the simulator's) of the iterations run so
  // far with RuntimeOptions::trace.
  std::string ChromeTrace() const;

  // Bytes allocated on each device now. Thread-safe: may be called while
  // another thread runs an iteration.
  std::vector<uint64_t> device_bytes_in_use() const;

  // Host memory the store holds: weights, gradients and optimizer state.
  uint64_t host_store_bytes() const;
  // Of which the optimizer's state (this server's shard when sharded).
  uint64_t optimizer_state_bytes() const;

 private:
  struct Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where a run's data comes from: a torch.save file, or a token file (a .bin
// of `token_dtype`, a .npy) cut into windows of `seq_len` + 1 tokens.
struct DataSource {
  std::string path;
  std::string token_dtype;  // uint16 | uint32; empty for .npy and torch.save files.
  int64_t seq_len = 0;
};

// Loads `source` into `runtime` as its training data, or with `eval` its
// evaluation data. Errors name the file and, for a token file without
// --seq-len or --token-dtype, the flag.
absl::Status LoadData(Runtime& runtime, const DataSource& source, bool eval);

// The seed of the random stream (dropout) of one vLayer's run on one
// microbatch (named by its first sample in the minibatch) in one iteration.
uint64_t DropoutSeed(uint64_t seed, int64_t iteration, int microbatch_offset, int vlayer);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_RUNTIME_H_
