#!/usr/bin/env bash
# The original Harmony's headline experiment replayed on one machine: a
# GPT-2-class model (default GPT-2 XL, 1.5B parameters, sequence 1024) and
# a deep VGG, profiled on the devices that train them, planned by Harmony
# and by the baselines (on-demand swapping, GPipe with swapping, data
# parallel with swapping), all trained by harmony-exec on the same devices;
# then the GPT with Harmony's plan as a daemon job through harmony-ctl.
# Writes OUT/replay.md (scripts/gpu/replay_table.py: samples/s, swap bytes,
# H2D use of the pinned bandwidth, the simulator's error, the footprint
# over the devices' memory) beside each step's raw output.
#
#   scripts/gpu/replay.sh TOOLS OUT
#
# TOOLS: a directory laid out as Bazel's bazel-bin (the CMake build's run/,
# or bazel-bin). Every setting is an environment variable; the defaults are
# the GPU replay (docs/gpu/REPORT.md):
#   DEVICES=cuda:4x11GiB    what profiles and trains (N x SIZE: the plan's
#                           devices and memory; PLAN_GPUS and PLAN_MEMORY
#                           for a spec without them, e.g. cuda)
#   MODELS="gpt vgg"        SCHEDULES="harmony ondemand gpipe dp-swap"
#   STEPS="write profile plan train daemon table"  (each skips what is done)
#   GPT="--depth 48 --width 1600 --heads 25 --vocab 50257 --seq-len 1024"
#   GPT_PROFILE_DEPTH=2     blocks of the GPT that is profiled; the plan's
#                           profile copies them (harmony-plan synthesize)
#   VGG="--depth 8 --width 256 --image-size 128 --classes 1000"
#   GPT_MINIBATCH=32  VGG_MINIBATCH=256  ITERATIONS=3 (the first untimed)
#   GPT_MAX_MICROBATCH=16  VGG_MAX_MICROBATCH=32  (what the profile probes)
#   OPTIMIZER=adam  RUN_TIMEOUT=400 (seconds per training run)
#   EMULATE_HOST_LINK=      e.g. 222MB/s: virtual CPU devices' link
#
# A schedule whose planner finds no plan is reported "does not fit"; a run
# that fails or times out is reported with its log, and the rest go on.
# Exits non-zero when a step other than a baseline's plan fails.
set -uo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,/^set/p' "$0" | sed 's/^# \{0,1\}//;/^set/d' >&2
  exit 2
