#!/usr/bin/env bash
# Builds the whole product with CUDA devices and checks it, on a GPU
# machine: one with an NVIDIA GPU, nvcc's toolkit, CMake, ninja and pip's
# CUDA LibTorch (the torch package of `python3`), but no Bazel, gRPC,
# Protobuf or Boost. Those come from this repository's .gpu-deps/, which
# scripts/gpu-deps.sh makes on the Debian machine (carry it along).
#
#   scripts/gpu-check.sh              build, then: the GPU tests
#                                     (tests/gpu/cuda_runtime_test), the
#                                     product profiled and trained on
#                                     cuda:2x1GiB and on the whole GPU
#                                     (scripts/gpu/product-check.sh), and the
#                                     end-to-end tests from the CMake build
#   scripts/gpu-check.sh --build-only
#   scripts/gpu-check.sh --bench      the above, then tests/gpu/cuda_bench
#   scripts/gpu-check.sh --replay     build, then only the paper's experiment
#                                     (scripts/gpu/replay.sh, its settings
#                                     from the environment) into
#                                     .gpu-build/replay: each step skips what
#                                     is there, so while the machine stays
#                                     warm, calls can share the work
#   GPU_TEST_ARGS=--gtest_filter=...  passed to cuda_runtime_test
#   E2E_FILTER=...                    gtest filter of the end-to-end tests
#                                     (default: those that need neither
#                                     /usr/bin/python3 with numpy nor the
#                                     suite's models, which Bazel generates)
#   E2E=0                             leaves the end-to-end tests out
#   GPU_CHECK_BUDGET=SECONDS          wall-clock budget from the start: each
#                                     step is stopped when it runs out, and
#                                     the steps after it are reported as not
#                                     run (GPU time is lent by the minute)
#
# The build keeps going past a file that fails (ninja -k 0), so one run
# shows every compile error.
#
# Every step runs; the exit status is the first failure's. The CPU build
# and CI are unchanged: Bazel's, never the CUDA device.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${HARMONY_GPU_DEPS:-$ROOT/.gpu-deps}
BUILD=${HARMONY_GPU_BUILD:-$ROOT/.gpu-build}
if [ ! -f "$DEPS/gen/proto/executor.grpc.pb.cc" ]; then
  echo "gpu-check: $DEPS is missing or old: run scripts/gpu-deps.sh on the Debian machine and carry .gpu-deps" >&2
  exit 2
fi
TORCH_DIR=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
echo "gpu-check: torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')," \
  "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
start=$(date +%s)
cmake -S "$ROOT/scripts/gpu" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DHARMONY_ROOT="$ROOT" -DHARMONY_DEPS="$DEPS" -DTORCH_DIR="$TORCH_DIR" -DCUDA_HOME="$CUDA_HOME" \
  >/dev/null || exit 1
ninja -C "$BUILD" -j "$(nproc)" -k 0 | grep -v "Building CXX" || exit 1
echo "gpu-check: built in $(( $(date +%s) - start )) s"
[ "${1:-}" = "--build-only" ] && exit 0
export LD_LIBRARY_PATH="$DEPS/lib:$TORCH_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
budget=${GPU_CHECK_BUDGET:-0}
check() {  # NAME COMMAND...: runs it, keeps the first failure's status.
  local name=$1 t0 rc left=0
  shift
  t0=$(date +%s)
  echo; echo "gpu-check: == $name"
  if (( budget > 0 )); then
    left=$(( start + budget - t0 ))
    if (( left < 5 )); then
      echo "gpu-check: $name: NOT RUN (the budget of $budget s is spent)"
      [ $status -eq 0 ] && status=3
      return 0
    fi
    timeout --kill-after=5 "$left" "$@"
  else
    "$@"
  fi
  rc=$?
  [ $rc -eq 124 ] && (( budget > 0 )) && echo "gpu-check: $name: stopped at the budget's end ($budget s)"
  echo "gpu-check: $name: $([ $rc -eq 0 ] && echo passed || echo "FAILED ($rc)") in $(( $(date +%s) - t0 )) s"
  [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
  return 0
}
cd "$ROOT"
if [ "${1:-}" = "--replay" ]; then
  "$ROOT/scripts/gpu/replay.sh" "$BUILD/run" "${REPLAY_OUT:-$BUILD/replay}"
  exit $?
fi
check "GPU tests" "$BUILD/cuda_runtime_test" ${GPU_TEST_ARGS:-}
check "the product on cuda:2x1GiB, profiled there" "$ROOT/scripts/gpu/product-check.sh" "$BUILD/run" \
  cuda:2x1GiB "$BUILD/product-cuda" cuda:2x1GiB
check "the product on the whole GPU, profiled there" env PLAN_GPUS=1 \
  "$ROOT/scripts/gpu/product-check.sh" "$BUILD/run" cuda "$BUILD/product-cuda-whole" cuda
if [ "${1:-}" = "--bench" ]; then check "bench" "$BUILD/cuda_bench"; fi
# The end-to-end tests find the tools and their data from run/, as Bazel's
# from its runfiles.
E2E_FILTER=${E2E_FILTER:--DaemonTest.ATokenFileJobTrainsAsARunDoes:DaemonTest.TheExampleConfigsWork:ExecCliTest.TrainsAModelScriptedInPython:ExecCliTest.LstmLanguageModelAndTupleOutputTrainEndToEnd}
if [ "${E2E:-1}" != 0 ]; then
  check "end-to-end tests (CPU devices, this LibTorch)" bash -c \
    "cd '$BUILD/run' && '$BUILD/exec_cli_test' --gtest_filter='$E2E_FILTER' && '$BUILD/daemon_test' --gtest_filter='$E2E_FILTER'"
fi
echo; echo "gpu-check: $([ $status -eq 0 ] && echo "all passed" || echo "FAILED") in $(( $(date +%s) - start )) s"
exit $status
