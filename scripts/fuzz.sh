#!/usr/bin/env bash
# Builds the libFuzzer targets (scripts/build.sh fuzz: clang-22, ASan + UBSan) and runs each
# for SECONDS (default 60), seeded from fuzz/corpus/<name> (text graphs, CSV edge cases) and
# the test data already in the repository (tests/data/npy, tests/onnx/models).
# New inputs go to build/fuzz/corpus/<target> (never into the repository); a crash, leak,
# timeout or out-of-memory leaves its reproducer in build/fuzz/artifacts/ and fails the run.
#   scripts/fuzz.sh [SECONDS] [TARGET ...]
# Reproduce one: build/fuzz/fuzz/<target> build/fuzz/artifacts/<target>/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(text_parser_fuzzer npy_reader_fuzzer planner_csv_fuzzer onnx_import_fuzzer)

bash scripts/build.sh fuzz "${targets[@]}"

# Extra seeds already in the repository, by target.
declare -A seeds=(
  [npy_reader_fuzzer]=tests/data/npy
  [onnx_import_fuzzer]=tests/onnx/models
)
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
status=0
summary=()
for t in "${targets[@]}"; do
  name="${t%_fuzzer}"
  work="build/fuzz/corpus/$name"
  artifacts="build/fuzz/artifacts/$name"
  mkdir -p "$work" "$artifacts"
  dirs=("$work")
  [ -d "fuzz/corpus/$name" ] && dirs+=("fuzz/corpus/$name")
  [ -n "${seeds[$t]:-}" ] && dirs+=("${seeds[$t]}")
  log="build/fuzz/$name.log"
  echo "fuzz.sh: $t for ${seconds} s"
  # -rss_limit_mb / -malloc_limit_mb: the memory limit (a bad input asking for more is a
  # finding); -timeout: one input may take at most 10 s.
  if ! "build/fuzz/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
       -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1; then
    echo "fuzz.sh: $t FAILED; see $log and $artifacts/" >&2
    tail -40 "$log" >&2
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  summary+=("$t: $runs executions in ${seconds} s")
done
printf 'fuzz.sh: %s\n' "${summary[@]}"
exit $status
