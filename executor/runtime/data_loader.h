// The runtime's loader (docs/DESIGN.md §6.9): the data a run trains or
// evaluates on, checked against the plan's sample, and the minibatches
// taken from it.
//
// The data: tensors (a torch.save file, loaded whole), or a token file
// (common/token_file.h, memory-mapped) whose samples are windows of
// seq_len + 1 tokens. Training takes minibatch i as samples (i x R + r) x B
// + j (j < B), wrapping around, for rank r of a world of R servers with the
// plan's minibatch B; with shuffling, those positions index a permutation
// drawn per epoch from the run's seed (tensors) or draw each window's place
// from the seed and the sample's position (tokens). Evaluation takes the
// first minibatches of its data in order, the same ones every time.
//
// Thread-safety: a MinibatchLoader is used by one thread.

#ifndef HARMONY_EXECUTOR_RUNTIME_DATA_LOADER_H_
#define HARMONY_EXECUTOR_RUNTIME_DATA_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor_file.h"
#include "common/token_file.h"
#include "proto/plan.pb.h"

namespace harmony::executor {

// One minibatch: forward's arguments (the inputs, then the targets when
// forward takes them) and the loss's targets.
struct Minibatch {
  std::vector<at::Tensor> arguments, targets;
};

class MinibatchLoader {
 public:
  // `data` arranged for forward's arguments and checked against the plan's
  // sample: InvalidArgument with the expected and found shapes for other
  // shapes past dimension 0, dtypes or numbers of tensors, or no samples.
  // `what` names the data in errors ("the data", "the evaluation data").
  static absl::StatusOr<MinibatchLoader> Create(common::TrainingData data,
                                                const proto::Plan& plan,
                                                const std::vector<std::string>& forward_arguments,
                                                const std::string& what);

  // A token file's windows, checked against the plan's sample (one input of
  // [N, seq_len] tokens, the same targets when the plan has them); ids
  // at or above `vocab` (> 0) are refused as each window is read.
  static absl::StatusOr<MinibatchLoader> Create(std::shared_ptr<const common::TokenFile> tokens,
                                                int64_t vocab, const proto::Plan& plan,
                                                const std::vector<std::string>& forward_arguments,
                                                const std::string& what);

  MinibatchLoader() = default;

  bool empty() const { return data_.inputs.empty() && tokens_ == nullptr; }
  bool from_token_file() const { return tokens_ != nullptr; }
  int64_t samples() const { return tokens_ != nullptr ? tokens_->windows() : data_.size(); }
  // Whether forward takes the targets as arguments (decided by the data's
  // tensors against forward's arguments).
  bool takes_targets() const { return takes_targets_; }

  // Minibatch `index` of `size` samples for `rank` of `world_size`: in
  // order, or with `shuffle` in a permutation per epoch seeded by `seed`
  // (tokens: windows placed at random by the seed). Pinned host memory when
  // `pinned`. InvalidArgument naming the offset for a token outside the
  // vocabulary.
  absl::StatusOr<Minibatch> Take(int64_t index, int size, int rank, int world_size, bool shuffle,
                                 uint64_t seed, bool pinned);

  // Forgets the current epoch's permutation (a restored run draws it again).
  void Reset() {
    order_.clear();
    epoch_ = -1;
  }

 private:
  common::TrainingData data_;
  std::shared_ptr<const common::TokenFile> tokens_;
  int64_t vocab_ = 0;
  bool with_targets_ = false;  // The plan's model takes targets (tokens: always made).
  bool takes_targets_ = false;
  std::vector<int64_t> order_;  // The current epoch's permutation, with shuffling.
  int64_t epoch_ = -1;

  // Take from the tensors.
  Minibatch TakeRows(int64_t index, int size, int rank, int world_size, bool shuffle,
                     uint64_t seed, bool pinned);
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_DATA_LOADER_H_
