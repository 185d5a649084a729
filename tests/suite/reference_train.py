#!/usr/bin/python3
"""The plain PyTorch loop Harmony's results are compared with: a scripted
model, torch.optim, gradient accumulation over microbatches.

    /usr/bin/python3 tests/suite/reference_train.py MODEL.pt DATA.pt OUT.pt \
        --minibatch 8 --microbatch 2 --iterations 3 --optimizer sgd --lr 0.1 \
        [--momentum 0.9] [--loss auto|cross-entropy|mse] [--loss-output SEL] \
        [--flush-denormal on|off] [--weight-decay WD]
        [--lr-schedule constant|cosine|linear|wsd --warmup-iterations W
         --decay-iterations D --min-lr M] [--clip-grad-norm MAX]
        [--no-decay auto|PATTERNS] [--no-decay-embeddings]
        [--eval-data EVAL.pt --eval-every K --eval-iterations M
         --eval-microbatch U]
    /usr/bin/python3 tests/suite/reference_train.py --jobs runs.json
(several runs in one process; each a JSON object with the same fields)

For every iteration it takes rows (it * D + j) % N of the data (j < D), runs
each microbatch forward, scales its loss by size / D and calls backward (so
.grad holds the minibatch's gradient), then takes one optimizer step. The
graph executor's optimisations are off, as in Harmony's vLayers, so that the
same ops run in the same order.

The recipe follows the plain PyTorch way: a LambdaLR with the formula
optim/lr_schedule.h documents (decay_iterations resolved as Harmony does),
clip_grad_norm_(model.parameters(), MAX) before each step, and two
parameter groups (weight decay, none) picked by the rule of
executor/runtime/recipe.h.

--precision bf16 (a bf16 plan, common/precision.h): the optimizer keeps fp32
masters; each iteration the module's parameters become their bf16 copies
(but those of a module with floating-point buffers, BatchNorm, and of an
EmbeddingBag, which stay fp32: fp32_parameter_names), every
microbatch runs under torch.autocast("cpu", dtype=torch.bfloat16), the bf16
gradients (accumulated over the microbatches) become the masters' fp32
gradients, and clipping and the step act on the masters. With
--grad-precision fp32 the gradients are summed over the microbatches in fp32
instead (each microbatch's made fp32 and added), as a bf16 plan with
harmony-plan --grad-precision fp32 sums them.

Validation (executor/runtime/evaluation.h) after every K iterations and
after the last: model.eval(), torch.no_grad(), minibatches b < M of the
evaluation data (rows b * D + j; M = 0: every whole minibatch), each split
into microbatches of U (default --microbatch) whose losses, scaled by
size / D, are summed in order; the evaluation's loss is their mean over the
minibatches.

OUT.pt gets {"losses": [K] float64, "eval_losses": [E] float64 and
"eval_after": [E] int64 (the iteration each followed, from 1), "grad_norms": [K] float64 (with
clipping), "lrs": [K] float64, "first_step": {name: tensor} (the
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
import fnmatch
import json
import math

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


def lr_factor(a, total):
    """optim/lr_schedule.h's factor, the same operations in the same order."""
    kind = a.lr_schedule
    w = a.warmup_iterations
    d = a.decay_iterations
    if kind in ("cosine", "linear") and d == 0:
        d = total
    if kind == "wsd" and d == 0:
        d = max(1, total // 5)
    m = a.min_lr / a.lr if a.lr > 0 else 0.0

    def factor(i):
        if i < w:
            return float(i + 1) / float(w)
        if kind in ("cosine", "linear"):
            r = min(1.0, float(i - w) / float(d - w))
            if kind == "cosine":
                return m + (1.0 - m) * (0.5 * (1.0 + math.cos(math.pi * r)))
            return m + (1.0 - m) * (1.0 - r)
        if kind == "wsd":
            start = total - d
            if i >= start:
                r = min(1.0, float(i - start) / float(d))
                return m + (1.0 - m) * (1.0 - r)
        return 1.0
    return factor


def no_decay_names(model, a):
    """The parameters executor/runtime/recipe.h's rule exempts from decay."""
    if not a.no_decay and not a.no_decay_embeddings:
        return set()
    parts = [p.strip() for p in (a.no_decay or "").split(",") if p.strip()]
    one_d = "auto" in parts
    patterns = [p for p in parts if p != "auto"]
    embedding = set()
    for mname, module in model.named_modules():
        qual = module.original_name if hasattr(module, "original_name") else type(module).__name__
        if qual in ("Embedding", "EmbeddingBag"):
            for pname, _ in module.named_parameters(recurse=False):
                embedding.add(f"{mname}.{pname}" if mname else pname)
    out = set()
    for name, p in model.named_parameters():
        tails = [name] + [name[i + 1:] for i, c in enumerate(name) if c == "."]
        if (one_d and p.dim() <= 1) or (a.no_decay_embeddings and name in embedding) or \
                any(fnmatch.fnmatchcase(t, pat) for pat in patterns for t in tails):
            out.add(name)
    return out


def load_data(path, arguments):
    data = torch.load(path)
    if not isinstance(data, dict) or "inputs" not in data:
        data = {"inputs": data}
    inputs = as_list(data["inputs"], arguments)
    targets = as_list(data["targets"], arguments) if "targets" in data else []
    return inputs, targets


def fp32_parameter_names(model):
    """The parameters a bf16 plan keeps in fp32 (common/precision.h)."""
    out = set()
    for name, m in model.named_modules():
        keep = m.original_name == "EmbeddingBag" or any(
            b.is_floating_point() for b in m.buffers(recurse=False))
        if keep:
            out.update(f"{name}.{p}" if name else p
                       for p, _ in m.named_parameters(recurse=False))
    return out


def as_device_copy(model, masters):
    """The module's parameters become what a bf16 plan's devices hold."""
    fp32 = fp32_parameter_names(model)
    for n, t in model.named_parameters():
        t.data = masters[n].detach().clone() if n in fp32 else masters[n].detach().to(torch.bfloat16)


def evaluate(model, a, inputs, targets, took_targets, masters=None):
    """The validation loss, as executor/runtime/evaluation.h computes it."""
    bf16 = a.precision == "bf16"
    if bf16:
        as_device_copy(model, masters)
    model.eval()
    n = inputs[0].size(0)
    count = a.eval_iterations or max(1, n // a.minibatch)
    u = a.eval_microbatch or a.microbatch
    total = 0.0
    with torch.no_grad():
        for b in range(count):
            rows = torch.tensor([(b * a.minibatch + j) % n for j in range(a.minibatch)])
            batch = 0.0
            for offset in range(0, a.minibatch, u):
                size = min(u, a.minibatch - offset)
                xs = [t.index_select(0, rows).narrow(0, offset, size) for t in inputs]
                ys = [t.index_select(0, rows).narrow(0, offset, size) for t in targets]
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = model(*(xs + ys if took_targets else xs))
                    loss = loss_of(pick(out, a.loss_output), ys, took_targets, a.loss)
                    scaled = loss * (size / a.minibatch)
                batch += scaled.item()
            total += batch
    model.train()
    return total / count


def train(a):
    """One run: `a` has the flags' fields. Writes a.out."""
    torch.set_flush_denormal(a.flush_denormal == "on")
    model = torch.jit.load(a.model)
    model.train()
    arguments = [x.name for x in model.forward.schema.arguments[1:]]
    inputs, targets = load_data(a.data, arguments)
    took_targets = len(arguments) == len(inputs) + len(targets) and len(targets) > 0

    bf16 = a.precision == "bf16"
    named = list(model.named_parameters())
    # The tensors the optimizer steps: the module's own, or fp32 masters.
    masters = {n: (t.detach().clone() if bf16 else t) for n, t in named}
    exempt = no_decay_names(model, a)
    groups = [{"params": [masters[n] for n, t in named if n not in exempt]},
              {"params": [masters[n] for n, t in named if n in exempt],
               "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum,
                              weight_decay=a.weight_decay, foreach=False)
    elif a.optimizer == "adamw":
        opt = torch.optim.AdamW(groups, lr=a.lr, weight_decay=a.weight_decay, foreach=False)
    else:
        opt = torch.optim.Adam(groups, lr=a.lr, weight_decay=a.weight_decay, foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a, a.iterations))

    n = inputs[0].size(0)
    losses = []
    norms = []
    lrs = []
    first_step = {}
    eval_losses, eval_after = [], []
    if a.eval_data:
        eval_inputs, eval_targets = load_data(a.eval_data, arguments)
    with torch.jit.optimized_execution(False):
        for it in range(a.iterations):
            rows = torch.tensor([(it * a.minibatch + j) % n for j in range(a.minibatch)])
            opt.zero_grad(set_to_none=True)
            if bf16:
                as_device_copy(model, masters)
                for name, t in named:
                    t.grad = None
            total = 0.0
            acc = {}  # --grad-precision fp32: the fp32 sums.
            for offset in range(0, a.minibatch, a.microbatch):
                size = min(a.microbatch, a.minibatch - offset)
                xs = [t.index_select(0, rows).narrow(0, offset, size) for t in inputs]
                ys = [t.index_select(0, rows).narrow(0, offset, size) for t in targets]
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = model(*(xs + ys if took_targets else xs))
                    loss = loss_of(pick(out, a.loss_output), ys, took_targets, a.loss)
                    scaled = loss * (size / a.minibatch)
                total += scaled.item()
                scaled.backward()
                if bf16 and a.grad_precision == "fp32":
                    # Summed in fp32 over the microbatches (a bf16 plan with
                    # --grad-precision fp32): the first microbatch's bf16
                    # gradient made fp32, the next ones added to it in fp32.
                    for name, t in named:
                        if t.grad is None:
                            continue
                        g = t.grad.float()
                        acc[name] = g if name not in acc else acc[name] + g
                        t.grad = None
            if bf16 and a.grad_precision == "fp32":
                for name, t in named:
                    masters[name].grad = acc.pop(name, torch.zeros_like(masters[name]))
            elif bf16:
                for name, t in named:
                    masters[name].grad = (t.grad.float() if t.grad is not None
                                          else torch.zeros_like(masters[name]))
            losses.append(total)
            if a.clip_grad_norm > 0:
                norms.append(float(torch.nn.utils.clip_grad_norm_(
                    [masters[name] for name, _ in named], a.clip_grad_norm)))
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            if it == 0:
                first_step = {k: masters[k].detach().clone() for k, _ in named}
            done = it + 1
            if a.eval_data and (done == a.iterations or
                                (a.eval_every and done % a.eval_every == 0)):
                eval_losses.append(evaluate(model, a, eval_inputs, eval_targets, took_targets,
                                            masters))
                eval_after.append(done)
    torch.save({"losses": torch.tensor(losses, dtype=torch.float64),
                "grad_norms": torch.tensor(norms, dtype=torch.float64),
                "lrs": torch.tensor(lrs, dtype=torch.float64),
                "eval_losses": torch.tensor(eval_losses, dtype=torch.float64),
                "eval_after": torch.tensor(eval_after, dtype=torch.int64),
                "first_step": first_step,
                "weights": {k: masters[k].detach() for k, _ in named},
                "buffers": {k: v.detach() for k, v in model.named_buffers()}}, a.out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", nargs="?")
    p.add_argument("data", nargs="?")
    p.add_argument("out", nargs="?")
    p.add_argument("--minibatch", type=int)
    p.add_argument("--microbatch", type=int)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--lr-schedule", choices=["constant", "cosine", "linear", "wsd"],
                   default="constant")
    p.add_argument("--warmup-iterations", type=int, default=0)
    p.add_argument("--decay-iterations", type=int, default=0)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--clip-grad-norm", type=float, default=0.0)
    p.add_argument("--no-decay", default="")
    p.add_argument("--no-decay-embeddings", action="store_true")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--grad-precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--eval-data", default="")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-iterations", type=int, default=0)
    p.add_argument("--eval-microbatch", type=int, default=0)
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
