#!/usr/bin/env python3
"""Per-vLayer compute of a run against a profile.

Usage: scripts/trace_vs_profile.py TRACE.json PROFILE.json FORWARD_U BACKWARD_U

TRACE.json: `harmony-exec run ... --trace`; PROFILE.json: a profile of the same
model (e.g. `harmony-plan profile --microbatches U1,U2`, taken right before the
run); FORWARD_U / BACKWARD_U: the plan's forward and backward microbatch sizes
(`harmony-plan inspect`). Prints, per compute task kind and vLayer range, the
median measured duration beside the profile's times (alone, beside busy devices,
one vLayer over and over, and as the simulator prices the pack: beside busy
devices, its later vLayers at their chained share), then the totals and the
measured / profiled ratios per task kind and in all; and per kind a task's
first microbatch against its later ones, measured.
"""
import collections
import json
import re
import statistics
import sys


def main(trace_path, profile_path, forward_u, backward_u):
    vlayers = json.load(open(profile_path))["profile"]["vlayers"]

    def row(k, size):
        for r in vlayers[k]["by_microbatch"]:
            if r["size"] == size:
                return r
        sys.exit(f"{profile_path}: vLayer {k} has no microbatch {size}: profile that size")

    trace = json.load(open(trace_path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    tasks = collections.defaultdict(list)
    # Per kind (single vLayers or packs): a task's first microbatch and its
    # later ones, which run on weights the device's core read a microbatch
    # before; the profile times every step as a first one.
    first_later = collections.defaultdict(lambda: ([], []))
    last = {}  # Per device: the task computing.
    for e in sorted(events, key=lambda e: e.get("ts", 0)):
        if e.get("ph") != "X" or names.get((e["pid"], e["tid"])) != "compute":
            continue
        m = re.match(r"(forward|backward|forward\+loss\+backward) (\d+)-(\d+) #", e["name"])
        if m:
            key = (m.group(1), int(m.group(2)), int(m.group(3)))
            tasks[key].append(e["dur"] / 1e6)
            kind = f"{key[0]} {'single' if key[1] == key[2] else 'pack'}"
            first_later[kind][last.get(e["pid"]) == key].append(e["dur"] / 1e6)
            last[e["pid"]] = key
    total = collections.defaultdict(float)
    for (kind, a, b), durations in sorted(tasks.items(), key=lambda t: (t[0][1], t[0][0])):
        forward = kind == "forward"
        size, key = (forward_u, "forward_time") if forward else (backward_u, "backward_time")
        prof = {s: sum(row(k, size).get(f"{key}{s}_s", 0) for k in range(a, b + 1))
                for s in ("", "_busy", "_one")}
        # As the simulator prices the pack: its first vLayer's time beside the
        # busy devices, the later ones' times their chained share.
        chained = (forward and "forward" or "backward") + "_chained"
        prof["_chained"] = sum(row(k, size).get(f"{key}_busy_s", 0) *
                               (1 if k == a else row(k, size).get(chained, 0) or 1)
                               for k in range(a, b + 1))
        median = statistics.median(durations)
        n = len(durations)
        for part in ("", kind):
            total[part, "measured"] += median * n
            for s, v in prof.items():
                total[part, s or "_alone"] += v * n
        print(f"{kind:22s} {a:3d}-{b:<3d} n={n:4d} measured {median * 1e3:8.3f} ms  "
              f"alone {prof[''] * 1e3:8.3f}  busy {prof['_busy'] * 1e3:8.3f}  "
              f"one {prof['_one'] * 1e3:8.3f}  as priced {prof['_chained'] * 1e3:8.3f}")
    if not total:
        sys.exit(f"{trace_path}: no compute tasks")
    # Per task kind, then in all: the forward and the backward may stand
    # apart from the profile, which one scale for all compute misprices.
    for part in sorted({p for p, _ in total if p}) + [""]:
        measured = total[part, "measured"]
        print(f"{part or 'total':22s} measured {measured:.3f} s; measured / alone "
              f"{measured / total[part, '_alone']:.2f}, / busy "
              f"{measured / total[part, '_busy']:.2f}, / one {measured / total[part, '_one']:.2f}, "
              f"/ as priced (busy, chained) {measured / total[part, '_chained']:.2f}")
    for kind, (first, later) in sorted(first_later.items()):
        if first and later:
            a, b = statistics.median(first), statistics.median(later)
            print(f"{kind:22s} a task's first microbatch {a * 1e3:.3f} ms, later ones "
                  f"{b * 1e3:.3f} ms (medians of {len(first)} and {len(later)}): {b / a:.2f}x")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
