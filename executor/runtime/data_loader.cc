#include "executor/runtime/data_loader.h"

#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/loss.h"
#include "common/host_memory.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::executor {
namespace {

absl::Status CheckTensors(const std::vector<at::Tensor>& got,
                          const google::protobuf::RepeatedPtrField<proto::TensorMeta>& want,
                          const std::string& data, absl::string_view what) {
  if (static_cast<int>(got.size()) != want.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        data, " has ", got.size(), " ", what, " tensor(s), the plan's sample ", want.size(),
        " (", data, ": ", common::DescribeTensors(got), ")"));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const proto::TensorMeta& w = want[static_cast<int>(i)];
    bool same = got[i].dim() == w.shape_size();
    for (int j = 1; same && j < w.shape_size(); ++j) same = got[i].size(j) == w.shape(j);
    std::vector<std::string> dims = {"N"};
    for (int j = 1; j < w.shape_size(); ++j) dims.push_back(absl::StrCat(w.shape(j)));
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(
          data, ": ", what, " ", i, " has shape ", common::DescribeTensor(got[i]),
          ", the plan expects [", absl::StrJoin(dims, ", "), "] (N samples)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MinibatchLoader> MinibatchLoader::Create(
    common::TrainingData data, const proto::Plan& plan,
    const std::vector<std::string>& forward_arguments, const std::string& what) {
  HARMONY_RETURN_IF_ERROR(common::ArrangeInputs(forward_arguments, &data));
  HARMONY_RETURN_IF_ERROR(CheckTensors(data.inputs, plan.model().sample_inputs(), what, "input"));
  if (plan.model().sample_targets_size() > 0 || !data.targets.empty()) {
    HARMONY_RETURN_IF_ERROR(
        CheckTensors(data.targets, plan.model().sample_targets(), what, "target"));
  }
  if (data.size() < 1) return absl::InvalidArgumentError(absl::StrCat(what, " has no samples"));
  MinibatchLoader loader;
  HARMONY_ASSIGN_OR_RETURN(loader.takes_targets_,
                           common::ForwardTakesTargets(forward_arguments, data.inputs,
                                                       data.targets));
  loader.data_ = std::move(data);
  return loader;
}

absl::StatusOr<MinibatchLoader> MinibatchLoader::Create(
    std::shared_ptr<const common::TokenFile> tokens, int64_t vocab, const proto::Plan& plan,
    const std::vector<std::string>& forward_arguments, const std::string& what) {
  // Its first window stands for all of them in the checks.
  HARMONY_ASSIGN_OR_RETURN(common::TrainingData sample,
                           tokens->Samples(0, 1, false, 0, vocab));
  if (plan.model().sample_targets_size() == 0) sample.targets.clear();
  HARMONY_ASSIGN_OR_RETURN(
      MinibatchLoader loader,
      Create(std::move(sample), plan, forward_arguments,
             absl::StrCat(what, " (", tokens->path(), ", windows of ", tokens->seq_len(),
                          " + 1 tokens)")));
  loader.data_ = {};
  loader.tokens_ = std::move(tokens);
  loader.vocab_ = vocab;
  loader.with_targets_ = plan.model().sample_targets_size() > 0;
  return loader;
}

absl::StatusOr<Minibatch> MinibatchLoader::Take(int64_t index, int size, int rank,
                                                int world_size, bool shuffle, uint64_t seed,
                                                bool pinned) {
  if (tokens_ != nullptr) {
    const int64_t first = (index * world_size + rank) * static_cast<int64_t>(size);
    HARMONY_ASSIGN_OR_RETURN(common::TrainingData d,
                             tokens_->Samples(first, size, shuffle, seed, vocab_));
    Minibatch out;
    out.arguments = std::move(d.inputs);
    if (with_targets_) out.targets = std::move(d.targets);
    return common::CallTorch("a minibatch of tokens", [&] {
      if (pinned) {
        for (at::Tensor& t : out.arguments) t = t.pin_memory();
        for (at::Tensor& t : out.targets) t = t.pin_memory();
      }
      if (takes_targets_) {
        out.arguments.insert(out.arguments.end(), out.targets.begin(), out.targets.end());
      }
      return out;
    });
  }
  return common::CallTorch("a minibatch", [&] {
    return TakeRows(index, size, rank, world_size, shuffle, seed, pinned);
  });
}

Minibatch MinibatchLoader::TakeRows(int64_t index, int size, int rank, int world_size,
                                    bool shuffle, uint64_t seed, bool pinned) {
  const int64_t n = data_.size();
  std::vector<int64_t> rows(size);
  for (int j = 0; j < size; ++j) {
    // Rank r of R takes the r-th slice of the global minibatch (R x ours).
    const int64_t at = (index * world_size + rank) * static_cast<int64_t>(size) + j;
    const int64_t epoch = at / n;
    if (shuffle && (order_.empty() || epoch != epoch_)) {
      at::Generator gen =
          at::detail::createCPUGenerator(common::SplitMix64(seed ^ static_cast<uint64_t>(epoch + 1)));
      at::Tensor perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
      order_.assign(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n);
      epoch_ = epoch;
    }
    rows[j] = shuffle ? order_[at % n] : at % n;
  }
  at::Tensor picked = at::tensor(rows, at::TensorOptions().dtype(at::kLong));
  Minibatch out;
  for (const at::Tensor& t : data_.inputs) out.arguments.push_back(t.index_select(0, picked));
  for (const at::Tensor& t : data_.targets) out.targets.push_back(t.index_select(0, picked));
  if (pinned) {
    for (at::Tensor& t : out.arguments) t = t.pin_memory();
    for (at::Tensor& t : out.targets) t = t.pin_memory();
  }
  if (takes_targets_) {
    out.arguments.insert(out.arguments.end(), out.targets.begin(), out.targets.end());
  }
  return out;
}

}  // namespace harmony::executor
