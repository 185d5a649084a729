#!/usr/bin/env bash
# The product end to end on one kind of device, as a user drives it: a zoo
# GPT written, profiled and planned for two small devices (so that it
# swaps), trained with `harmony-exec run` (a checkpoint halfway, then resumed
# from it in a second process: the weights must equal an uninterrupted run's
# byte for byte), then through the daemon with harmony-ctl (submit, watch,
# status, list, devices, a second job cancelled). Exits non-zero on the first
# step that fails, saying which.
#
#   scripts/gpu/product-check.sh TOOLS DEVICES OUT [PROFILE_DEVICES]
#
# TOOLS: a directory laid out as Bazel's bazel-bin (planner/harmony-plan,
# executor/harmony-exec, executor/harmony-ctl, zoo/harmony-zoo): bazel-bin
# itself, or the CMake build's run/ (scripts/gpu-check.sh). DEVICES: what
# trains, e.g. cuda:2x1GiB or cpu:2x2MiB. PROFILE_DEVICES: where the vLayers
# are profiled (default cpu:2x256MiB). PLAN_GPUS (environment): the devices
# the plan is for (default 2; 1 for a spec of one device, e.g. `cuda`).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '2,/^set/p' "$0" | sed 's/^# \{0,1\}//;/^set/d' >&2
  exit 2
fi
tools=$(cd "$1" && pwd)
devices=$2
out=$3
profile_devices=${4:-cpu:2x256MiB}
gpus=${PLAN_GPUS:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
step() { echo; echo "product-check: $*"; }
fail() { echo "product-check: FAILED: $*" >&2; exit 1; }
plan_tool=$tools/planner/harmony-plan
exec_tool=$tools/executor/harmony-exec
ctl_tool=$tools/executor/harmony-ctl

step "1. a zoo GPT (4 blocks) and 64 samples of its token data"
"$tools/zoo/harmony-zoo" gpt --depth 4 --width 64 --heads 4 --vocab 128 --seq-len 32 \
  --samples 64 -o "$out/gpt.pt" --data "$out/gpt_data.pt"

step "2. profiled on $profile_devices, planned for $gpus device(s) of 2 MiB (it must swap)"
"$plan_tool" profile "$out/gpt.pt" --sample-input "$out/gpt_data.pt" \
  --devices "$profile_devices" --max-microbatch 32 --profile-out "$out/gpt.profile.json"
kind=${profile_devices%%:*}
grep -q "\"device_kind\": \"$kind\"" "$out/gpt.profile.json" ||
  fail "the profile does not say it was measured on $kind devices"
"$plan_tool" "$out/gpt.pt" --profile "$out/gpt.profile.json" --gpus "$gpus" --device-memory 2MiB \
  --minibatch 32 -o "$out/gpt.plan.pb"

step "3. harmony-exec run on $devices: 6 iterations straight, then 3 + a resumed 3"
train() {
  "$exec_tool" run "$out/gpt.plan.pb" --model "$out/gpt.pt" --data "$out/gpt_data.pt" \
    --devices "$devices" --optimizer adamw --lr 0.003 "$@"
}
train --iterations 6 --out "$out/straight.pt" --metrics "$out/straight.metrics.jsonl"
rm -rf "$out/checkpoints"
train --iterations 3 --checkpoint-dir "$out/checkpoints"
train --iterations 6 --resume "$out/checkpoints" --out "$out/resumed.pt"
cmp "$out/straight.pt" "$out/resumed.pt" ||
  fail "the resumed run's model differs from the uninterrupted run's"
echo "resumed model equals the uninterrupted run's, byte for byte"

step "4. the daemon on $devices: submit, watch, status, list, devices, cancel"
state=$out/harmony-state
rm -rf "$state"
"$exec_tool" --listen 127.0.0.1:0 --devices "$devices" --state-dir "$state" --allow-path "$out" \
  >"$out/daemon.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true' EXIT
address=""
for _ in $(seq 1 300); do
  address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$out/daemon.log" | head -1)
  if [[ -n "$address" ]] || ! kill -0 "$daemon" 2>/dev/null; then break; fi
  sleep 0.1
done
[[ -n "$address" ]] || { cat "$out/daemon.log" >&2; fail "the daemon did not start"; }
head -1 "$out/daemon.log"
ctl() { "$ctl_tool" "$@" --address "$address" --state-dir "$state"; }
job=$(ctl submit --config "$root/configs/demo-job.json" "$out/gpt.plan.pb" --model "$out/gpt.pt" \
  --data "$out/gpt_data.pt" --out "$out/daemon.pt")
echo "submitted $job"
ctl watch "$job" || fail "job $job did not finish"
ctl status "$job" | tee "$out/status.txt"
grep -q "started on ${devices%%:*}:0" "$out/status.txt" ||
  fail "job $job's record does not name the daemon's ${devices%%:*} devices"
[[ -s "$out/daemon.pt" ]] || fail "job $job wrote no model"
long=$(ctl submit "$out/gpt.plan.pb" --model "$out/gpt.pt" --data "$out/gpt_data.pt" \
  --iterations 100000)
ctl cancel "$long"
if ctl watch "$long"; then fail "job $long ran to its end though cancelled"; fi
ctl status "$long" | tee "$out/cancelled.txt"
grep -qi cancel "$out/cancelled.txt" || fail "job $long does not say it was cancelled"
ctl list
ctl devices | tee "$out/devices.txt"
grep -q "${devices%%:*}:0" "$out/devices.txt" || fail "the daemon's devices are not ${devices%%:*}'s"
kill -TERM "$daemon"
wait "$daemon" || true
trap - EXIT
step "all steps passed on $devices"
