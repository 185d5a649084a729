// Training checkpoints (docs/DESIGN.md §6): what a run needs to go on
// exactly where it stopped. Keyed by parameter and buffer name, never by
// device or pack, so a checkpoint loads into any plan of the same model
// (another device count, mode or packing).
//
// A checkpoint file is a torch.save-compatible pickle of a dict:
//   format           "harmony-checkpoint-1"
//   model_sha256     the model file's hash (a mismatch is refused)
//   iteration        minibatches trained so far
//   minibatch        samples per minibatch (the world's: servers x each's)
//   world_size       servers that trained it (for information: a checkpoint
//                    resumes on any world of the same global minibatch)
//   seed, shuffle    the data order and the dropout stream: both are
//                    functions of (seed, iteration), so these and the
//                    iteration are the position in the data and the RNG state
//   optimizer        "sgd" | "adam" | "adamw"; optimizer_steps
//   recipe           JSON: the learning rate and its schedule, clipping,
//                    the parameters without weight decay (absent before
//                    they existed: a constant rate, no clipping, decay
//                    everywhere)
//   weights          {name: tensor} of every parameter and buffer
//   optimizer_state  {"<param>/momentum_buffer" | "<param>/exp_avg" |
//                    "<param>/exp_avg_sq": tensor}, torch.optim's names
//   metrics          [one JSON line per iteration trained so far]
// `torch.load(path)` in Python opens it.
//
// Files are written atomically (a temporary file, fsync, rename).

#ifndef HARMONY_EXECUTOR_RUNTIME_CHECKPOINT_H_
#define HARMONY_EXECUTOR_RUNTIME_CHECKPOINT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::executor {

struct Checkpoint {
  std::string model_sha256;
  int64_t iteration = 0;
  int64_t minibatch = 0;  // Global: world_size x each server's.
  int64_t world_size = 1;
  uint64_t seed = 0;
  bool shuffle = false;
  std::string optimizer;
  int64_t optimizer_steps = 0;
  std::string recipe;  // JSON; empty in older checkpoints.
  std::map<std::string, at::Tensor> weights;
  std::map<std::string, at::Tensor> optimizer_state;
  std::vector<std::string> metrics;

  // Bytes of tensor data it holds.
  uint64_t bytes() const;
};

absl::Status WriteCheckpoint(const Checkpoint& checkpoint, const std::string& path);

// InvalidArgument naming the file for one that is not a checkpoint (or is
// truncated); NotFound for a missing file.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path);
// The same from a file's bytes (rank 0 reads it and sends it to the others);
// `path` names it in errors.
absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view bytes, const std::string& path);

// Checkpoints in `dir` ("checkpoint-<iteration>.pt"), by iteration.
std::map<int64_t, std::string> ListCheckpoints(const std::string& dir);

// `path` itself, or the latest checkpoint of the directory `path`;
// NotFound when the directory has none.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path);

// "DIR/checkpoint-<iteration>.pt".
std::string CheckpointPath(const std::string& dir, int64_t iteration);

// Deletes all but the `keep` latest checkpoints of `dir`.
void PruneCheckpoints(const std::string& dir, int keep);

struct CheckpointPolicy {
  std::string dir;               // Empty: no checkpoints.
  int64_t every_iterations = 0;  // 0: not by count.
  double every_minutes = 0;      // 0: not by time.
  int keep = 2;                  // The latest this many stay on disk.
};

// When to write checkpoints, and writing them on a thread of their own so
// that training stalls only while the state is copied out of the host store
// (Runtime::MakeCheckpoint), not while it is serialised and written.
//
// Thread-safety: one thread calls it; the writes run on another.
class Checkpointer {
 public:
  explicit Checkpointer(CheckpointPolicy policy);
  ~Checkpointer();  // Waits for the write under way.
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool enabled() const { return !policy_.dir.empty(); }
  const CheckpointPolicy& policy() const { return policy_; }
  // Whether a checkpoint is due after `iteration` iterations: every
  // `every_iterations`, or `every_minutes` after the last one (or the start).
  bool Due(int64_t iteration) const;

  // Writes `c` to DIR/checkpoint-<iteration>.pt in the background, then
  // prunes to `keep`; returns the path. Call Finish first to learn how the
  // previous write went (Write waits for it, dropping its status).
  std::string Write(Checkpoint c);
  // Waits for the write under way: its status, and the seconds it took.
  absl::Status Finish(double* seconds = nullptr);
  // A write was started and Finish has not been called since.
  bool pending() const { return writer_.joinable(); }
  // A write was started and has finished (Finish then returns at once).
  bool written() const { return writer_.joinable() && done_.load(); }
  // The path of the last write started.
  const std::string& last_path() const { return last_path_; }

 private:
  CheckpointPolicy policy_;
  double last_ = 0;  // When the last checkpoint was taken (monotonic seconds).
  std::thread writer_;
  absl::Status status_;
  double seconds_ = 0;
  std::atomic<bool> done_{false};
  std::string last_path_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_CHECKPOINT_H_
