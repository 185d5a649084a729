#!/usr/bin/python3
"""Scripts the suite's models the way PyTorch users do, with torch.jit.script
(...).save(...), and writes matching data with torch.save.

    /usr/bin/python3 tests/suite/make_suite.py OUT_DIR [NAME ...]

writes OUT_DIR/NAME.pt and OUT_DIR/NAME_data.pt for every model (or the ones
named). Needs Debian's python3-torch and python3-torchvision (1.13 / 0.14).
Every model is small (at most a few MiB), deterministic (dropout and
stochastic depth 0) and seeded, so two runs write the same weights and data.

The models, and what each brings to the decomposer and runtime:
  resnet18          torchvision resnet18: BatchNorm, residual adds
  mobilenet_v3      torchvision mobilenet_v3_small: depthwise convs, SE, hardswish
  shufflenet_v2     torchvision shufflenet_v2_x0_5: channel shuffle, chunk, cat
  densenet          torchvision DenseNet (small config): List[Tensor] concatenation
  efficientnet_b0   torchvision efficientnet_b0: MBConv, SiLU, stochastic depth (0)
  squeezenet        torchvision squeezenet1_1: fire modules, conv classifier
  vgg11_bn          torchvision VGG with vgg11_bn's layer pattern at 1/8 width
  transformer_cls   nn.TransformerEncoder classifier with a padding mask
  seq2seq           nn.Transformer encoder-decoder: forward(src, tgt_in, tgt_out)
                    from a dict of inputs, returns its own loss
  lstm_lm           word-level LSTM language model, embedding tied to the decoder
  gru_cls           sequence-first GRU + nn.RNN classifier, hidden state made in forward
  unet              UNet: ConvTranspose2d, skip concatenations, N,C,H,W segmentation
  hf_tuple          returns (loss, logits), as Hugging Face models do
  heads_namedtuple  returns a NamedTuple of two heads (as GoogLeNet does)
  dict_out          returns Dict[str, Tensor] with a "loss" entry
  gpt2_tied         GPT-2 layout, lm_head.weight = wte.weight, causal mask buffer
  mlp_tied          b.weight = a.weight and F.linear(h, a.weight); MSE, float targets

and the second wave (tests/suite/wave2.py): llama, moe, dlrm, traced_gpt,
convnext, padded_encoder, shared_depth, shape_int, deeplab; and dlrm_large, the recommender at
the size of a real table (three 60000 x 32 tables, 22 MiB), planned but not
trained by the suite; and densenet121 (torchvision, 26.6 MiB), planned on
devices of its weight bytes; and deep_convs, a 40-layer plain conv stack
whose gradients go denormal.
"""
import copy
import math
import os
import sys
from typing import Dict, NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import wave2

SAMPLES = 16


def no_dropout(model: nn.Module) -> nn.Module:
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def images(classes=10, size=32):
    return {"inputs": torch.randn(SAMPLES, 3, size, size),
            "targets": torch.randint(0, classes, (SAMPLES,))}


def tokens(vocab, seq):
    return torch.randint(1, vocab, (SAMPLES, seq))


# --- torchvision ------------------------------------------------------------
def resnet18():
    return torchvision.models.resnet18(num_classes=10), images()


def mobilenet_v3():
    return no_dropout(torchvision.models.mobilenet_v3_small(num_classes=10)), images()


def shufflenet_v2():
    return torchvision.models.shufflenet_v2_x0_5(num_classes=10), images()


def densenet():
    model = torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2, 2),
                                        num_init_features=16, bn_size=2,
                                        num_classes=10)
    return model, images()


def efficientnet_b0():
    model = torchvision.models.efficientnet_b0(num_classes=10,
                                               stochastic_depth_prob=0.0)
    return no_dropout(model), images()


def squeezenet():
    return no_dropout(torchvision.models.squeezenet1_1(num_classes=10)), images()


