// The zoo's model families, built as torch.jit.script would make them
// (zoo_builder.h): mlp, gpt, bert, resnet, vgg.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "zoo/zoo_builder.h"

namespace harmony::zoo::internal {

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

}  // namespace harmony::zoo::internal
