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
# The five build trees take about 13 GB (ASan's debug objects 7 GB): stop now, clearly,
# rather than with a compiler's "No space left on device" an hour in. Trees already built
# here count towards it.
need_kb=$(( 16 * 1048576 - $(du -sk build 2>/dev/null | cut -f1 || echo 0) ))
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if (( free_kb < need_kb )); then
  echo "test.sh: $(( free_kb / 1048576 )) GB free on $(df -P . | awk 'NR == 2 { print $6 }');" \
       "the suite's build trees need about $(( need_kb / 1048576 + 1 )) GB more" >&2
  exit 1
fi
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

# ThreadSanitizer: the runtime and scheduler tests (property tests at their suite size), with
# an instrumented oneTBB. Left out: the tests that remove a DAG edge on purpose to make a real
# race for the hazard checker to find ("removed edge"): TSan rightly reports that race.
start=$(date +%s)
bash scripts/build.sh tsan
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/../../scripts/tsan.supp" \
   ctest --output-on-failure --no-tests=error -j "$jobs" --timeout 900 -R '^(runtime|scheduler)/' -E 'removed.edge')
echo "test.sh: tsan suite done in $(( $(date +%s) - start )) s"

# Fuzzing smoke: every libFuzzer target for 30 s (scripts/fuzz.sh SECONDS for longer runs).
start=$(date +%s)
bash scripts/fuzz.sh 30
echo "test.sh: fuzz smoke done in $(( $(date +%s) - start )) s"