def vgg11_bn():
    # vgg11_bn's configuration "A" at 1/8 of its widths, and its three-Linear
    # classifier narrowed to match (the full one holds 128M parameters).
    cfg = [8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"]
    model = torchvision.models.vgg.VGG(
        torchvision.models.vgg.make_layers(cfg, batch_norm=True), num_classes=10)
    model.classifier = nn.Sequential(
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(True), nn.Dropout(0.0),
        nn.Linear(128, 128), nn.ReLU(True), nn.Dropout(0.0), nn.Linear(128, 10))
    return model, images()


# --- torch.nn ---------------------------------------------------------------
class TransformerClassifier(nn.Module):
    def __init__(self, vocab=64, d=32, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        pad = x == 0
        h = self.emb(x) + self.pos[:, : x.size(1)]
        h = self.encoder(h, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))


def transformer_cls():
    x = tokens(64, 12)
    x[:, 9:] = 0  # Padding at the end of every sequence.
    return TransformerClassifier(), {"inputs": x, "targets": torch.randint(0, 5, (SAMPLES,))}


class Seq2Seq(nn.Module):
    def __init__(self, vocab=40, d=32):
        super().__init__()
        self.src_emb = nn.Embedding(vocab, d)
        self.tgt_emb = nn.Embedding(vocab, d)
        self.transformer = nn.Transformer(d, 4, 1, 1, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt_in, tgt_out):
        t = tgt_in.size(1)
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.transformer(self.src_emb(src), self.tgt_emb(tgt_in), tgt_mask=causal)
        logits = self.out(h)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))


def seq2seq():
    # Inputs by name; tgt_out, forward's last argument, as the targets.
    # (LibTorch 1.13 cannot read a pickled dict of exactly one entry, so the
    # dict holds "targets" too.)
    tgt = tokens(40, 9)
    return Seq2Seq(), {"inputs": {"src": tokens(40, 10), "tgt_in": tgt[:, :-1]},
                       "targets": tgt[:, 1:]}


