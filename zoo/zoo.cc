#include "zoo/zoo.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "zoo/zoo_builder.h"

namespace harmony::zoo {

using internal::Builder;
using internal::BuildBert;
using internal::BuildGpt;
using internal::BuildMlp;
using internal::BuildResnet;
using internal::BuildVgg;
using torch::jit::Module;

namespace {

absl::Status Invalid(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

}  // namespace

const std::vector<std::string>& ZooFamilies() {
  static const auto* kFamilies =
      new std::vector<std::string>{"mlp", "gpt", "bert", "resnet", "vgg"};
  return *kFamilies;
}

absl::Status ValidateZooOptions(const ZooOptions& o) {
  const auto& families = ZooFamilies();
  if (std::find(families.begin(), families.end(), o.family) ==
      families.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model family \"", o.family,
                     "\" (expected one of: ", absl::StrJoin(families, ", "),
                     ")"));
  }
  auto positive = [](absl::string_view flag, int64_t v) -> absl::Status {
    if (v < 1) return Invalid(flag, absl::StrCat("must be at least 1, got ", v));
    return absl::OkStatus();
  };
  HARMONY_RETURN_IF_ERROR(positive("depth", o.depth));
  HARMONY_RETURN_IF_ERROR(positive("width", o.width));
  HARMONY_RETURN_IF_ERROR(positive("samples", o.samples));
  if (o.classes < 2) {
    return Invalid("classes", absl::StrCat("must be at least 2, got ", o.classes));
  }
  if (!(o.dropout >= 0.0 && o.dropout < 1.0)) {
    return Invalid("dropout", absl::StrCat("must be in [0, 1), got ", o.dropout));
  }
  if (o.family == "gpt" || o.family == "bert") {
    HARMONY_RETURN_IF_ERROR(positive("heads", o.heads));
    HARMONY_RETURN_IF_ERROR(positive("seq-len", o.seq_len));
    if (o.width % o.heads != 0) {
      return Invalid("width", absl::StrCat("must be divisible by --heads (",
                                           o.heads, "), got ", o.width));
    }
    if (o.vocab < 2) {
      return Invalid("vocab", absl::StrCat("must be at least 2, got ", o.vocab));
    }
  }
  if (o.family == "mlp") HARMONY_RETURN_IF_ERROR(positive("input-dim", o.input_dim));
  if (o.family == "vgg" && (o.image_size < 8 || o.image_size % 8 != 0)) {
    return Invalid("image-size",
                   absl::StrCat("vgg halves the image 3 times: must be a "
                                "multiple of 8, got ",
                                o.image_size));
  }
  if (o.family == "resnet" && o.image_size < 4) {
    return Invalid("image-size",
                   absl::StrCat("must be at least 4, got ", o.image_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<torch::jit::Module> BuildZooModel(const ZooOptions& options) {
  HARMONY_RETURN_IF_ERROR(ValidateZooOptions(options));
  return common::CallTorch(
      absl::StrCat("building zoo model ", options.family),
      [&] {
        Builder b(options.seed);
        Module m = options.family == "mlp"    ? BuildMlp(options, b)
                   : options.family == "gpt"  ? BuildGpt(options, b)
                   : options.family == "bert" ? BuildBert(options, b)
                   : options.family == "resnet" ? BuildResnet(options, b)
                                                : BuildVgg(options, b);
        // As nn.Parameter does in Python; the flag is saved with the model.
        for (at::Tensor p : m.parameters()) p.requires_grad_(true);
        m.train(true);
        return m;
      },
      absl::StatusCode::kInternal);
}

absl::StatusOr<common::TrainingData> MakeZooData(const ZooOptions& o) {
  HARMONY_RETURN_IF_ERROR(ValidateZooOptions(o));
  return common::CallTorch(
      "making zoo data",
      [&] {
        // A generator of its own, so data does not depend on the model.
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(
            o.seed * 0x9E3779B97F4A7C15ull + 1);
        const int64_t n = o.samples;
        common::TrainingData data;
        if (o.family == "mlp") {
          at::Tensor x = torch::randn({n, o.input_dim}, gen);
          at::Tensor teacher = torch::randn({o.input_dim, o.classes}, gen);
          data.inputs = {x};
          data.targets = {torch::matmul(x, teacher).argmax(1)};
        } else if (o.family == "gpt") {
          // Each token follows from the previous one, t' = (3t + 1) mod V,
          // so the next token is learnable.
          at::Tensor seq = torch::empty({n, o.seq_len + 1}, torch::kInt64);
          seq.select(1, 0).copy_(torch::randint(0, o.vocab, {n}, gen));
          for (int64_t t = 1; t <= o.seq_len; ++t) {
            seq.select(1, t).copy_((seq.select(1, t - 1) * 3 + 1) % o.vocab);
          }
          data.inputs = {seq.narrow(1, 0, o.seq_len).contiguous()};
          data.targets = {seq.narrow(1, 1, o.seq_len).contiguous()};
        } else if (o.family == "bert") {
          // Tokens 1..V-1, padded with 0 after a random length; the class is
          // the first token modulo the class count.
          at::Tensor tokens = torch::randint(1, o.vocab, {n, o.seq_len}, gen);
          at::Tensor lengths =
              torch::randint((o.seq_len + 1) / 2, o.seq_len + 1, {n}, gen);
          at::Tensor positions = torch::arange(o.seq_len).unsqueeze(0);
          tokens.masked_fill_(positions >= lengths.unsqueeze(1), 0);
          data.inputs = {tokens};
          data.targets = {tokens.select(1, 0) % o.classes};
        } else {
          at::Tensor x =
              torch::randn({n, 3, o.image_size, o.image_size}, gen);
          at::Tensor teacher = torch::randn({3, o.classes}, gen);
          data.inputs = {x};
          data.targets = {torch::matmul(x.mean({2, 3}), teacher).argmax(1)};
        }
        return data;
      },
      absl::StatusCode::kInternal);
}

absl::Status WriteZooModelAndData(const ZooOptions& options,
                                  const std::string& model_path,
                                  const std::string& data_path) {
  HARMONY_ASSIGN_OR_RETURN(torch::jit::Module model, BuildZooModel(options));
  HARMONY_ASSIGN_OR_RETURN(common::TrainingData data, MakeZooData(options));
  HARMONY_RETURN_IF_ERROR(common::SaveScriptModule(model, model_path));
  return common::SaveTrainingData(data_path, data);
}

}  // namespace harmony::zoo
