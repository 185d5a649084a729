#!/usr/bin/env bash
# Sets up and runs Harmony's main job on the embedded default (CPU only).
#
# Builds the tools, writes a zoo GPT model and its data, trains it a few
# steps with the plain LibTorch loop, splits it into vLayers and profiles
# them on two virtual 256 MiB devices, plans its schedule for two 2 MiB
# devices, trains it with that plan on two virtual 2 MiB devices
# (harmony-exec run), swapping as planned, and then does the same the way a
# cluster user would: starts the harmony-exec daemon, submits the job with
# harmony-ctl (configs/demo-job.json), watches it to the end, lists the
# jobs, and stops the daemon.
#
#   scripts/demo.sh [--out DIR]     (default DIR: ./demo-out)
set -euo pipefail
cd "$(dirname "$0")/.."
out=demo-out
if [[ "${1:-}" == "--out" && -n "${2:-}" ]]; then out=$2; fi
mkdir -p "$out"

scripts/setup.sh
echo "demo: building (the first build takes about 8 minutes on 2 cores)"
bazel build //zoo:harmony-zoo //zoo:harmony-train-reference //planner:harmony-plan \
  //executor:harmony-exec //executor:harmony-ctl

echo
echo "demo: 1. write a GPT model (4 blocks), 64 samples of token data and 32 held out"
bazel-bin/zoo/harmony-zoo gpt --depth 4 --width 64 --heads 4 --vocab 128 \
  --seq-len 32 --samples 64 -o "$out/gpt.pt" --data "$out/gpt_data.pt"
# Another seed draws other sequences of the same rule (its model is not used).
bazel-bin/zoo/harmony-zoo gpt --depth 4 --width 64 --heads 4 --vocab 128 \
  --seq-len 32 --samples 32 --seed 2 -o "$out/gpt_val_model.pt" --data "$out/gpt_val.pt"

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
echo "demo: 5. plan it for 2 devices of 2 MiB (the model needs more: it must swap) behind a"
echo "        200 MB/s host link, the balance of a PCIe 3 GPU server for these 2 cores' compute"
bazel-bin/planner/harmony-plan "$out/gpt.pt" --profile "$out/gpt.profile.json" \
  --gpus 2 --device-memory 2MiB --minibatch 32 --host-link 200MB/s -o "$out/gpt.plan.pb" \
  --json "$out/gpt.plan.json" --trace "$out/gpt.trace.json"
# The whole task list goes to a file (a pipe into head would end inspect with
# SIGPIPE, which pipefail turns into a failure); its start is shown here.
bazel-bin/planner/harmony-plan inspect "$out/gpt.plan.pb" --tasks > "$out/gpt.plan.tasks.txt"
head -20 "$out/gpt.plan.tasks.txt"
echo "  ... (the whole list: $out/gpt.plan.tasks.txt)"

echo
echo "demo: 6. train it with the plan on 2 virtual devices of 2 MiB, the host link emulated at"
echo "        200 MB/s (AdamW, 10 iterations, the held-out loss after 5 and 10)"
bazel-bin/executor/harmony-exec run "$out/gpt.plan.pb" --model "$out/gpt.pt" \
  --data "$out/gpt_data.pt" --iterations 10 --devices cpu:2x2MiB --optimizer adamw \
  --emulate-host-link 200MB/s --eval-data "$out/gpt_val.pt" --eval-every 5 \
  --lr 0.003 --out "$out/gpt_harmony.pt" --metrics "$out/gpt.metrics.jsonl" \
  --trace "$out/gpt.exec_trace.json"

echo
echo "demo: 6b. the same in bf16 (harmony-plan --precision bf16): profiled in bf16, bf16"
echo "         weights and gradients on the devices and the link, fp32 masters on the host"
bazel-bin/planner/harmony-plan profile "$out/gpt.pt" --sample-input "$out/gpt_data.pt" \
  --devices cpu:2x256MiB --max-microbatch 64 --precision bf16 \
  --profile-out "$out/gpt.bf16.profile.json" 2>/dev/null | tail -1
bazel-bin/planner/harmony-plan "$out/gpt.pt" --profile "$out/gpt.bf16.profile.json" \
  --gpus 2 --device-memory 2MiB --minibatch 32 --host-link 200MB/s \
  -o "$out/gpt.bf16.plan.pb" 2>/dev/null | grep -E "precision|estimated iteration|swap per"
