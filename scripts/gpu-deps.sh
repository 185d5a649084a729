#!/usr/bin/env bash
# Gathers, on this (CPU, Debian 12) machine, what scripts/gpu-check.sh needs
# on a GPU machine that has pip's CUDA LibTorch, CMake and ninja but none of
# Debian's libraries: Protobuf, gRPC, Abseil, Boost.Program_options,
# nlohmann/json, GoogleTest and OpenSSL (headers and libraries, as installed
# by scripts/setup.sh; of Boost only the headers program_options reaches;
# Gloo's headers) and
# the generated Protobuf and gRPC code of proto/, into .gpu-deps/
# (git-ignored; carried to the GPU machine beside the working tree, which
# takes at most 64 MiB in all).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/.gpu-deps}
rm -rf "$OUT"
mkdir -p "$OUT/include" "$OUT/lib" "$OUT/gen/proto"
LIB=/usr/lib/x86_64-linux-gnu
cp -a /usr/include/google /usr/include/absl /usr/include/nlohmann /usr/include/gtest \
  /usr/include/gmock /usr/include/openssl /usr/include/grpc /usr/include/grpc++ \
  /usr/include/grpcpp "$OUT/include/"
cp -a /usr/include/x86_64-linux-gnu/openssl/. "$OUT/include/openssl/"
# Boost: the headers <boost/program_options.hpp> includes (as g++ resolves
# them here), and boost/config whole (it branches on the compiler).
echo '#include <boost/program_options.hpp>' | g++ -std=c++17 -M -x c++ - | tr ' \\' '\n\n' |
  grep '^/usr/include/boost/' | sort -u | sed 's|^/usr/include/||' |
  (cd /usr/include && xargs cp --parents -t "$OUT/include")
cp -a /usr/include/boost/config "$OUT/include/boost/"
# Gloo's headers, which LibTorch's ProcessGroupGloo.hpp includes
# (executor/dist): searched after the torch package's own, in case its
# wheel ships none.
mkdir -p "$OUT/fallback-include"
cp -a /usr/include/gloo "$OUT/fallback-include/"
# Libraries: the unversioned names link, the versioned ones load.
cp -a $LIB/libprotobuf.so $LIB/libprotobuf.so.32* $LIB/libabsl_*.so $LIB/libabsl_*.so.20220623* \
  $LIB/libgtest.a $LIB/libgmock.a $LIB/libcrypto.so $LIB/libcrypto.so.3 $LIB/libssl.so \
  $LIB/libssl.so.3 $LIB/libgrpc++.so $LIB/libgrpc++.so.1.51* $LIB/libgrpc.so $LIB/libgrpc.so.29* \
  $LIB/libgpr.so $LIB/libgpr.so.29* $LIB/libaddress_sorting.so $LIB/libaddress_sorting.so.29* \
  $LIB/libupb.so $LIB/libupb.so.29* $LIB/libre2.so $LIB/libre2.so.9* $LIB/libcares.so \
  $LIB/libcares.so.2* $LIB/libboost_program_options.so $LIB/libboost_program_options.so.1.74* \
  $LIB/libz.so $LIB/libz.so.1* $LIB/libgtest_main.a $LIB/libgmock_main.a \
  "$OUT/lib/"
# Links that name an absolute path here (libz.so) point beside them instead.
find "$OUT/lib" -type l -lname '/*' | while read -r l; do ln -sfn "$(basename "$(readlink "$l")")" "$l"; done
protoc --proto_path="$ROOT" --cpp_out="$OUT/gen" "$ROOT/proto/plan.proto" \
  "$ROOT/proto/executor.proto" "$ROOT/proto/tensorboard.proto"
protoc --proto_path="$ROOT" --grpc_out="$OUT/gen" --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" \
  "$ROOT/proto/executor.proto"
echo "$(du -sh "$OUT" | cut -f1) in $OUT"