fi
tools=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && out=$(cd "$2" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
devices=${DEVICES:-cuda:4x11GiB}
models=${MODELS:-gpt vgg}
schedules=${SCHEDULES:-harmony ondemand gpipe dp-swap}
steps=" ${STEPS:-write profile plan train daemon table} "
gpt_flags=${GPT:---depth 48 --width 1600 --heads 25 --vocab 50257 --seq-len 1024}
vgg_flags=${VGG:---depth 8 --width 256 --image-size 128 --classes 1000}
iterations=${ITERATIONS:-3}
optimizer=${OPTIMIZER:-adam}
run_timeout=${RUN_TIMEOUT:-400}
link=${EMULATE_HOST_LINK:-}
if [[ $devices =~ ^[a-z]+:([0-9]+)x([0-9.]+[A-Za-z]*)$ ]]; then
  gpus=${PLAN_GPUS:-${BASH_REMATCH[1]}}
  memory=${PLAN_MEMORY:-${BASH_REMATCH[2]}}
else
  gpus=${PLAN_GPUS:-}
  memory=${PLAN_MEMORY:-}
fi
if [[ -z $gpus || -z $memory ]]; then
  echo "replay: DEVICES=$devices names no count and size (e.g. cuda:4x11GiB): set PLAN_GPUS and PLAN_MEMORY" >&2
  exit 2
fi
status=0
log() { echo "[replay $(date +%H:%M:%S)] $*"; }
failed() { log "FAILED: $*"; [[ $status -eq 0 ]] && status=1; return 0; }
has_step() { [[ $steps == *" $1 "* ]]; }
# The depth the GPT's flags give (the synthesized profile's block count).
gpt_depth=$(sed -n 's/.*--depth \([0-9]*\).*/\1/p' <<<"$gpt_flags")
[[ -n $gpt_depth ]] || { echo "replay: GPT must give --depth" >&2; exit 2; }
profile_depth=${GPT_PROFILE_DEPTH:-2}
(( profile_depth < gpt_depth )) || profile_depth=$gpt_depth
link_flags=()
[[ -n $link ]] && link_flags=(--emulate-host-link "$link")
plan_link_flags=()
[[ -n $link ]] && plan_link_flags=(--host-link "$link")

settings=$(
  echo "devices=$devices plan_gpus=$gpus plan_memory=$memory iterations=$iterations"
  echo "optimizer=$optimizer emulate_host_link=${link:-none} gpt=$gpt_flags profile_depth=$profile_depth"
  echo "gpt_minibatch=${GPT_MINIBATCH:-32} gpt_max_microbatch=${GPT_MAX_MICROBATCH:-16}"
  echo "vgg=$vgg_flags"
  echo "vgg_minibatch=${VGG_MINIBATCH:-256} vgg_max_microbatch=${VGG_MAX_MICROBATCH:-32}"
)
# Each step skips what is done, so what another replay left (other models,
# devices or minibatches) is cleared first: on 11-28 a scaled replay planned
# its baselines for GPT-2 XL's files left by the replay before it.
if [[ -e $out/settings.txt && $(cat "$out/settings.txt") != "$settings" ]]; then
  log "settings differ from those of $out's files: starting afresh"
  find "$out" -mindepth 1 -delete
fi
echo "$settings" >"$out/settings.txt"

for model in $models; do
  case $model in
    gpt) flags=$gpt_flags; minibatch=${GPT_MINIBATCH:-32}; max_mb=${GPT_MAX_MICROBATCH:-16} ;;
    vgg) flags=$vgg_flags; minibatch=${VGG_MINIBATCH:-256}; max_mb=${VGG_MAX_MICROBATCH:-32} ;;
    *) echo "replay: unknown model $model (gpt, vgg)" >&2; exit 2 ;;
  esac
  (( max_mb <= minibatch )) || max_mb=$minibatch
  echo "$minibatch" >"$out/$model.minibatch"
  if has_step write && [[ ! -s $out/$model.pt ]]; then
    log "$model: writing the model ($flags) and $minibatch samples"
    # shellcheck disable=SC2086  # the flags are words.
    "$tools/zoo/harmony-zoo" "$model" $flags --dropout 0 --samples "$minibatch" \
      -o "$out/$model.pt" --data "$out/${model}_data.pt" || failed "$model: harmony-zoo"
  fi
  # The GPT is profiled with fewer blocks (the same width, sequence and
  # vocabulary) and its profile synthesized: the profiler computes each
  # vLayer's inputs on the host, too slow for 48 blocks of GPT-2 XL.
  profiled=$model
  if [[ $model == gpt && $profile_depth -lt $gpt_depth ]]; then
    profiled=gpt_profiled
    if has_step write && [[ ! -s $out/$profiled.pt ]]; then
      # shellcheck disable=SC2086
      "$tools/zoo/harmony-zoo" gpt ${flags/--depth $gpt_depth/--depth $profile_depth} --dropout 0 \
        --samples "$max_mb" -o "$out/$profiled.pt" --data "$out/${profiled}_data.pt" ||
        failed "gpt: harmony-zoo (profiled)"
    fi
  fi
  if has_step profile && [[ ! -s $out/$model.profile.json ]]; then
    log "$model: profiling $profiled.pt on $devices (microbatches up to $max_mb)"
    "$tools/planner/harmony-plan" profile "$out/$profiled.pt" --sample-input "$out/${profiled}_data.pt" \
      --devices "$devices" --optimizer "$optimizer" --max-microbatch "$max_mb" \
      --profile-out "$out/$profiled.measured.json" >"$out/$model.profile.log" 2>&1 ||
      failed "$model: profile (see $model.profile.log)"
    if [[ $profiled != "$model" ]]; then
      # vLayers: wte, wpe, the blocks, ln_f, lm_head.
      "$tools/planner/harmony-plan" synthesize --profile "$out/$profiled.measured.json" --block 2 \
        --block-count "$profile_depth" --blocks "$gpt_depth" --profile-out "$out/$model.profile.json" \
        >>"$out/$model.profile.log" 2>&1 || failed "gpt: synthesize (see gpt.profile.log)"
    else
      cp "$out/$profiled.measured.json" "$out/$model.profile.json"
    fi
    tail -4 "$out/$model.profile.log"
  fi
  if [[ ! -s $out/$model.profile.json ]]; then
    has_step plan && failed "$model: no profile ($model.profile.json), so no plans"
    continue
  fi
  for schedule in $schedules; do
    name=$model.$schedule
    if has_step plan && [[ ! -s $out/$name.pb && ! -f $out/$name.nofit ]]; then
      log "$name: planning for $gpus device(s) of $memory, minibatch $minibatch"
      if "$tools/planner/harmony-plan" "$out/$model.pt" --profile "$out/$model.profile.json" \
          --gpus "$gpus" --device-memory "$memory" --minibatch "$minibatch" --schedule "$schedule" \
          "${plan_link_flags[@]}" -o "$out/$name.pb" --json "$out/$name.plan.json" \
          >"$out/$name.plan.log" 2>&1; then
        grep -E "microbatches:|estimated iteration|swap per iteration|host memory" "$out/$name.plan.log"
      else
        tail -3 "$out/$name.plan.log"
        if [[ $schedule == harmony ]]; then
          failed "$name: Harmony found no plan"
        else
          log "$name: does not fit"
          touch "$out/$name.nofit"
        fi
      fi
    fi
    if has_step train && [[ -s $out/$name.pb && ! -s $out/$name.metrics.jsonl ]]; then
      log "$name: training $iterations iterations on $devices"
      timeout "$run_timeout" "$tools/executor/harmony-exec" run "$out/$name.pb" --model "$out/$model.pt" \
        --data "$out/${model}_data.pt" --iterations "$iterations" --devices "$devices" \
        --optimizer "$optimizer" --lr 1e-4 "${link_flags[@]}" --metrics "$out/$name.metrics.jsonl" \
        --trace "$out/$name.trace.json" >"$out/$name.train.log" 2>&1
      rc=$?
      tail -4 "$out/$name.train.log"
      [[ $rc -eq 0 ]] || failed "$name: harmony-exec run exited $rc$([[ $rc -eq 124 ]] && echo " (over ${run_timeout} s)")"
    fi
  done
