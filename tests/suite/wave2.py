"""The suite's second wave: the architectures people train in 2026, written
as they are in papers and repositories, in plain torch.nn. make_suite.py
scripts them (and traces the one marked traced) beside the first wave.

  llama            LLaMA-style decoder: RMSNorm module, rotary embeddings from
                   non-persistent cos/sin buffers sliced once in the top-level
                   forward and passed to every block, grouped-query attention,
                   SwiGLU MLP, causal-mask buffer, untied head;
                   forward(tokens, targets) returns the loss
  moe              GPT blocks whose MLP routes each token to its top-2 of 4
                   experts (softmax router, topk, nonzero, index_select,
                   index_add into zeros); nn.MultiheadAttention with a bool
                   causal-mask buffer
  dlrm             DLRM-style recommender: three nn.EmbeddingBag tables read in
                   a loop over a ModuleList, bottom and top MLPs, pairwise dot
                   interactions (bmm, tril_indices); forward(dense, sparse,
                   clicks) returns the BCE loss
  traced_gpt       a small transformer saved with torch.jit.trace, not script
  convnext         ConvNeXt blocks: depthwise 7x7, channels-last LayerNorm
                   through permute, layer-scale parameter
  padded_encoder   nn.MultiheadAttention encoder with a bool key_padding_mask
                   input: forward(tokens, padding)
  shared_depth     one encoder layer applied 4 times in a loop (weights shared
                   across depth)
  shape_int        an int from x.size(0), computed once and passed to every
                   block, which views its input with it
  deeplab          torchvision's DeepLabV3 at a small width: its
                   IntermediateLayerGetter over mobilenet_v3_small's features
                   (an empty dict made first, filled under `if name in
                   return_layers`), ASPP with dilated convs and an image-pooling
                   branch upsampled to the map's size, an aux FCN head whose
                   output the loss does not read; returns Dict[str, Tensor],
                   per-pixel cross-entropy on "out"
"""
import math
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

SAMPLES = 16


def tokens(vocab, seq):
    return torch.randint(1, vocab, (SAMPLES, seq))


# --- LLaMA ------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_dim = d // heads
        self.wq = nn.Linear(d, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.size()
        q = self.wq(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, -1)
        return self.wo(y)


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)

    def forward(self, y):
        return self.w2(F.silu(self.w1(y)) * self.w3(y))


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(d)
        self.attention = LlamaAttention(d, heads, kv_heads)
        self.ffn_norm = RMSNorm(d)
        self.feed_forward = SwiGLU(d, hidden)

    def forward(self, x, cos, sin, mask):
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, vocab=96, d=32, heads=4, kv_heads=2, hidden=88, layers=3, block=16):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, heads, kv_heads, hidden) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)
        head_dim = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        freqs = torch.outer(torch.arange(block).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("causal", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))

    def forward(self, tokens, targets):
        L = tokens.size(1)
        cos = self.cos[:L]
        sin = self.sin[:L]
        mask = self.causal[:L, :L]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        logits = self.output(self.norm(h))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def llama():
    seq = tokens(96, 13)
    return Llama(), {"inputs": seq[:, :-1], "targets": seq[:, 1:]}


