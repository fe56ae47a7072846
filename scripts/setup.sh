#!/usr/bin/env bash
# Installs everything carve's build and tests need from Debian 12 packages.
# Idempotent: installs only what is missing, so a second run costs a few seconds.
# Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build git pkg-config
  llvm-22-dev libzstd-dev          # CPU JIT (LLVM ORC)
  lld                              # links LLVM's static libraries fast (CARVE_LLVM_STATIC)
  libtbb-dev                       # parallel executor
  libdnnl-dev                      # oneDNN convolutions (CARVE_WITH_DNNL)
  doctest-dev librapidcheck-dev    # tests
  libbenchmark-dev libopenblas-dev # benchmarks (OpenBLAS is a baseline only)
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX importer (CARVE_WITH_ONNX)
  clang-22 libclang-rt-22-dev      # libFuzzer targets (scripts/fuzz.sh)
  curl ca-certificates xz-utils    # Debian's oneTBB source for the TSan build (scripts/tbb-tsan.sh)
  python3-dev pybind11-dev libdlpack-dev         # the Python module (CARVE_BUILD_PYTHON)
  python3-numpy python3-pytest                   # its tests
  python3-onnx                                   # ONNX's backend node tests (tests/onnx/conformance)
)
# Not installed here (the build and tests do not need them): python3-torch
# python3-torchvision, for scripts/make_onnx_models.py only.

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
