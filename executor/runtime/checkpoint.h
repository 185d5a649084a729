// Training checkpoints (DESIGN.md §6, issue 19): what a run needs to go on
// exactly where it stopped. Keyed by parameter and buffer name, never by
// device or pack, so a checkpoint loads into any plan of the same model
// (another device count, mode or packing).
//
// A checkpoint file is a torch.save-compatible pickle of a dict:
//   format           "harmony-checkpoint-1"
//   model_sha256     the model file's hash (a mismatch is refused)
//   iteration        minibatches trained so far
//   minibatch        samples per minibatch
//   seed, shuffle    the data order and the dropout stream: both are
//                    functions of (seed, iteration), so these and the
//                    iteration are the position in the data and the RNG state
//   optimizer        "sgd" | "adam" | "adamw"; optimizer_steps
//   weights          {name: tensor} of every parameter and buffer
//   optimizer_state  {"<param>/momentum_buffer" | "<param>/exp_avg" |
//                    "<param>/exp_avg_sq": tensor}, torch.optim's names
//   metrics          [one JSON line per iteration trained so far]
// `torch.load(path)` in Python opens it.
//
// Files are written atomically (a temporary file, fsync, rename).

#ifndef HARMONY_EXECUTOR_RUNTIME_CHECKPOINT_H_
#define HARMONY_EXECUTOR_RUNTIME_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace harmony::executor {

struct Checkpoint {
  std::string model_sha256;
  int64_t iteration = 0;
  int64_t minibatch = 0;
  uint64_t seed = 0;
  bool shuffle = false;
  std::string optimizer;
  int64_t optimizer_steps = 0;
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

// Checkpoints in `dir` ("checkpoint-<iteration>.pt"), by iteration.
std::map<int64_t, std::string> ListCheckpoints(const std::string& dir);

// `path` itself, or the latest checkpoint of the directory `path`;
// NotFound when the directory has none.
absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path);

// "DIR/checkpoint-<iteration>.pt".
std::string CheckpointPath(const std::string& dir, int64_t iteration);

// Deletes all but the `keep` latest checkpoints of `dir`.
void PruneCheckpoints(const std::string& dir, int keep);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_CHECKPOINT_H_
