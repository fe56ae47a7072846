#!/usr/bin/env bash
# Configure and build one carve configuration.
#   scripts/build.sh release   -> build/release (Release, everything)
#   scripts/build.sh asan      -> build/asan    (Debug + AddressSanitizer + UBSan, no benchmarks)
#   scripts/build.sh minimal   -> build/minimal (Release without LLVM, CUDA toolkit or ONNX: the
#                                 stand-ins a GPU machine or a bare embedder builds with)
#   scripts/build.sh tsan      -> build/tsan    (RelWithDebInfo + ThreadSanitizer, with oneTBB built
#                                 instrumented by scripts/tbb-tsan.sh; the runtime and scheduler
#                                 tests only: carve_runtime_tests)
#   scripts/build.sh fuzz      -> build/fuzz    (clang-22, libFuzzer + ASan + UBSan; the fuzz/
#                                 targets only, run by scripts/fuzz.sh)
# Extra arguments after the configuration are build targets (default: the configuration's).
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-release}"
shift || true
targets=("$@")
jobs="${CARVE_JOBS:-2}"
case "$config" in
  release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan)    args=(-DCMAKE_BUILD_TYPE=Debug -DCARVE_SANITIZE=ON -DCARVE_BUILD_BENCHMARKS=OFF) ;;
  minimal) args=(-DCMAKE_BUILD_TYPE=Release -DCARVE_WITH_LLVM=OFF -DCARVE_WITH_CUDA=OFF -DCARVE_WITH_ONNX=OFF
                 -DCARVE_WITH_DNNL=OFF -DCARVE_BUILD_BENCHMARKS=OFF) ;;
  tsan)    bash scripts/tbb-tsan.sh build/tbb-tsan  # an instrumented oneTBB (see there why)
           args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCARVE_SANITIZE=thread -DCARVE_WITH_CUDA=OFF -DCARVE_WITH_DNNL=OFF
                 -DCARVE_WITH_ONNX=OFF -DCARVE_BUILD_BENCHMARKS=OFF -DTBB_DIR="$PWD/build/tbb-tsan/lib/cmake/TBB")
           [ ${#targets[@]} -gt 0 ] || targets=(carve_runtime_tests) ;;
  fuzz)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22
                 -DCARVE_BUILD_FUZZERS=ON -DCARVE_WITH_LLVM=OFF -DCARVE_WITH_CUDA=OFF -DCARVE_WITH_DNNL=OFF -DCARVE_BUILD_TESTS=OFF
                 -DCARVE_BUILD_BENCHMARKS=OFF)
           [ ${#targets[@]} -gt 0 ] || targets=(text_parser_fuzzer npy_reader_fuzzer planner_csv_fuzzer
                                                 onnx_import_fuzzer) ;;
  *) echo "build.sh: unknown configuration '$config' (release|asan|minimal|tsan|fuzz)" >&2; exit 2 ;;
esac
cmake -G Ninja -S . -B "build/$config" "${args[@]}" ${CARVE_CMAKE_ARGS:-} >/dev/null
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "build/$config" -j "$jobs" --target "${targets[@]}"
else
  cmake --build "build/$config" -j "$jobs"
fi
