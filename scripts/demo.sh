#!/usr/bin/env bash
# Sets up and runs Harmony's main job on the embedded default (CPU only).
#
# Builds the tools, writes a zoo GPT model and its data, trains it a few
# steps with the plain LibTorch loop, splits it into vLayers and profiles
# them on two virtual 256 MiB devices, plans its schedule for two 2 MiB
# devices, and trains it with that plan on two virtual 2 MiB devices
# (harmony-exec run), swapping as planned. With harmony-ctl (issue 6) this
# grows into plan -> daemon -> submit -> watch.
#
#   scripts/demo.sh [--out DIR]     (default DIR: ./demo-out)
set -euo pipefail
cd "$(dirname "$0")/.."
out=demo-out
if [[ "${1:-}" == "--out" && -n "${2:-}" ]]; then out=$2; fi
mkdir -p "$out"

scripts/setup.sh
echo "demo: building (the first build takes about 7 minutes on 2 cores)"
bazel build //zoo:harmony-zoo //zoo:harmony-train-reference //planner:harmony-plan \
  //executor:harmony-exec

echo
echo "demo: 1. write a GPT model (4 blocks) and 64 samples of token data"
bazel-bin/zoo/harmony-zoo gpt --depth 4 --width 64 --heads 4 --vocab 128 \
  --seq-len 32 --samples 64 -o "$out/gpt.pt" --data "$out/gpt_data.pt"

echo
echo "demo: 2. train it 10 steps with plain LibTorch SGD (minibatch 16)"
bazel-bin/zoo/harmony-train-reference "$out/gpt.pt" --data "$out/gpt_data.pt" \
  --steps 10 --lr 0.1 --minibatch 16 --out "$out/gpt_trained.pt"

echo
echo "demo: 3. split it into vLayers"
bazel-bin/planner/harmony-plan decompose "$out/gpt.pt"

echo
echo "demo: 4. profile every vLayer on 2 virtual devices of 256 MiB"
bazel-bin/planner/harmony-plan profile "$out/gpt.pt" --sample-input "$out/gpt_data.pt" \
  --devices cpu:2x256MiB --max-microbatch 64 --profile-out "$out/gpt.profile.json"

echo
echo "demo: 5. plan it for 2 devices of 2 MiB (the model needs more: it must swap)"
bazel-bin/planner/harmony-plan "$out/gpt.pt" --profile "$out/gpt.profile.json" \
  --gpus 2 --device-memory 2MiB --minibatch 32 -o "$out/gpt.plan.pb" \
  --json "$out/gpt.plan.json" --trace "$out/gpt.trace.json"
bazel-bin/planner/harmony-plan inspect "$out/gpt.plan.pb" --tasks | head -20

echo
echo "demo: 6. train it with the plan on 2 virtual devices of 2 MiB (AdamW, 10 iterations)"
bazel-bin/executor/harmony-exec run "$out/gpt.plan.pb" --model "$out/gpt.pt" \
  --data "$out/gpt_data.pt" --iterations 10 --devices cpu:2x2MiB --optimizer adamw \
  --lr 0.003 --out "$out/gpt_harmony.pt" --metrics "$out/gpt.metrics.jsonl" \
  --trace "$out/gpt.exec_trace.json"

echo
echo "demo: done; files in $out/"