class LstmLM(nn.Module):
    def __init__(self, vocab=100, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.decoder = nn.Linear(d, vocab)
        self.decoder.weight = self.emb.weight  # Tied, as in PyTorch's word LM example.

    def forward(self, x):
        h, _ = self.lstm(self.emb(x))
        return self.decoder(h)


def lstm_lm():
    seq = tokens(100, 13)
    return LstmLM(), {"inputs": seq[:, :-1], "targets": seq[:, 1:]}


class GruClassifier(nn.Module):
    def __init__(self, features=8, hidden=24, classes=4):
        super().__init__()
        self.hidden = hidden
        self.rnn = nn.RNN(features, hidden, nonlinearity="relu")  # Sequence-first.
        self.gru = nn.GRU(hidden, hidden, num_layers=2)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        x = x.transpose(0, 1)  # [T, N, F]
        h0 = torch.zeros(1, x.size(1), self.hidden, dtype=x.dtype)
        y, _ = self.rnn(x, h0)
        y, h = self.gru(y)
        return self.head(h[-1])


def gru_cls():
    return GruClassifier(), {"inputs": torch.randn(SAMPLES, 10, 8),
                             "targets": torch.randint(0, 4, (SAMPLES,))}


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.down1 = conv_block(3, 8)
        self.down2 = conv_block(8, 16)
        self.bottom = conv_block(16, 32)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec2 = conv_block(32, 16)
        self.up1 = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec1 = conv_block(16, 8)
        self.out = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.out(u1)


def unet():
    return UNet(), {"inputs": torch.randn(SAMPLES, 3, 16, 16),
                    "targets": torch.randint(0, 3, (SAMPLES, 16, 16))}


class HfTuple(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
        self.classifier = nn.Linear(32, 3)

    def forward(self, x, labels) -> Tuple[torch.Tensor, torch.Tensor]:
        logits = self.classifier(self.body(x))
        return F.cross_entropy(logits, labels), logits


def hf_tuple():
    return HfTuple(), {"inputs": torch.randn(SAMPLES, 12), "targets": torch.randint(0, 3, (SAMPLES,))}


class Heads(NamedTuple):
    logits: torch.Tensor
    aux: torch.Tensor


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                   nn.Flatten())
        self.main = nn.Linear(32, 6)
        self.aux_head = nn.Linear(32, 6)

    def forward(self, x) -> Heads:
        h = self.trunk(x)
        return Heads(self.main(h), self.aux_head(h))


def heads_namedtuple():
    return TwoHeads(), images(classes=6, size=8)


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(10, 20)
        self.b = nn.Linear(20, 4)

    def forward(self, x, y) -> Dict[str, torch.Tensor]:
        out = self.b(torch.relu(self.a(x)))
        return {"prediction": out, "loss": F.mse_loss(out, y)}


def dict_out():
    return DictOut(), {"inputs": torch.randn(SAMPLES, 10), "targets": torch.randn(SAMPLES, 4)}


class GptBlock(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp(self.ln_2(x))


class Gpt2Tied(nn.Module):
    def __init__(self, vocab=96, d=32, heads=4, layers=2, block=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.h = nn.ModuleList([GptBlock(d, heads, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # GPT-2's weight tying.

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt2_tied():
    # Only the first 40 of 96 token ids occur: the other rows of the tied
    # weight get the head's gradient alone, the used rows both.
    seq = torch.randint(1, 40, (SAMPLES, 13))
    return Gpt2Tied(), {"inputs": seq[:, :-1], "targets": seq[:, 1:]}


class MlpTied(nn.Module):
    def __init__(self, d=24):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.b.weight = self.a.weight  # Module aliasing.
        self.c = nn.Linear(d, d)
        self.d = nn.Linear(d, 6)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h = torch.tanh(self.b(h))
        h = torch.tanh(self.c(h))
        h = torch.tanh(F.linear(h, self.a.weight))  # Functional reuse.
        return self.d(h)


def mlp_tied():
    return MlpTied(), {"inputs": torch.randn(SAMPLES, 24), "targets": torch.randn(SAMPLES, 6)}


MODELS = {
    "resnet18": resnet18, "mobilenet_v3": mobilenet_v3, "shufflenet_v2": shufflenet_v2,
    "densenet": densenet, "efficientnet_b0": efficientnet_b0, "squeezenet": squeezenet,
    "vgg11_bn": vgg11_bn, "transformer_cls": transformer_cls, "seq2seq": seq2seq,
    "lstm_lm": lstm_lm, "gru_cls": gru_cls, "unet": unet, "hf_tuple": hf_tuple,
    "heads_namedtuple": heads_namedtuple, "dict_out": dict_out, "gpt2_tied": gpt2_tied,
    "mlp_tied": mlp_tied,
}
# Second wave: name -> (builder, traced).
MODELS.update({name: fn for name, (fn, _) in wave2.MODELS.items()})
MODELS["dlrm_large"] = wave2.dlrm_large


def densenet121():
    # 26.6 MiB of weights, 11 MiB of them in features.denseblock3.
    return torchvision.models.densenet121(num_classes=10), images()


MODELS["densenet121"] = densenet121


def deep_convs():
    # A deep plain conv stack (no normalization, no skips) whose weights
    # shrink each signal by ~0.3x: the backward's gradients go denormal
    # (floats below 1.18e-38), the numbers many x86 cores compute ~100x
    # slower unless flushed to zero. Checked here, with flushing off.
    width, depth = 32, 40
    layers = [nn.Conv2d(3, width, 3, padding=1)]
    for _ in range(depth - 1):
        layers += [nn.ReLU(), nn.Conv2d(width, width, 3, padding=1)]
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(width * 32 * 32, 10))
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Conv2d):
                m.weight.mul_(0.3)
                m.bias.zero_()
    data = images(size=32)
    torch.set_flush_denormal(False)
    probe = copy.deepcopy(model)
    F.cross_entropy(probe(data["inputs"][:8]), data["targets"][:8]).backward()
    tiny = sum(int(((p.grad.abs() > 0) & (p.grad.abs() < 1.1754944e-38)).sum())
               for p in probe.parameters())
    assert tiny > 10000, f"deep_convs: only {tiny} denormal gradients"
    return model, data


MODELS["deep_convs"] = deep_convs
TRACED = {name for name, (_, traced) in wave2.MODELS.items() if traced}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    for name in names:
        if name not in MODELS:
            sys.exit(f"unknown model {name!r}; the suite has {', '.join(MODELS)}")
        torch.manual_seed(0)
        model, data = MODELS[name]()
        model.train()
        if name in TRACED:
            # Traced on two samples: shapes come from aten::size, so any
            # microbatch runs.
            inputs = data["inputs"]
            example = tuple(inputs.values()) if isinstance(inputs, dict) else (inputs,)
            scripted = torch.jit.trace(model, tuple(x[:2] for x in example))
        else:
            scripted = torch.jit.script(model)
        scripted.save(os.path.join(out, f"{name}.pt"))
        torch.save(data, os.path.join(out, f"{name}_data.pt"))
    # A data dict of one entry: Python pickles it with SETITEM, which
    # LibTorch 1.13 cannot read (the loader's error must say so).
    torch.save({"inputs": torch.zeros(2, 3)}, os.path.join(out, "one_entry_data.pt"))


if __name__ == "__main__":
    main()
