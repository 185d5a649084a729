// Internal to zoo/: the Builder that makes TorchScript modules the way
// torch.jit.script does, and the families built with it (zoo_families.cc);
// zoo.cc validates options, picks the family and writes model and data.
//
// Thread-safety: a Builder is confined to its thread.

#ifndef HARMONY_ZOO_ZOO_BUILDER_H_
#define HARMONY_ZOO_ZOO_BUILDER_H_

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "zoo/zoo.h"

namespace harmony::zoo::internal {

using torch::jit::Module;

// Builds modules whose classes are shared the way torch.jit.script shares
// them: every module made under one type key has the same ClassType (so all
// blocks of a model are one class, with one compiled forward).
class Builder {
 public:
  explicit Builder(uint64_t seed)
      : cu_(std::make_shared<torch::jit::CompilationUnit>()),
        gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  // The first module of `key` creates the class `qualified_name`, registers
  // its attributes through `fill` and compiles `source` (if any); later
  // modules of `key` reuse that class and only fill in their values, which
  // must be registered in the same order with the same types.
  Module Make(const std::string& key, const std::string& qualified_name,
              const std::function<void(Module&)>& fill,
              const std::string& source) {
    auto it = types_.find(key);
    if (it == types_.end()) {
      Module m(qualified_name, cu_, /*shouldMangle=*/true);
      m.register_attribute("training", c10::BoolType::get(), true);
      fill(m);
      if (!source.empty()) m.define(source);
      types_.emplace(key, m.type());
      return m;
    }
    const c10::ClassTypePtr& cls = it->second;
    Module m(c10::ivalue::Object::create(c10::StrongTypePtr(cu_, cls),
                                         cls->numAttributes()));
    m.register_attribute("training", c10::BoolType::get(), true);
    fill(m);
    return m;
  }

  // U(-bound, bound), as PyTorch initialises Linear and Conv layers.
  at::Tensor Uniform(at::IntArrayRef sizes, double bound) {
    return (torch::rand(sizes, gen_) * 2.0 - 1.0) * bound;
  }
  at::Tensor Normal(at::IntArrayRef sizes, double std) {
    return torch::randn(sizes, gen_) * std;
  }

  Module Linear(int64_t in, int64_t out, bool bias = true) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    return Make(
        bias ? "Linear" : "LinearNoBias",
        "__torch__.torch.nn.modules.linear.Linear",
        [&](Module& m) {
          m.register_parameter("weight", Uniform({out, in}, bound), false);
          if (bias) m.register_parameter("bias", Uniform({out}, bound), false);
        },
        bias ? R"(
def forward(self, x):
    return torch.linear(x, self.weight, self.bias)
)"
             : R"(
def forward(self, x):
    return torch.linear(x, self.weight)
)");
  }

  Module LayerNorm(int64_t dim) {
    return Make(
        "LayerNorm", "__torch__.torch.nn.modules.normalization.LayerNorm",
        [&](Module& m) {
          m.register_attribute("normalized_shape", c10::ListType::ofInts(),
                               c10::List<int64_t>({dim}));
          m.register_attribute("eps", c10::FloatType::get(), 1e-5);
          m.register_parameter("weight", torch::ones({dim}), false);
          m.register_parameter("bias", torch::zeros({dim}), false);
        },
        R"(
def forward(self, x):
    return torch.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps, True)
)");
  }

  Module Embedding(int64_t num, int64_t dim) {
    return Make(
        "Embedding", "__torch__.torch.nn.modules.sparse.Embedding",
        [&](Module& m) {
          m.register_parameter("weight", Normal({num, dim}, 1.0), false);
        },
        R"(
def forward(self, x):
    return torch.embedding(self.weight, x, -1, False, False)
)");
  }

  Module Dropout(double p) {
    return Make(
        "Dropout", "__torch__.torch.nn.modules.dropout.Dropout",
        [&](Module& m) {
          m.register_attribute("p", c10::FloatType::get(), p);
        },
        R"(
def forward(self, x):
    return torch.dropout(x, self.p, self.training)
)");
  }

  Module Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                int64_t padding, bool bias) {
    const double bound =
        1.0 / std::sqrt(static_cast<double>(in * kernel * kernel));
    return Make(
        bias ? "Conv2d" : "Conv2dNoBias",
        "__torch__.torch.nn.modules.conv.Conv2d",
        [&](Module& m) {
          m.register_attribute("stride", c10::ListType::ofInts(),
                               c10::List<int64_t>({stride, stride}));
          m.register_attribute("padding", c10::ListType::ofInts(),
                               c10::List<int64_t>({padding, padding}));
          m.register_parameter(
              "weight", Uniform({out, in, kernel, kernel}, bound), false);
          if (bias) m.register_parameter("bias", Uniform({out}, bound), false);
        },
        bias ? R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, self.bias, self.stride, self.padding, [1, 1], 1)
)"
             : R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, None, self.stride, self.padding, [1, 1], 1)
)");
  }

  Module BatchNorm2d(int64_t channels) {
    return Make(
        "BatchNorm2d", "__torch__.torch.nn.modules.batchnorm.BatchNorm2d",
        [&](Module& m) {
          m.register_attribute("momentum", c10::FloatType::get(), 0.1);
          m.register_attribute("eps", c10::FloatType::get(), 1e-5);
          m.register_parameter("weight", torch::ones({channels}), false);
          m.register_parameter("bias", torch::zeros({channels}), false);
          m.register_buffer("running_mean", torch::zeros({channels}));
          m.register_buffer("running_var", torch::ones({channels}));
          m.register_buffer("num_batches_tracked",
                            torch::zeros({}, torch::kInt64));
        },
        R"(
def forward(self, x):
    if self.training:
        self.num_batches_tracked.add_(1)
    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, self.training, self.momentum, self.eps, True)
)");
  }

  // A ModuleList holding `children` as "0", "1", ...; its class depends on
  // the children's classes, as in TorchScript.
  Module ModuleList(const std::vector<Module>& children) {
    std::vector<std::string> child_types;
    for (const Module& c : children) child_types.push_back(c.type()->str());
    return Make(
        absl::StrCat("ModuleList[", absl::StrJoin(child_types, ","), "]"),
        "__torch__.torch.nn.modules.container.ModuleList",
        [&](Module& m) {
          for (size_t i = 0; i < children.size(); ++i) {
            m.register_module(std::to_string(i), children[i]);
          }
        },
        "");
  }

 private:
  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  at::Generator gen_;
  std::map<std::string, c10::ClassTypePtr> types_;
};

// "x = torch.relu(getattr(self.layers, "0").forward(x))" lines, the way
// torch.jit.script unrolls a loop over a ModuleList.
inline std::string Unrolled(const std::string& list, int64_t count,
                     const std::string& line_format) {
  std::string out;
  for (int64_t i = 0; i < count; ++i) {
    std::string call =
        absl::StrCat("getattr(self.", list, ", \"", i, "\")");
    std::string line = line_format;
    line.replace(line.find("$"), 1, call);
    absl::StrAppend(&out, "    ", line, "\n");
  }
  return out;
}

// The families (zoo_families.cc).
Module BuildMlp(const ZooOptions& o, Builder& b);
Module BuildGpt(const ZooOptions& o, Builder& b);
Module BuildBert(const ZooOptions& o, Builder& b);
Module BuildResnet(const ZooOptions& o, Builder& b);
Module BuildVgg(const ZooOptions& o, Builder& b);

}  // namespace harmony::zoo::internal

#endif  // HARMONY_ZOO_ZOO_BUILDER_H_
