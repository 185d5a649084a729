#!/usr/bin/env python3
"""Where a run's devices stood still, from a `harmony-exec run --trace`.

Usage: scripts/trace_gaps.py TRACE [SIM_TRACE]

Per iteration (the first left out, as it warms up): each device's compute,
the iteration's length and how long its slowest device did not compute.
Then, over those iterations, the devices' gaps between computes by kind:
within a task (between its microbatches), between tasks with a forward on
one side, between backward tasks; of the last, the part a device waited for
the other devices to finish the same pack (vDP's reduction runs them in
step) and the rest (its own hand-over: the reduction, the gradients sent out, the
next task's start). With SIM_TRACE (`harmony-plan simulate --trace`), the
simulator's iteration beside it.
"""

import json
import statistics
import sys

FORWARD_SIDE = "between tasks, a forward on one side"


def events(path):
    with open(path) as f:
        trace = json.load(f)
    out = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    out.sort(key=lambda e: e["ts"])
    return out


def computes(ev, pid, lo, hi):
    return [e for e in ev if e["pid"] == pid and e["tid"] == 2 and lo <= e["ts"] < hi]


def task_of(name):
    return name.split(" #")[0]


def iterations(ev):
    """[(start, end)] in microseconds: each starts with task 0's first input."""
    starts = sorted(e["ts"] for e in ev if e["pid"] == 1 and e["tid"] == 0
                    and e["name"].startswith("data in task 0 #0"))
    if not starts:  # A simulator's trace: one iteration.
        return [(0, max(e["ts"] + e["dur"] for e in ev))]
    end = max(e["ts"] + e["dur"] for e in ev)
    return list(zip(starts, starts[1:] + [end]))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    ev = events(sys.argv[1])
    devices = sorted({e["pid"] for e in ev if e["pid"] >= 1})
    spans = iterations(ev)
    timed = spans[1:] if len(spans) > 1 else spans
    gaps = {}
    for i, (lo, hi) in enumerate(spans):
        per = {d: computes(ev, d, lo, hi) for d in devices}
        busy = {d: sum(e["dur"] for e in per[d]) / 1e3 for d in devices}
        length = (hi - lo) / 1e3
        print(f"iteration {i + 1}: {length:.1f} ms, compute "
              + ", ".join(f"device {d - 1} {busy[d]:.1f} ms" for d in devices)
              + f"; the slowest device idle {length - max(busy.values()):.1f} ms")
        if (lo, hi) not in timed:
            continue
        ends = {d: {e["name"]: e["ts"] + e["dur"] for e in per[d]} for d in devices}
        for d in devices:
            for a, b in zip(per[d], per[d][1:]):
                gap = (b["ts"] - a["ts"] - a["dur"]) / 1e3
                same = task_of(a["name"]) == task_of(b["name"])
                backward = not any(x["name"].startswith("forward") for x in (a, b))
                kind = "within a task" if same else (
                    "between backward tasks" if backward else FORWARD_SIDE)
                gaps.setdefault(kind, []).append(gap)
                if kind == "between backward tasks":
                    mine = a["ts"] + a["dur"]
                    last = max(ends[o].get(a["name"], mine) for o in devices)
                    waited = min(max(0.0, (last - mine) / 1e3), gap)
                    gaps.setdefault("  waiting for the other devices", []).append(waited)
                    gaps.setdefault("  the rest", []).append(gap - waited)
    n = len(timed) * len(devices)
    print(f"\ngaps between computes, per device and iteration (mean of {len(timed)} iterations):")
    for kind in ("within a task", FORWARD_SIDE, "between backward tasks",
                 "  waiting for the other devices", "  the rest"):
        v = gaps.get(kind, [])
        if v:
            print(f"  {kind}: {sum(v) / n:.1f} ms over {len(v) / n:.0f} gaps "
                  f"(median {statistics.median(v):.3f} ms)")
    if len(sys.argv) == 3:
        sim = events(sys.argv[2])
        length = max(e["ts"] + e["dur"] for e in sim) / 1e3
        busy = [sum(e["dur"] for e in computes(sim, d, 0, float("inf"))) / 1e3 for d in devices]
        print(f"\nsimulated: {length:.1f} ms, compute "
              + ", ".join(f"device {d - 1} {b:.1f} ms" for d, b in zip(devices, busy))
              + f"; the slowest device idle {length - max(busy):.1f} ms")


if __name__ == "__main__":
    main()
