#include "zoo/zoo.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::zoo {
namespace {

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
std::string Unrolled(const std::string& list, int64_t count,
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

Module BuildMlp(const ZooOptions& o, Builder& b) {
  std::vector<Module> layers;
  int64_t in = o.input_dim;
  for (int64_t i = 0; i < o.depth; ++i) {
    layers.push_back(b.Linear(in, o.width));
    in = o.width;
  }
  layers.push_back(b.Linear(in, o.classes));
  Module list = b.ModuleList(layers);
  std::string source = "def forward(self, x):\n" +
                       Unrolled("layers", o.depth, "x = torch.relu($.forward(x))") +
                       absl::StrCat("    return getattr(self.layers, \"",
                                    o.depth, "\").forward(x)\n");
  return b.Make(
      "MLP", "__torch__.harmony.zoo.MLP",
      [&](Module& m) { m.register_module("layers", list); }, source);
}

// Multi-head self-attention; `causal` masks future positions (GPT), the
// other form adds an attention-mask bias (BERT).
Module Attention(const ZooOptions& o, Builder& b, bool causal) {
  const int64_t c = o.width;
  Module c_attn = b.Linear(c, 3 * c);
  Module c_proj = b.Linear(c, c);
  Module attn_drop = b.Dropout(o.dropout);
  Module resid_drop = b.Dropout(o.dropout);
  const char* kCausal = R"(
def forward(self, x):
    B = x.size(0)
    T = x.size(1)
    C = x.size(2)
    hd = C // self.n_head
    q, k, v = self.c_attn.forward(x).split(C, 2)
    q = q.view(B, T, self.n_head, hd).transpose(1, 2)
    k = k.view(B, T, self.n_head, hd).transpose(1, 2)
    v = v.view(B, T, self.n_head, hd).transpose(1, 2)
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / (hd ** 0.5))
    att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
    att = self.attn_drop.forward(torch.softmax(att, -1))
    y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
    return self.resid_drop.forward(self.c_proj.forward(y))
)";
  const char* kMasked = R"(
def forward(self, x, mask_bias):
    B = x.size(0)
    T = x.size(1)
    C = x.size(2)
    hd = C // self.n_head
    q, k, v = self.c_attn.forward(x).split(C, 2)
    q = q.view(B, T, self.n_head, hd).transpose(1, 2)
    k = k.view(B, T, self.n_head, hd).transpose(1, 2)
    v = v.view(B, T, self.n_head, hd).transpose(1, 2)
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / (hd ** 0.5)) + mask_bias
    att = self.attn_drop.forward(torch.softmax(att, -1))
    y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
    return self.resid_drop.forward(self.c_proj.forward(y))
)";
  return b.Make(
      causal ? "CausalSelfAttention" : "SelfAttention",
      causal ? "__torch__.harmony.zoo.CausalSelfAttention"
             : "__torch__.harmony.zoo.SelfAttention",
      [&](Module& m) {
        m.register_attribute("n_head", c10::IntType::get(), o.heads);
        m.register_module("c_attn", c_attn);
        m.register_module("c_proj", c_proj);
        m.register_module("attn_drop", attn_drop);
        m.register_module("resid_drop", resid_drop);
        if (causal) {
          m.register_buffer(
              "bias", torch::tril(torch::ones({o.seq_len, o.seq_len}))
                          .view({1, 1, o.seq_len, o.seq_len}));
        }
      },
      causal ? kCausal : kMasked);
}

Module FeedForward(const ZooOptions& o, Builder& b) {
  Module c_fc = b.Linear(o.width, 4 * o.width);
  Module c_proj = b.Linear(4 * o.width, o.width);
  Module drop = b.Dropout(o.dropout);
  return b.Make(
      "FeedForward", "__torch__.harmony.zoo.FeedForward",
      [&](Module& m) {
        m.register_module("c_fc", c_fc);
        m.register_module("c_proj", c_proj);
        m.register_module("dropout", drop);
      },
      R"(
def forward(self, x):
    return self.dropout.forward(self.c_proj.forward(torch.gelu(self.c_fc.forward(x))))
)");
}

