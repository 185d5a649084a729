#!/usr/bin/env bash
# One device-tool call's worth of GPU work, within a wall-clock budget:
# scripts/gpu-check.sh --bench (build, GPU tests, the product on CUDA, the
# bench; E2E=0), then the replay (scripts/gpu/replay.sh) with what is
# left, the GPT first (its daemon job included), then the VGG; then the
# replay's table. Every step is stopped when its share of the budget runs
# out, and the rest still report. Copies the raw output into OUT (the
# device tool's $OUT: at most 8 files come back).
#
#   scripts/gpu/lease.sh OUT BUDGET_SECONDS [xl]
#
# The replay's settings come from the environment (replay.sh); unset, the
# scaled replay of 2026-11-27 (docs/gpu/REPORT.md): cuda:4x2GiB, the
# GPT-2 medium shape at minibatch 16, a VGG of 8 x 128 at 64x64.
#
# xl: instead, GPT-2 XL (replay.sh's default GPT) on cuda:4x11GiB at
# minibatch 32, Harmony, then its plan as a daemon job (the build, about
# 90 s, then about 340 s on the H200 of 11-28: writing the model 48 s,
# profiling 2 blocks 95 s, planning 13 s, training 66 s, the daemon job
# 100 s, of which 78 s loading and writing the 6.29 GiB model, since made
# faster). SCHEDULES="harmony ondemand" adds the baseline (about 85 s each;
# gpipe and dp-swap too).
set -uo pipefail
if [[ $# -lt 2 || $# -gt 3 || ( $# -eq 3 && $3 != xl ) ]]; then
  sed -n '2,/^set/p' "$0" | sed 's/^# \{0,1\}//;/^set/d' >&2
  exit 2
fi
out=$1
budget=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${HARMONY_GPU_BUILD:-$root/.gpu-build}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( start + budget - $(date +%s) )); }
export PYTHONUNBUFFERED=1
if [[ ${3:-} == xl ]]; then
  export DEVICES=${DEVICES:-cuda:4x11GiB} SCHEDULES=${SCHEDULES:-harmony}
  export GPT_MINIBATCH=${GPT_MINIBATCH:-32} GPT_MAX_MICROBATCH=${GPT_MAX_MICROBATCH:-4}
  export RUN_TIMEOUT=${RUN_TIMEOUT:-100}
  MODELS=gpt timeout $(( budget - 15 )) "$root/scripts/gpu-check.sh" --replay 2>&1 |
    tee "$out/replay-xl.log"
  MODELS=gpt STEPS=table "$root/scripts/gpu/replay.sh" "$build/run" "$build/replay" \
    >"$out/replay-xl.md" 2>&1
  tar czf "$out/replay-xl.tar.gz" --exclude='*.pt' --exclude='*.trace.json' -C "$build" replay
  echo "lease: done in $(( $(date +%s) - start )) s of $budget"
  exit 0
fi
GPU_CHECK_BUDGET=$(( budget / 2 )) E2E=0 "$root/scripts/gpu-check.sh" --bench 2>&1 |
  tee "$out/gpu-check.log"
echo "lease: gpu-check exited ${PIPESTATUS[0]}, $(left) s left"
export DEVICES=${DEVICES:-cuda:4x2GiB}
export GPT=${GPT:---depth 24 --width 1024 --heads 16 --vocab 50257 --seq-len 1024}
export GPT_MINIBATCH=${GPT_MINIBATCH:-16} GPT_MAX_MICROBATCH=${GPT_MAX_MICROBATCH:-2}
export VGG=${VGG:---depth 8 --width 128 --image-size 64 --classes 1000}
export VGG_MINIBATCH=${VGG_MINIBATCH:-64} VGG_MAX_MICROBATCH=${VGG_MAX_MICROBATCH:-16}
export RUN_TIMEOUT=${RUN_TIMEOUT:-60}
replay=$build/replay
# The GPT gets three quarters of what is left (10 s kept for the table):
# on the H100 its steps took 150 s, the daemon job included.
gpt_s=$(( ($(left) - 10) * 3 / 4 ))
if (( gpt_s > 20 )); then
  MODELS=gpt timeout "$gpt_s" "$root/scripts/gpu-check.sh" --replay 2>&1 | tee "$out/replay.log"
fi
vgg_s=$(( $(left) - 10 ))
if (( vgg_s > 20 )); then
  MODELS=vgg STEPS="write profile plan train table" timeout "$vgg_s" "$root/scripts/gpu-check.sh" \
    --replay 2>&1 | tee -a "$out/replay.log"
fi
MODELS="gpt vgg" STEPS=table "$root/scripts/gpu/replay.sh" "$build/run" "$replay" >"$out/replay.md" 2>&1
tar czf "$out/replay.tar.gz" --exclude='*.pt' --exclude='*.trace.json' -C "$build" replay
echo "lease: done in $(( $(date +%s) - start )) s of $budget"
