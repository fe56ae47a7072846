#!/usr/bin/env bash
# Configure and build one carve configuration.
#   scripts/build.sh release   -> build/release (Release, everything)
#   scripts/build.sh asan      -> build/asan    (Debug + AddressSanitizer + UBSan, no benchmarks)
#   scripts/build.sh minimal   -> build/minimal (Release without LLVM, CUDA toolkit or ONNX: the
#                                 stand-ins a GPU machine or a bare embedder builds with)
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-release}"
jobs="${CARVE_JOBS:-2}"
case "$config" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan)    args=(-DCMAKE_BUILD_TYPE=Debug -DCARVE_SANITIZE=ON -DCARVE_BUILD_BENCHMARKS=OFF) ;;
  minimal) args=(-DCMAKE_BUILD_TYPE=Release -DCARVE_WITH_LLVM=OFF -DCARVE_WITH_CUDA=OFF -DCARVE_WITH_ONNX=OFF
                 -DCARVE_BUILD_BENCHMARKS=OFF) ;;
  *) echo "build.sh: unknown configuration '$config' (release|asan|minimal)" >&2; exit 2 ;;
esac
cmake -G Ninja -S . -B "build/$config" "${args[@]}" ${CARVE_CMAKE_ARGS:-} >/dev/null
cmake --build "build/$config" -j "$jobs"