Module BuildGpt(const ZooOptions& o, Builder& b) {
  Module wte = b.Embedding(o.vocab, o.width);
  Module wpe = b.Embedding(o.seq_len, o.width);
  Module drop = b.Dropout(o.dropout);
  std::vector<Module> blocks;
  for (int64_t i = 0; i < o.depth; ++i) {
    Module ln_1 = b.LayerNorm(o.width);
    Module attn = Attention(o, b, /*causal=*/true);
    Module ln_2 = b.LayerNorm(o.width);
    Module mlp = FeedForward(o, b);
    blocks.push_back(b.Make(
        "GPTBlock", "__torch__.harmony.zoo.GPTBlock",
        [&](Module& m) {
          m.register_module("ln_1", ln_1);
          m.register_module("attn", attn);
          m.register_module("ln_2", ln_2);
          m.register_module("mlp", mlp);
        },
        R"(
def forward(self, x):
    x = x + self.attn.forward(self.ln_1.forward(x))
    x = x + self.mlp.forward(self.ln_2.forward(x))
    return x
)"));
  }
  Module h = b.ModuleList(blocks);
  Module ln_f = b.LayerNorm(o.width);
  Module lm_head = b.Linear(o.width, o.vocab, /*bias=*/false);
  std::string source = R"(
def forward(self, tokens, targets):
    T = tokens.size(1)
    pos = torch.arange(T, device=tokens.device)
    x = self.drop.forward(self.wte.forward(tokens) + self.wpe.forward(pos))
)" + Unrolled("h", o.depth, "x = $.forward(x)") +
                       R"(    logits = self.lm_head.forward(self.ln_f.forward(x))
    return torch.cross_entropy_loss(logits.view(-1, logits.size(-1)), targets.view(-1), None, 1, -100, 0.0)
)";
  return b.Make(
      "GPT", "__torch__.harmony.zoo.GPT",
      [&](Module& m) {
        m.register_module("wte", wte);
        m.register_module("wpe", wpe);
        m.register_module("drop", drop);
        m.register_module("h", h);
        m.register_module("ln_f", ln_f);
        m.register_module("lm_head", lm_head);
      },
      source);
}

Module BuildBert(const ZooOptions& o, Builder& b) {
  Module word = b.Embedding(o.vocab, o.width);
  Module position = b.Embedding(o.seq_len, o.width);
  Module emb_ln = b.LayerNorm(o.width);
  Module emb_drop = b.Dropout(o.dropout);
  Module embeddings = b.Make(
      "BertEmbeddings", "__torch__.harmony.zoo.BertEmbeddings",
      [&](Module& m) {
        m.register_module("word_embeddings", word);
        m.register_module("position_embeddings", position);
        m.register_module("LayerNorm", emb_ln);
        m.register_module("dropout", emb_drop);
      },
      R"(
def forward(self, tokens):
    T = tokens.size(1)
    pos = torch.arange(T, device=tokens.device)
    x = self.word_embeddings.forward(tokens) + self.position_embeddings.forward(pos)
    return self.dropout.forward(self.LayerNorm.forward(x))
)");
  std::vector<Module> layers;
  for (int64_t i = 0; i < o.depth; ++i) {
    Module attention = Attention(o, b, /*causal=*/false);
    Module ln_1 = b.LayerNorm(o.width);
    Module intermediate = b.Linear(o.width, 4 * o.width);
    Module output = b.Linear(4 * o.width, o.width);
    Module out_drop = b.Dropout(o.dropout);
    Module ln_2 = b.LayerNorm(o.width);
    layers.push_back(b.Make(
        "BertLayer", "__torch__.harmony.zoo.BertLayer",
        [&](Module& m) {
          m.register_module("attention", attention);
          m.register_module("ln_1", ln_1);
          m.register_module("intermediate", intermediate);
          m.register_module("output", output);
          m.register_module("dropout", out_drop);
          m.register_module("ln_2", ln_2);
        },
        R"(
def forward(self, x, mask_bias):
    x = self.ln_1.forward(x + self.attention.forward(x, mask_bias))
    h = self.output.forward(torch.gelu(self.intermediate.forward(x)))
    return self.ln_2.forward(x + self.dropout.forward(h))
)"));
  }
  Module encoder = b.ModuleList(layers);
  Module pooler = b.Linear(o.width, o.width);
  Module drop = b.Dropout(o.dropout);
  Module classifier = b.Linear(o.width, o.classes);
  std::string source = R"(
def forward(self, tokens):
    x = self.embeddings.forward(tokens)
    mask_bias = (1.0 - tokens.ne(0).type_as(x)).unsqueeze(1).unsqueeze(2) * -10000.0
)" + Unrolled("encoder", o.depth, "x = $.forward(x, mask_bias)") +
                       R"(    pooled = torch.tanh(self.pooler.forward(x.select(1, 0)))
    return self.classifier.forward(self.dropout.forward(pooled))
)";
  return b.Make(
      "BERT", "__torch__.harmony.zoo.BertClassifier",
      [&](Module& m) {
        m.register_module("embeddings", embeddings);
        m.register_module("encoder", encoder);
        m.register_module("pooler", pooler);
        m.register_module("dropout", drop);
        m.register_module("classifier", classifier);
      },
      source);
}