bazel-bin/executor/harmony-exec run "$out/gpt.bf16.plan.pb" --model "$out/gpt.pt" \
  --data "$out/gpt_data.pt" --iterations 10 --devices cpu:2x2MiB --optimizer adamw \
  --emulate-host-link 200MB/s --lr 0.003 | grep -E "^training|iter 10/|bytes moved"

# The address daemon $1 says it listens on in its log $2 (up to 30 s); exits
# the demo with the log when it does not start.
listening_address() {
  local address=""
  for _ in $(seq 1 300); do
    address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$2" | head -1)
    if [[ -n "$address" ]] || ! kill -0 "$1" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [[ -z "$address" ]]; then
    echo "demo: the daemon did not start:" >&2; cat "$2" >&2; exit 1
  fi
  echo "$address"
}

echo
echo "demo: 7. the daemon: start harmony-exec on 2 virtual 2 MiB devices, submit the job"
echo "         with harmony-ctl, watch it train, list the jobs, stop the daemon"
rm -rf "$out/harmony-state"
bazel-bin/executor/harmony-exec --listen 127.0.0.1:0 --devices cpu:2x2MiB \
  --state-dir "$out/harmony-state" >"$out/daemon.log" 2>&1 &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true' EXIT
address=$(listening_address "$daemon" "$out/daemon.log")
head -1 "$out/daemon.log"
# The daemon made its token in its state directory (mode 0600): harmony-ctl
# reads it from there.
ctl() {
  bazel-bin/executor/harmony-ctl "$@" --address "$address" --state-dir "$out/harmony-state"
}
rm -f "$out/gpt_daemon.pt" "$out/gpt_world.pt"
job=$(ctl submit --config configs/demo-job.json "$out/gpt.plan.pb" --model "$out/gpt.pt" \
  --data "$out/gpt_data.pt" --out "$out/gpt_daemon.pt")
echo "submitted $job"
ctl watch "$job"
ctl list
ctl devices
kill -TERM "$daemon"
wait "$daemon" || true
trap - EXIT
echo "daemon log ($out/daemon.log):"
sed 's/^/  /' "$out/daemon.log"

echo
echo "demo: 8. two servers: two daemons (here on this machine) train one job together, data"
echo "         parallel, each on half of a global minibatch of 16, optimizer state sharded"
bazel-bin/planner/harmony-plan "$out/gpt.pt" --sample-input "$out/gpt_data.pt" --gpus 2 \
  --device-memory 2MiB --servers 2 --global-minibatch 16 -o "$out/gpt_world.plan.pb" \
  2>/dev/null | grep -E "estimated iteration|world:"
daemons=()
addresses=()
trap 'kill "${daemons[@]}" 2>/dev/null || true' EXIT
# Daemons of one world share a token: each is given the same file.
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$out/world-token")
for rank in 0 1; do
  rm -rf "$out/world-state-$rank"
  bazel-bin/executor/harmony-exec --listen 127.0.0.1:0 --devices cpu:2x2MiB \
    --state-dir "$out/world-state-$rank" --auth-token-file "$out/world-token" \
    >"$out/world-daemon-$rank.log" 2>&1 &
  daemons+=($!)
  address=$(listening_address "${daemons[$rank]}" "$out/world-daemon-$rank.log")
  addresses+=("$address")
done
world="${addresses[0]},${addresses[1]}"
export HARMONY_TOKEN_FILE="$out/world-token"
bazel-bin/executor/harmony-ctl --address "${addresses[0]}" submit "$out/gpt_world.plan.pb" \
  --model "$out/gpt.pt" --data "$out/gpt_data.pt" --iterations 10 --optimizer adamw \
  --lr 0.003 --out "$out/gpt_world.pt" --world "$world" --shard-optimizer-state --wait
bazel-bin/executor/harmony-ctl --address "${addresses[1]}" status job-1 | sed -n '1p;/world/,/rank 1:/p'
kill -TERM "${daemons[@]}"
wait "${daemons[@]}" || true
trap - EXIT

echo
echo "demo: done; files in $out/"