# --- Mixture of experts -----------------------------------------------------
class Expert(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.fc = nn.Linear(d, hidden)
        self.proj = nn.Linear(hidden, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class MoE(nn.Module):
    def __init__(self, d, hidden, experts=4, top_k=2):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(experts)])

    def forward(self, x):
        B, T, C = x.size()
        flat = x.reshape(-1, C)
        probs = self.router(flat).softmax(-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            hit = (chosen == e)
            rows = hit.any(-1).nonzero().squeeze(-1)
            gate = (weights * hit.to(weights.dtype)).sum(-1).index_select(0, rows)
            y = expert(flat.index_select(0, rows)) * gate.unsqueeze(-1)
            out = out.index_add(0, rows, y)
        return out.view(B, T, C)


class MoeBlock(nn.Module):
    def __init__(self, d, heads, hidden, block):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
        self.ln_2 = nn.LayerNorm(d)
        self.moe = MoE(d, hidden)
        self.register_buffer("mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))

    def forward(self, x):
        T = x.size(1)
        h = self.ln_1(x)
        a, _ = self.attn(h, h, h, attn_mask=self.mask[:T, :T], need_weights=False)
        x = x + a
        return x + self.moe(self.ln_2(x))


class MoeGpt(nn.Module):
    def __init__(self, vocab=80, d=32, heads=4, hidden=48, layers=2, block=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.h = nn.ModuleList([MoeBlock(d, heads, hidden, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


def moe():
    seq = tokens(80, 13)
    return MoeGpt(), {"inputs": seq[:, :-1], "targets": seq[:, 1:]}


# --- DLRM -------------------------------------------------------------------
def mlp(sizes: List[int]) -> nn.Sequential:
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class Dlrm(nn.Module):
    def __init__(self, rows=(500, 400, 300), d=16, dense=13, bag=3):
        super().__init__()
        self.bottom = mlp([dense, 32, d])
        self.tables = nn.ModuleList([nn.EmbeddingBag(n, d, mode="sum") for n in rows])
        features = len(rows) + 1
        self.top = nn.Sequential(mlp([d + features * (features - 1) // 2, 32]), nn.Linear(32, 1))
        li, lj = torch.tril_indices(features, features, -1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense, sparse, clicks):
        x = self.bottom(dense)
        embedded = [x]
        for i, table in enumerate(self.tables):
            embedded.append(table(sparse[:, i]))
        t = torch.stack(embedded, dim=1)  # [B, F, d]
        z = torch.bmm(t, t.transpose(1, 2))
        pairs = z[:, self.li, self.lj]
        logit = self.top(torch.cat([x, pairs], dim=1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logit, clicks)


def dlrm():
    rows = (500, 400, 300)
    sparse = torch.stack([torch.randint(0, n, (SAMPLES, 3)) for n in rows], dim=1)
    return Dlrm(rows), {"inputs": {"dense": torch.randn(SAMPLES, 13), "sparse": sparse},
                        "targets": torch.randint(0, 2, (SAMPLES,)).float()}


def dlrm_large():
    # The recommender at a real table's size: three 60000 x 32 tables.
    rows = (60000, 60000, 60000)
    sparse = torch.stack([torch.randint(0, n, (SAMPLES, 3)) for n in rows], dim=1)
    return Dlrm(rows, d=32), {"inputs": {"dense": torch.randn(SAMPLES, 13), "sparse": sparse},
                              "targets": torch.randint(0, 2, (SAMPLES,)).float()}


# --- Traced transformer -----------------------------------------------------
class TracedBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).chunk(3, dim=-1)
        q = q.reshape(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.reshape(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.reshape(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class TracedGpt(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=3, block=12):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, block, d) * 0.02)
        self.blocks = nn.Sequential(*[TracedBlock(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.ln(self.blocks(self.emb(x) + self.pos)))


def traced_gpt():
    seq = tokens(64, 13)
    return TracedGpt(), {"inputs": seq[:, :-1], "targets": seq[:, 1:]}


# --- ConvNeXt ---------------------------------------------------------------
class ConvNextBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dwconv = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.pwconv1 = nn.Linear(d, 4 * d)
        self.pwconv2 = nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.full((d,), 0.5))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class ConvNext(nn.Module):
    def __init__(self, dims=(16, 32), classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, dims[0], 4, stride=4)
        self.stage1 = nn.Sequential(ConvNextBlock(dims[0]), ConvNextBlock(dims[0]))
        self.down = nn.Conv2d(dims[0], dims[1], 2, stride=2)
        self.stage2 = nn.Sequential(ConvNextBlock(dims[1]), ConvNextBlock(dims[1]))
        self.norm = nn.LayerNorm(dims[1])
        self.head = nn.Linear(dims[1], classes)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(self.norm(x.mean([-2, -1])))


def convnext():
    return ConvNext(), {"inputs": torch.randn(SAMPLES, 3, 32, 32),
                        "targets": torch.randint(0, 10, (SAMPLES,))}


# --- Encoder with a padding-mask input --------------------------------------
class PaddedLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
        self.norm2 = nn.LayerNorm(d)

    def forward(self, x, padding):
        a, _ = self.attn(x, x, x, key_padding_mask=padding, need_weights=False)
        x = self.norm1(x + a)
        return self.norm2(x + self.ff(x))


class PaddedEncoder(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, layers=2, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([PaddedLayer(d, heads) for _ in range(layers)])
        self.head = nn.Linear(d, classes)

    def forward(self, tokens, padding):
        h = self.emb(tokens)
        for layer in self.layers:
            h = layer(h, padding)
        keep = (~padding).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))


def padded_encoder():
    x = tokens(50, 10)
    lengths = torch.randint(4, 11, (SAMPLES,))
    padding = torch.arange(10).unsqueeze(0) >= lengths.unsqueeze(1)
    x[padding] = 0
    return PaddedEncoder(), {"inputs": {"tokens": x, "padding": padding},
                             "targets": torch.randint(0, 3, (SAMPLES,))}


# --- Weights shared across depth --------------------------------------------
class SharedDepth(nn.Module):
    def __init__(self, d=32, heads=4, depth=4, classes=4):
        super().__init__()
        self.depth = depth
        self.inp = nn.Linear(8, d)
        self.layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        h = self.inp(x)
        for _ in range(self.depth):
            h = self.layer(h)
        return self.head(h.mean(1))


def shared_depth():
    return SharedDepth(), {"inputs": torch.randn(SAMPLES, 6, 8),
                           "targets": torch.randint(0, 4, (SAMPLES,))}


# --- An int from a shape, read by every block -------------------------------
class ShapeBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, h, batch: int):
        return torch.tanh(self.fc(h.view(batch, -1, 8))).reshape(batch, -1)


class ShapeInt(nn.Module):
    def __init__(self, blocks=3, classes=4):
        super().__init__()
        self.inp = nn.Linear(12, 32)
        self.blocks = nn.ModuleList([ShapeBlock(8) for _ in range(blocks)])
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        batch = x.size(0)  # An int crossing every cut after the first.
        h = self.inp(x)
        for block in self.blocks:
            h = block(h, batch)
        return self.head(h)


def shape_int():
    return ShapeInt(), {"inputs": torch.randn(SAMPLES, 12),
                        "targets": torch.randint(0, 4, (SAMPLES,))}


def deeplab():
    import torchvision
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.segmentation.deeplabv3 import ASPP, DeepLabV3
    from torchvision.models.segmentation.fcn import FCNHead
    features = torchvision.models.mobilenet_v3_small().features
    backbone = IntermediateLayerGetter(features, {"3": "aux", "8": "out"})
    classes = 5
    head = nn.Sequential(ASPP(48, [2, 4, 6], out_channels=32),
                         nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
                         nn.ReLU(), nn.Conv2d(32, classes, 1))
    model = DeepLabV3(backbone, head, FCNHead(24, classes))
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model, {"inputs": torch.randn(SAMPLES, 3, 64, 64),
                   "targets": torch.randint(0, classes, (SAMPLES, 64, 64))}


# name -> (builder, traced)
MODELS = {
    "llama": (llama, False),
    "moe": (moe, False),
    "dlrm": (dlrm, False),
    "traced_gpt": (traced_gpt, True),
    "convnext": (convnext, False),
    "padded_encoder": (padded_encoder, False),
    "shared_depth": (shared_depth, False),
    "shape_int": (shape_int, False),
    "deeplab": (deeplab, False),
}
