#!/usr/bin/env bash
# Installs what Harmony needs on Debian 12, and says what it found or
# installed. Safe to run again: packages already present are left alone.
#
#   scripts/setup.sh            install what is missing
#   scripts/setup.sh --check    only report; exit 1 if something is missing
set -euo pipefail

# Exactly the Debian packages the build and tests need.
PACKAGES=(
  bazel-bootstrap               # Bazel 4.2.3
  g++                           # C++17 compiler
  libtorch-dev                  # LibTorch 1.13 (CPU)
  libgrpc++-dev                 # gRPC 1.51
  protobuf-compiler-grpc        # grpc_cpp_plugin
  libprotobuf-dev               # Protobuf 3.21
  protobuf-compiler             # protoc
  libabsl-dev                   # Abseil
  nlohmann-json3-dev            # nlohmann/json
  libboost-program-options-dev  # Boost.Program_options
  libgtest-dev                  # GoogleTest
  libgmock-dev                  # GoogleMock
  libssl-dev                    # libcrypto (SHA-256)
  openssl                       # the daemon test makes a TLS certificate
  libopenblas0-openmp           # fast BLAS behind libtorch's libblas.so.3 (15x the reference BLAS)
  libgloo-dev                   # Gloo's headers: LibTorch's c10d ProcessGroupGloo (executor/dist)
  python3-torch                 # PyTorch 1.13 (same LibTorch): scripts the test suite's models
  python3-torchvision           # torchvision 0.14: the suite's torchvision models
  python3-protobuf              # reads TensorBoard event files back in tests/tensorboard_check.py
)

check_only=0
if [[ "${1:-}" == "--check" ]]; then check_only=1; fi

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

found=()
missing=()
for pkg in "${PACKAGES[@]}"; do
  if installed "$pkg"; then found+=("$pkg"); else missing+=("$pkg"); fi
done

echo "setup: found ${#found[@]} of ${#PACKAGES[@]} packages${found:+: ${found[*]}}"
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: nothing to install"
  exit 0
fi
echo "setup: missing: ${missing[*]}"
if [[ $check_only -eq 1 ]]; then exit 1; fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "setup: apt-get update"
"${SUDO[@]}" apt-get update -q >/dev/null
echo "setup: installing ${missing[*]} (this takes a few minutes the first time)"
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q \
  --no-install-recommends "${missing[@]}" >/dev/null

still=()
for pkg in "${missing[@]}"; do installed "$pkg" || still+=("$pkg"); done
if [[ ${#still[@]} -ne 0 ]]; then
  echo "setup: failed to install: ${still[*]}" >&2
  exit 1
fi
echo "setup: installed ${missing[*]}"
