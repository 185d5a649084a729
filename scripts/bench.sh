#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds and runs the benchmarks: Harmony against
# on-demand swapping, GPipe and data parallel with swapping on the same
# runtime, the simulator against measured times, the overhead when a model
# fits, the CPU optimizer, the planner's search time, external models.
#
#   scripts/bench.sh [--quick] [--out-dir DIR] [harmony-bench flags]
#
# Writes DIR/REPORT.md, DIR/results.json and SVG charts (default DIR:
# docs/bench). On 2 cores the quick form (small models, many shapes) takes
# about 8 minutes; the full form (models of tens of MiB, 2 devices, minibatch
# 64 and 256, emulated link; see docs/bench/README.md) about 45. Exits non-zero only when a run
# errors or a correctness check fails (losses equal across schedules and to
# the plain LibTorch loop), never on a time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "bench: building (the first build takes about 8 minutes on 2 cores)"
bazel build //tests/bench:harmony-bench
echo "bench: running tests/bench/harmony-bench $*"
exec bazel-bin/tests/bench/harmony-bench "$@"
