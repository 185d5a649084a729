#!/usr/bin/env python3
"""A pack of conv blocks against the same blocks one at a time, in plain PyTorch.

Usage: scripts/pack_vs_steps.py MODEL.pt DATA.pt [BLOCKS] [MICROBATCH]

MODEL.pt: a zoo vgg (`features.N` conv layers, each followed by a ReLU), e.g.
the bench's vgg.pt; DATA.pt its sample data. On one thread with denormals
flushed, times the recompute + backward of BLOCKS conv+ReLU blocks (default
6, from block 1) at MICROBATCH (default 8) three ways, interleaved 60 times
and paired:
  pack   - the forwards in turn, then one backward (as the runtime's pack);
  chain  - recompute + backward one block at a time, the gradient handed on;
  steps  - one block at a time on fresh copies of its inputs (as the profile's
           steps in turn).
Prints the medians of chain / pack and steps / pack (the profile's chained
factor models what `pack` saves: docs/DESIGN.md §5.1).
"""
import statistics
import sys
import time

import torch


def main(model_path, data_path, blocks=6, microbatch=8):
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    model = torch.jit.load(model_path)
    data = torch.load(data_path)
    x0 = data["inputs"][0] if isinstance(data["inputs"], list) else data["inputs"]
    convs = [getattr(model.features, str(i)) for i in range(blocks + 2)]
    weights = [(c.weight.detach().clone(), c.bias.detach().clone()) for c in convs]
    acts = [x0[:microbatch].clone()]
    with torch.no_grad():
        for w, b in weights[:blocks + 1]:
            acts.append(torch.relu(torch.nn.functional.conv2d(acts[-1], w, b, padding=1)))

    def block(x, w, b):
        return torch.relu(torch.nn.functional.conv2d(x, w, b, padding=1))

    def prep(lo, hi):
        ws = [(w.clone().requires_grad_(), b.clone().requires_grad_()) for w, b in weights[lo:hi]]
        return ws, acts[lo].clone().requires_grad_(), torch.randn_like(acts[hi]) * 1e-3

    def pack():
        ws, x, g = prep(1, blocks + 1)
        start = time.perf_counter()
        y = x
        for w, b in ws:
            y = block(y, w, b)
        torch.autograd.backward([y], [g])
        return time.perf_counter() - start

    def chain():
        ws, _, g = prep(1, blocks + 1)
        ins = [acts[k].clone().requires_grad_() for k in range(1, blocks + 1)]
        total = 0
        for j in range(blocks - 1, -1, -1):
            start = time.perf_counter()
            torch.autograd.backward([block(ins[j], *ws[j])], [g])
            total += time.perf_counter() - start
            g = ins[j].grad
        return total

    def steps():
        total = 0
        for k in range(1, blocks + 1):
            ws, x, g = prep(k, k + 1)
            start = time.perf_counter()
            torch.autograd.backward([block(x, *ws[0])], [g])
            total += time.perf_counter() - start
        return total

    ratios = {"chain": [], "steps": []}
    for _ in range(60):
        p = pack()
        ratios["chain"].append(chain() / p)
        ratios["steps"].append(steps() / p)
    print(f"{blocks} blocks at microbatch {microbatch}: chain / pack "
          f"{statistics.median(ratios['chain']):.3f}, steps / pack "
          f"{statistics.median(ratios['steps']):.3f} (medians of 60 paired)")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], *[int(a) for a in sys.argv[3:5]])