Module BasicBlock(Builder& b, int64_t in, int64_t out, int64_t stride) {
  Module conv1 = b.Conv2d(in, out, 3, stride, 1, /*bias=*/false);
  Module bn1 = b.BatchNorm2d(out);
  Module conv2 = b.Conv2d(out, out, 3, 1, 1, /*bias=*/false);
  Module bn2 = b.BatchNorm2d(out);
  // Like torchvision: a strided or widening block projects its shortcut.
  const bool down = stride != 1 || in != out;
  std::optional<Module> downsample;
  if (down) {
    Module ds_conv = b.Conv2d(in, out, 1, stride, 0, /*bias=*/false);
    Module ds_bn = b.BatchNorm2d(out);
    downsample = b.Make(
        "Downsample", "__torch__.torchvision.models.resnet.Downsample",
        [&](Module& m) {
          m.register_module("conv", ds_conv);
          m.register_module("bn", ds_bn);
        },
        R"(
def forward(self, x):
    return self.bn.forward(self.conv.forward(x))
)");
  }
  return b.Make(
      down ? "BasicBlockDown" : "BasicBlock",
      "__torch__.torchvision.models.resnet.BasicBlock",
      [&](Module& m) {
        m.register_module("conv1", conv1);
        m.register_module("bn1", bn1);
        m.register_module("conv2", conv2);
        m.register_module("bn2", bn2);
        if (downsample) m.register_module("downsample", *downsample);
      },
      std::string(R"(
def forward(self, x):
    out = torch.relu(self.bn1.forward(self.conv1.forward(x)))
    out = self.bn2.forward(self.conv2.forward(out))
)") + (down ? "    return torch.relu(out + self.downsample.forward(x))\n"
            : "    return torch.relu(out + x)\n"));
}

Module BuildResnet(const ZooOptions& o, Builder& b) {
  Module conv1 = b.Conv2d(3, o.width, 3, 1, 1, /*bias=*/false);
  Module bn1 = b.BatchNorm2d(o.width);
  std::vector<Module> stages;
  std::string body;
  int64_t in = o.width;
  for (int64_t s = 0; s < 3; ++s) {
    const int64_t out = o.width << s;
    std::vector<Module> blocks;
    for (int64_t i = 0; i < o.depth; ++i) {
      blocks.push_back(BasicBlock(b, in, out, (s > 0 && i == 0) ? 2 : 1));
      in = out;
    }
    stages.push_back(b.ModuleList(blocks));
    body += Unrolled(absl::StrCat("layer", s + 1), o.depth, "x = $.forward(x)");
  }
  Module fc = b.Linear(in, o.classes);
  std::string source = R"(
def forward(self, x):
    x = torch.relu(self.bn1.forward(self.conv1.forward(x)))
)" + body + R"(    x = torch.flatten(torch.adaptive_avg_pool2d(x, [1, 1]), 1)
    return self.fc.forward(x)
)";
  return b.Make(
      "ResNet", "__torch__.torchvision.models.resnet.ResNet",
      [&](Module& m) {
        m.register_module("conv1", conv1);
        m.register_module("bn1", bn1);
        for (int64_t s = 0; s < 3; ++s) {
          m.register_module(absl::StrCat("layer", s + 1), stages[s]);
        }
        m.register_module("fc", fc);
      },
      source);
}

Module BuildVgg(const ZooOptions& o, Builder& b) {
  std::vector<Module> convs;
  std::string body;
  int64_t in = 3;
  int64_t index = 0;
  for (int64_t s = 0; s < 3; ++s) {
    const int64_t out = o.width << s;
    for (int64_t i = 0; i < o.depth; ++i) {
      convs.push_back(b.Conv2d(in, out, 3, 1, 1, /*bias=*/true));
      absl::StrAppend(&body, "    x = torch.relu(getattr(self.features, \"",
                      index++, "\").forward(x))\n");
      in = out;
    }
    body += "    x = torch.max_pool2d(x, [2, 2], [2, 2], [0, 0], [1, 1], False)\n";
  }
  Module features = b.ModuleList(convs);
  const int64_t spatial = o.image_size / 8;
  const int64_t hidden = 4 * o.width;
  Module fc1 = b.Linear(in * spatial * spatial, hidden);
  Module drop = b.Dropout(o.dropout);
  Module fc2 = b.Linear(hidden, o.classes);
  std::string source = "def forward(self, x):\n" + body + R"(    x = torch.flatten(x, 1)
    x = self.dropout.forward(torch.relu(self.fc1.forward(x)))
    return self.fc2.forward(x)
)";
  return b.Make(
      "VGG", "__torch__.torchvision.models.vgg.VGG",
      [&](Module& m) {
        m.register_module("features", features);
        m.register_module("fc1", fc1);
        m.register_module("dropout", drop);
        m.register_module("fc2", fc2);
      },
      source);
}

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
  HARMONY_ASSIGN_OR_RETURN(
      std::string bytes,
      common::CallTorch(absl::StrCat("serialising ", model_path), [&] {
        std::ostringstream out;
        model.save(out);
        return out.str();
      }));
  HARMONY_RETURN_IF_ERROR(common::WriteFileAtomically(model_path, bytes));
  return common::SaveTrainingData(data_path, data);
}

}  // namespace harmony::zoo
