#!/usr/bin/env python3
"""The replay's table (scripts/gpu/replay.sh): reads what each step left in
OUT and prints Markdown. Per model: the training footprint over the devices'
memory; per schedule: the plan, seconds and samples per iteration (median of
the iterations after the first), the simulated iteration and its error, the
bytes over the host link per iteration, the host-to-device rate while the
weights were copying (trace events "weights in", after the first iteration)
against the profile's pinned bandwidth, and Harmony against each baseline.
With --harmony-plan, also each plan simulated again at the compute speed its
run measured (harmony-plan simulate --compute-scale): the simulator's error
with the profile's compute set aside (on the GPU replays of 11-27 and 11-28
Harmony's read -1% to -6% so, where its plain error was -37% to -66%)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def fmt_bytes(b):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b:.0f} B"


def fmt_s(s):
    return f"{s:.3f} s" if s >= 1 else f"{s * 1e3:.1f} ms"


def load_json(path):
    with open(path) as f:
        return json.load(f)


def footprint(profile, minibatch):
    """Weights, gradients, optimizer state and every saved activation of a
    plain (no recompute, no swap) training step at this minibatch."""
    state = 0
    activations = 0.0
    for v in profile["vlayers"]:
        state += int(v.get("parameter_bytes", 0)) + int(v.get("gradient_bytes", 0))
        state += int(v.get("optimizer_state_bytes", 0))
        sizes = v.get("by_microbatch", [])
        if sizes:
            r = min(sizes, key=lambda r: r["size"])
            activations += int(r.get("kept_bytes", r.get("saved_bytes", 0))) / r["size"]
    return state, activations * minibatch


def weights_in_rate(trace_path, weights_in_per_iteration):
    """Bytes per second while the weights stream copied, after the first
    iteration (as every other figure; it takes the caching allocator's first
    allocation of each size): the runtime's weights-in bytes over the summed
    duration of its "weights in" events. Every iteration runs the same
    tasks, so the first iteration's events are the earliest 1/N of them."""
    if not os.path.exists(trace_path) or sum(weights_in_per_iteration) == 0:
        return None
    trace = load_json(trace_path)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    copies = sorted((e for e in events
                     if e.get("ph") == "X" and e.get("name", "").startswith("weights in")),
                    key=lambda e: e.get("ts", 0))
    n = len(weights_in_per_iteration)
    weights_in = sum(weights_in_per_iteration)
    if n > 1 and copies and len(copies) % n == 0:
        copies = copies[len(copies) // n:]
        weights_in = sum(weights_in_per_iteration[1:])
    busy_us = sum(e.get("dur", 0) for e in copies)
    return weights_in / (busy_us * 1e-6) if busy_us > 0 else None


def simulated_at(harmony_plan, plan_path, scale):
    """The plan's iteration simulated with its compute times x scale, in
    seconds, or None."""
    try:
        done = subprocess.run([harmony_plan, "simulate", plan_path, "--compute-scale", f"{scale:.6g}"],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"iteration ([0-9.]+) (ms|s) ", done.stdout)
    if done.returncode != 0 or not m:
        return None
    return float(m.group(1)) / (1e3 if m.group(2) == "ms" else 1)


def schedule_row(out, model, schedule, harmony_plan=None):
    name = f"{model}.{schedule}"
    row = {"schedule": schedule}
    if os.path.exists(os.path.join(out, name + ".nofit")):
        row["status"] = "does not fit"
        return row
    plan_path = os.path.join(out, name + ".plan.json")
    if not os.path.exists(plan_path):
        row["status"] = "not planned"
        return row
    plan = load_json(plan_path)
    config = plan["config"]
    row["plan"] = plan
    row["mode"] = config.get("mode", "VPP")
    row["microbatch"] = f'{config.get("forward_microbatch", 1)}/{config.get("backward_microbatch", 1)}'
    row["simulated_s"] = plan["estimates"]["iteration_time_s"]
    metrics_path = os.path.join(out, name + ".metrics.jsonl")
    lines = []
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    if not lines:
        row["status"] = f"did not train (see {name}.train.log)"
        return row
    timed = lines[1:] or lines
    row["status"] = "trained"
    row["iterations"] = len(lines)
    row["seconds"] = statistics.median(m["seconds"] for m in timed)
    row["samples_per_s"] = statistics.median(m["samples_per_s"] for m in timed)
    row["compute_s"] = statistics.median(m["compute_s"] for m in timed)
    # The run's compute over the plan's (both summed over the devices), and
    # the plan simulated again at that speed.
    planned = plan["estimates"].get("compute_s", 0)
    pb = os.path.join(out, name + ".pb")
    if harmony_plan and planned > 0 and os.path.exists(pb):
        row["compute_ratio"] = row["compute_s"] / planned
        row["simulated_at_own_s"] = simulated_at(harmony_plan, pb, row["compute_ratio"])
    row["wait_s"] = statistics.median(m.get("swap_wait_s", 0) for m in timed)
    # The host summing gradients into its store (metrics since 11-29): the
    # threads' seconds, and what waited for its turn.
    if all("host_sums" in m for m in timed):
        row["host_sum_s"] = statistics.median(m["host_sums"]["seconds"] for m in timed)
        row["host_sum_early"] = statistics.median(m["host_sums"]["early_bytes"] for m in timed)
    b = timed[-1]["bytes"]
    row["to_device"] = b.get("to_device", 0)
    row["to_host"] = b.get("to_host", 0)
    row["peer"] = b.get("peer", 0)
    row["weights_gradients"] = b.get("weights_in", 0) + b.get("gradients_out", 0)
    row["peak"] = max(int(p) for p in timed[-1].get("device_peak_bytes", [0]))
    # The link as a whole (metrics' host_link): every copy to the devices
    # while any was crossing, copies of several devices at once counted once.
    link = [m["host_link"] for m in timed if "host_link" in m]
    busy = sum(l.get("to_device_busy_s", 0) for l in link)
    row["link_rate"] = sum(l.get("to_device_bytes", 0) for l in link) / busy if busy > 0 else None
    row["weights_in_rate"] = weights_in_rate(os.path.join(out, name + ".trace.json"),
                                             [m["bytes"].get("weights_in", 0) for m in lines])
    return row


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def model_section(out, model, schedules, harmony_plan=None):
    profile_path = os.path.join(out, model + ".profile.json")
    if not os.path.exists(profile_path):
        return [f"## {model}", "", "not profiled", ""]
    profile = load_json(profile_path)
    profile = profile.get("profile", profile)
    minibatch = int(open(os.path.join(out, model + ".minibatch")).read())
    rows = [schedule_row(out, model, s, harmony_plan) for s in schedules]
    planned = [r for r in rows if "plan" in r]
    lines = [f"## {model}", ""]
    weights = sum(int(v.get("parameter_bytes", 0)) for v in profile["vlayers"])
    state, activations = footprint(profile, minibatch)
    bw = profile.get("bandwidths", {})
    pinned = bw.get("host_to_device_bytes_per_s", 0)
    lines.append(f"- {len(profile['vlayers'])} vLayers, {fmt_bytes(weights)} of weights; "
                 f"profiled on {profile.get('device_name', '?')} ({profile.get('device_kind', '?')}), "
                 f"optimizer {profile.get('optimizer', '?')}; minibatch {minibatch}.")
    if planned:
        c = planned[0]["plan"]["config"]
        total = int(c["device_memory_bytes"]) * int(c["num_devices"])
        lines.append(
            f"- Training footprint without swapping or recompute: {fmt_bytes(state)} of weights, "
            f"gradients and optimizer state + {fmt_bytes(activations)} of saved activations = "
            f"{fmt_bytes(state + activations)}, **{(state + activations) / total:.1f}x** the "
            f"{c['num_devices']} devices' {fmt_bytes(total)}.")
    if pinned:
        both = bw.get("both_directions_bytes_per_s", 0)
        lines.append(f"- Pinned copies (the profile): host to device {pinned / 1e9:.1f} GB/s, "
                     f"device to host {bw.get('device_to_host_bytes_per_s', 0) / 1e9:.1f} GB/s"
                     + (f", both at once {both / 1e9:.1f} GB/s each" if both else "") + ".")
    lines.append("")
    own = harmony_plan is not None
    lines.append("| schedule | plan | s / iteration | samples/s | simulated (error) | "
                 + ("at the run's compute speed (error) | " if own else "") + "compute, summed over devices | "
                 "host link per iteration (in / out) | host sums of gradients, thread-seconds "
                 "(kept for their turn) | weights + gradients | H2D while copying weights "
                 "(of pinned) | H2D link while busy, every copy (of pinned) | peak device memory | "
                 "Harmony's samples/s ÷ | its weights+gradients ÷ Harmony's |")
    lines.append("|---" * (15 if own else 14) + "|")
    harmony = next((r for r in rows if r["schedule"] == "harmony" and r["status"] == "trained"), None)
    for r in rows:
        if r["status"] != "trained":
            plan = f'{r["mode"]}, u={r["microbatch"]}' if "mode" in r else ""
            lines.append(f'| {r["schedule"]} | {plan} | {r["status"]} |' + " |" * (12 if own else 11))
            continue
        error = (r["simulated_s"] - r["seconds"]) / r["seconds"]
        rate = r["weights_in_rate"]
        def of_pinned(rate):
            return (f"{rate / 1e9:.1f} GB/s" + (f" ({rate / pinned:.0%})" if pinned else "")
                    if rate else "n/a")
        h2d = of_pinned(rate)
        link_h2d = of_pinned(r["link_rate"])
        versus = ratio(harmony["samples_per_s"], r["samples_per_s"]) if harmony else "n/a"
        bytes_ratio = ratio(r["weights_gradients"], harmony["weights_gradients"]) if harmony else "n/a"
        sums = (f'{fmt_s(r["host_sum_s"])} ({fmt_bytes(r["host_sum_early"])})'
                if "host_sum_s" in r else "n/a")
        at_own = ""
        if own:
            t = r.get("simulated_at_own_s")
            at_own = (f'{fmt_s(t)} ({(t - r["seconds"]) / r["seconds"]:+.0%}; compute '
                      f'{r["compute_ratio"]:.2f}x) | ' if t else "n/a | ")
        lines.append(
            f'| {r["schedule"]} | {r["mode"]}, u={r["microbatch"]} | {fmt_s(r["seconds"])} | '
            f'{r["samples_per_s"]:.2f} | {fmt_s(r["simulated_s"])} ({error:+.0%}) | {at_own}{fmt_s(r["compute_s"])} | '
            f'{fmt_bytes(r["to_device"])} / {fmt_bytes(r["to_host"])} | {sums} | '
            f'{fmt_bytes(r["weights_gradients"])} | '
            f'{h2d} | {link_h2d} | {fmt_bytes(r["peak"])} | {versus} | {bytes_ratio} |')
    lines.append("")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--models", default="gpt vgg")
    parser.add_argument("--schedules", default="harmony ondemand gpipe dp-swap")
    parser.add_argument("--harmony-plan", help="the harmony-plan binary: adds each plan simulated "
                        "again at its run's compute speed")
    args = parser.parse_args()
    lines = ["# Replay: the original Harmony's experiment", ""]
    settings = os.path.join(args.out, "settings.txt")
    if os.path.exists(settings):
        lines += ["```", open(settings).read().rstrip(), "```", ""]
    lines.append("Medians of the iterations after the first. The paper (4 GTX 1080 Ti of 11 GB on one "
                 "PCIe switch): 7.6x the throughput of virtualized memory and about 300x less swap.")
    lines.append("")
    for model in args.models.split():
        lines += model_section(args.out, model, args.schedules.split(), args.harmony_plan)
    daemon = os.path.join(args.out, "daemon.status.txt")
    if os.path.exists(daemon):
        lines += ["## The daemon job (gpt, Harmony's plan)", "", "```", open(daemon).read().rstrip(), "```", ""]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
