#!/usr/bin/env bash
# Gathers, on this (CPU, Debian 12) machine, what scripts/gpu-check.sh needs
# on a GPU machine that has pip's CUDA LibTorch, CMake and ninja but none of
# Debian's libraries: Protobuf, Abseil, nlohmann/json, GoogleTest and
# OpenSSL (headers and libraries, as installed by scripts/setup.sh) and the
# plan's generated Protobuf code, into .gpu-deps/ (git-ignored; carried to
# the GPU machine beside the working tree).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/.gpu-deps}
rm -rf "$OUT"
mkdir -p "$OUT/include" "$OUT/lib" "$OUT/gen/proto"
LIB=/usr/lib/x86_64-linux-gnu
cp -a /usr/include/google /usr/include/absl /usr/include/nlohmann /usr/include/gtest \
  /usr/include/gmock /usr/include/openssl "$OUT/include/"
cp -a /usr/include/x86_64-linux-gnu/openssl/. "$OUT/include/openssl/"
cp -a $LIB/libprotobuf.so $LIB/libprotobuf.so.32* $LIB/libabsl_*.so $LIB/libabsl_*.so.20220623* \
  $LIB/libgtest.a $LIB/libgmock.a $LIB/libcrypto.so.3 "$OUT/lib/"
protoc --proto_path="$ROOT" --cpp_out="$OUT/gen" "$ROOT/proto/plan.proto"
echo "$(du -sh "$OUT" | cut -f1) in $OUT"
