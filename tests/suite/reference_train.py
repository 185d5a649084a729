#!/usr/bin/python3
"""The plain PyTorch loop Harmony's results are compared with: a scripted
model, torch.optim, gradient accumulation over microbatches.

    /usr/bin/python3 tests/suite/reference_train.py MODEL.pt DATA.pt OUT.pt \
        --minibatch 8 --microbatch 2 --iterations 3 --optimizer sgd --lr 0.1 \
        [--momentum 0.9] [--loss auto|cross-entropy|mse] [--loss-output SEL] \
        [--flush-denormal on|off]
    /usr/bin/python3 tests/suite/reference_train.py --jobs runs.json
(several runs in one process; each a JSON object with the same fields)

For every iteration it takes rows (it * D + j) % N of the data (j < D), runs
each microbatch forward, scales its loss by size / D and calls backward (so
.grad holds the minibatch's gradient), then takes one optimizer step. The
graph executor's optimisations are off, as in Harmony's vLayers, so that the
same ops run in the same order.

OUT.pt gets {"losses": [K] float64, "first_step": {name: tensor} (the
weights after the first step), "weights": {name: tensor}, "buffers": {name:
tensor}}, parameters under the names named_parameters()
gives them (a tied weight once, under its first name).

The loss follows Harmony's rules (common/loss.h, common/model_output.h):
forward's output, or the element --loss-output names (an index, a key or a
field; by default the first scalar tensor, else the first tensor), is the
loss when it is a scalar; otherwise cross-entropy (integer targets) or MSE
(float targets) is applied: over the last dimension when the targets have
the output's shape without it, over dimension 1 (N,C,H,W logits with N,H,W
targets) otherwise.
"""
import argparse
import json

import torch
import torch.nn.functional as F


def pick(output, selector):
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        items = list(output.items())
    elif hasattr(output, "_fields"):
        items = list(zip(output._fields, output))
    else:
        items = [(str(i), v) for i, v in enumerate(output)]
    if selector:
        for i, (key, value) in enumerate(items):
            if selector in (key, str(i)):
                return value
        raise SystemExit(f"forward's output has no element {selector!r}")
    tensors = [v for _, v in items if isinstance(v, torch.Tensor)]
    for t in tensors:
        if t.dim() == 0:
            return t
    return tensors[0]


def loss_of(out, targets, took_targets, kind):
    if out.dim() == 0 and (took_targets or kind == "auto"):
        return out
    (target,) = targets
    if kind == "auto":
        kind = "mse" if target.is_floating_point() else "cross-entropy"
    if kind == "mse":
        return F.mse_loss(out, target.to(out.dtype))
    if out.shape[:-1] == target.shape:
        return F.cross_entropy(out.reshape(-1, out.size(-1)), target.reshape(-1))
    return F.cross_entropy(out, target)


def as_list(value, arguments):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [value[name] for name in arguments if name in value]
    return list(value)


def train(a):
    """One run: `a` has the flags' fields. Writes a.out."""
    torch.set_flush_denormal(a.flush_denormal == "on")
    model = torch.jit.load(a.model)
    model.train()
    arguments = [x.name for x in model.forward.schema.arguments[1:]]
    data = torch.load(a.data)
    if not isinstance(data, dict) or "inputs" not in data:
        data = {"inputs": data}
    inputs = as_list(data["inputs"], arguments)
    targets = as_list(data["targets"], arguments) if "targets" in data else []
    took_targets = len(arguments) == len(inputs) + len(targets) and len(targets) > 0

    params = [t for _, t in model.named_parameters()]
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, foreach=False)
    else:
        opt = torch.optim.Adam(params, lr=a.lr, foreach=False)

    n = inputs[0].size(0)
    losses = []
    first_step = {}
    with torch.jit.optimized_execution(False):
        for it in range(a.iterations):
            rows = torch.tensor([(it * a.minibatch + j) % n for j in range(a.minibatch)])
            opt.zero_grad(set_to_none=True)
            total = 0.0
            for offset in range(0, a.minibatch, a.microbatch):
                size = min(a.microbatch, a.minibatch - offset)
                xs = [t.index_select(0, rows).narrow(0, offset, size) for t in inputs]
                ys = [t.index_select(0, rows).narrow(0, offset, size) for t in targets]
                out = model(*(xs + ys if took_targets else xs))
                loss = loss_of(pick(out, a.loss_output), ys, took_targets, a.loss)
                scaled = loss * (size / a.minibatch)
                total += scaled.item()
                scaled.backward()
            losses.append(total)
            opt.step()
            if it == 0:
                first_step = {k: v.detach().clone() for k, v in model.named_parameters()}
    torch.save({"losses": torch.tensor(losses, dtype=torch.float64),
                "first_step": first_step,
                "weights": {k: v.detach() for k, v in model.named_parameters()},
                "buffers": {k: v.detach() for k, v in model.named_buffers()}}, a.out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", nargs="?")
    p.add_argument("data", nargs="?")
    p.add_argument("out", nargs="?")
    p.add_argument("--minibatch", type=int)
    p.add_argument("--microbatch", type=int)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--loss", choices=["auto", "cross-entropy", "mse"], default="auto")
    p.add_argument("--loss-output", default="")
    p.add_argument("--flush-denormal", choices=["on", "off"], default="on",
                   help="torch.set_flush_denormal, as Harmony's --flush-denormal "
                   "(set before any computation, so that the intra-op threads "
                   "inherit it)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads (0: PyTorch's default)")
    p.add_argument("--jobs", help="a JSON list of runs, each an object with the "
                   "fields above (model, data, out, minibatch, ...)")
    a = p.parse_args()

    # Some kernels (oneDNN's convolutions, LayerNorm's weight gradient) round
    # differently at another intra-op thread count: a run compared with
    # Harmony's bit for bit computes on its devices' count.
    if a.threads:
        torch.set_num_threads(a.threads)
    # Before any computation: LibTorch's OpenMP threads inherit it when they
    # start (a job's own --flush-denormal reaches only this thread after).
    torch.set_flush_denormal(a.flush_denormal == "on")
    if a.jobs:
        with open(a.jobs) as f:
            for job in json.load(f):
                run = vars(p.parse_args([job["model"], job["data"], job["out"],
                                         "--minibatch", str(job["minibatch"]),
                                         "--microbatch", str(job["microbatch"])]))
                run.update(job)
                train(argparse.Namespace(**run))
        return
    if not (a.model and a.data and a.out and a.minibatch and a.microbatch):
        p.error("need MODEL DATA OUT --minibatch --microbatch, or --jobs")
    train(a)


if __name__ == "__main__":
    main()
