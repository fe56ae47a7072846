#!/usr/bin/env bash
# The runner's comparison can fail: test_abs with one expected element moved by 2e-3
# (relative) must be a WRONG result, moved by 5e-4 (inside rtol 1e-3) must pass.
#   tolerance_test.sh PYTHON GENERATE_PY RUNNER WORK_DIR
set -uo pipefail
python=$1 generate=$2 runner=$3 work=$4
check() {  # REL EXIT_WANTED TEXT_WANTED
  "$python" -W ignore "$generate" "$work/$1" --perturb test_abs "$1" || exit $?  # 77: no onnx, a skip
  out=$("$runner" --cases "$work/$1" --expected /dev/null 2>&1)
  rc=$?
  echo "$out"
  if [ $rc -ne "$2" ] || ! grep -q "$3" <<<"$out"; then
    echo "tolerance_test: moved by $1, expected exit $2 and '$3', got exit $rc"
    exit 1
  fi
}
check 2e-3 1 "test_abs gives a WRONG result"
check 5e-4 0 "1 pass, 0 error, 0 not run, 0 WRONG"
echo "tolerance_test: ok"