done

if has_step daemon && [[ " $models " == *" gpt "* && -s $out/gpt.harmony.pb && -z $(grep -s ": SUCCEEDED" "$out/daemon.status.txt") ]]; then
  log "gpt: Harmony's plan as a daemon job on $devices"
  state=$out/daemon-state
  rm -rf "$state"
  "$tools/executor/harmony-exec" --listen 127.0.0.1:0 --devices "$devices" --state-dir "$state" \
    --allow-path "$out" >"$out/daemon.log" 2>&1 &
  daemon=$!
  address=""
  for _ in $(seq 1 600); do
    address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$out/daemon.log" | head -1)
    if [[ -n $address ]] || ! kill -0 "$daemon" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if [[ -z $address ]]; then
    failed "the daemon did not start (daemon.log)"
  else
    ctl() { "$tools/executor/harmony-ctl" "$@" --address "$address" --state-dir "$state"; }
    ctl devices
    job=$(ctl submit "$out/gpt.harmony.pb" --model "$out/gpt.pt" --data "$out/gpt_data.pt" \
      --iterations 2 --optimizer "$optimizer" --lr 1e-4 --out "$out/gpt.daemon.pt" --overwrite)
    log "submitted $job"
    # The job also loads the model and writes it: GPT-2 XL's 6.29 GiB took
    # 35 s in and 43 s out on the H200 (11-28), where 2 iterations took 22 s.
    timeout "$(( run_timeout * 2 ))" "$tools/executor/harmony-ctl" watch "$job" \
      --address "$address" --state-dir "$state"
    ctl status "$job" >"$out/daemon.status.txt" 2>&1
    cat "$out/daemon.status.txt"
    if grep -q "^$job[^:]*: SUCCEEDED" "$out/daemon.status.txt"; then
      [[ -s $out/gpt.daemon.pt ]] || failed "job $job wrote no model"
    else
      failed "daemon job $job did not succeed in $(( run_timeout * 2 )) s"
    fi
  fi
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null
fi

if has_step table; then
  python3 "$here/replay_table.py" "$out" --models "$models" --schedules "$schedules" \
    --harmony-plan "$tools/planner/harmony-plan" >"$out/replay.md" || failed "replay_table.py"
  cat "$out/replay.md"
fi
log "done: $([[ $status -eq 0 ]] && echo "every step passed" || echo "a step failed (above)")"
exit $status
