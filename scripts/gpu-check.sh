#!/usr/bin/env bash
# Builds the runtime with CUDA devices and runs its GPU tests, on a GPU
# machine: one with an NVIDIA GPU, nvcc's toolkit, CMake, ninja and pip's
# CUDA LibTorch (the torch package of `python3`), but no Bazel, gRPC or
# Protobuf. Those come from this repository's .gpu-deps/, which
# scripts/gpu-deps.sh makes on the Debian machine (carry it along).
#
#   scripts/gpu-check.sh              build, then run tests/gpu/cuda_runtime_test
#   scripts/gpu-check.sh --build-only
#   scripts/gpu-check.sh --bench      build, test, then tests/gpu/cuda_bench
#   GPU_TEST_ARGS=--gtest_filter=... scripts/gpu-check.sh
#
# The CPU build and CI are unchanged: they never compile the CUDA device.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${HARMONY_GPU_DEPS:-$ROOT/.gpu-deps}
BUILD=${HARMONY_GPU_BUILD:-$ROOT/.gpu-build}
if [ ! -f "$DEPS/gen/proto/plan.pb.cc" ]; then
  echo "gpu-check: $DEPS is missing: run scripts/gpu-deps.sh on the Debian machine and carry .gpu-deps" >&2
  exit 2
fi
TORCH_DIR=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
echo "gpu-check: torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')," \
  "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
cmake -S "$ROOT/scripts/gpu" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DHARMONY_ROOT="$ROOT" -DHARMONY_DEPS="$DEPS" -DTORCH_DIR="$TORCH_DIR" -DCUDA_HOME="$CUDA_HOME" >/dev/null
ninja -C "$BUILD" -j "$(nproc)"
[ "${1:-}" = "--build-only" ] && exit 0
export LD_LIBRARY_PATH="$DEPS/lib:$TORCH_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$ROOT"
status=0
"$BUILD/cuda_runtime_test" ${GPU_TEST_ARGS:-} || status=$?
if [ "${1:-}" = "--bench" ]; then "$BUILD/cuda_bench" || status=$?; fi
exit $status
