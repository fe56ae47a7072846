#!/usr/bin/env bash
# The whole test suite: set up (if needed), then build and run every test in three
# configurations — Release; Debug under AddressSanitizer + UndefinedBehaviorSanitizer; and
# a minimal Release build without LLVM, the CUDA toolkit or ONNX (their stand-ins must
# build, and every test that needs them must skip, not fail) — then the runtime and
# scheduler tests under ThreadSanitizer, and every fuzz target for 30 s.
# Exits non-zero when any test fails. GPU tests report "skipped" without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${CARVE_JOBS:-2}"
bash scripts/setup.sh

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:${LSAN_OPTIONS:-}"
for config in release asan minimal; do
  start=$(date +%s)
  bash scripts/build.sh "$config"
  (cd "build/$config" && ctest --output-on-failure --no-tests=error -j "$jobs" --timeout 600)
  echo "test.sh: $config suite done in $(( $(date +%s) - start )) s"
done

# ThreadSanitizer: the runtime and scheduler tests (property tests at their suite size).
start=$(date +%s)
bash scripts/build.sh tsan
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/../../scripts/tsan.supp" \
   ctest --output-on-failure --no-tests=error -j "$jobs" --timeout 900 -R '^(runtime|scheduler)/')
echo "test.sh: tsan suite done in $(( $(date +%s) - start )) s"

# Fuzzing smoke: every libFuzzer target for 30 s (scripts/fuzz.sh SECONDS for longer runs).
start=$(date +%s)
bash scripts/fuzz.sh 30
echo "test.sh: fuzz smoke done in $(( $(date +%s) - start )) s"
