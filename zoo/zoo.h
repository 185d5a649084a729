// The model zoo: TorchScript models built in C++ (torch::jit::Module and
// `define`, the way torch.jit.script lays them out) and matching synthetic
// training data, for tests, demos and benchmarks.
//
// Families:
//   mlp     Linear+ReLU stack -> logits. Inputs [N, input_dim] float.
//   gpt     Decoder-only transformer LM: token and position embeddings,
//           `depth` pre-LN attention blocks in a ModuleList, final layer
//           norm, head. forward(tokens, targets) returns the loss.
//   bert    Encoder with an attention mask built from padding (token 0),
//           pooler and classifier head -> logits. Inputs [N, seq_len] int64.
//   resnet  Stem, 3 stages of `depth` basic blocks (BatchNorm, residual
//           adds, strided downsampling), average pool, fc -> logits.
//   vgg     3 stages of `depth` 3x3 conv+ReLU and a max-pool, classifier
//           with dropout -> logits. Images [N, 3, image_size, image_size].
// Targets are class indices (int64) except for gpt (next tokens).
//
// Everything is deterministic in `seed`: the same options give bit-identical
// weights and data.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_ZOO_ZOO_H_
#define HARMONY_ZOO_ZOO_H_

#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "absl/status/statusor.h"
#include "common/tensor_file.h"

namespace harmony::zoo {

struct ZooOptions {
  std::string family;
  // Blocks (gpt, bert), blocks per stage (resnet), convs per stage (vgg),
  // hidden layers (mlp).
  int64_t depth = 2;
  // Hidden size (gpt, bert, mlp) or channels of the first stage (resnet,
  // vgg).
  int64_t width = 32;
  int64_t heads = 2;
  int64_t vocab = 64;
  int64_t seq_len = 16;
  double dropout = 0.1;
  int64_t classes = 4;
  int64_t image_size = 16;
  int64_t input_dim = 16;
  // Samples in the data file.
  int64_t samples = 32;
  uint64_t seed = 1;
};

// The family names, for help text and errors.
const std::vector<std::string>& ZooFamilies();

// Checks the options (known family, positive sizes, width divisible by
// heads, ...). InvalidArgument naming the flag otherwise.
absl::Status ValidateZooOptions(const ZooOptions& options);

// A fresh model in training mode.
absl::StatusOr<torch::jit::Module> BuildZooModel(const ZooOptions& options);

// `options.samples` samples of matching synthetic data.
absl::StatusOr<common::TrainingData> MakeZooData(const ZooOptions& options);

// Builds both and writes the model (torch.jit.save format, loads with
// torch.jit.load) and the data (torch.save format).
absl::Status WriteZooModelAndData(const ZooOptions& options,
                                  const std::string& model_path,
                                  const std::string& data_path);

}  // namespace harmony::zoo

#endif  // HARMONY_ZOO_ZOO_H_
