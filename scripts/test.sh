#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: bazel test //...
# Extra arguments go to bazel test (e.g. scripts/test.sh //common/...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=(//...); fi
echo "test: bazel test ${targets[*]}"
exec bazel test "${targets[@]}"
