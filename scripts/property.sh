#!/usr/bin/env bash
# Long property runs (not part of the regular suite, which runs rapidcheck's default of
# 100 cases per property): every rapidcheck property of the Release build with
# RC_PARAMS max_success=N (default 3000), e.g. thousands of random graphs through the
# Session, parallel vs sequential, and thousands of random plans per strategy.
#   scripts/property.sh [N] [CTEST_REGEX]     (default regex: every "property" test)
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-3000}"
regex="${2:-property}"
bash scripts/build.sh release
export RC_PARAMS="max_success=$cases ${RC_PARAMS:-}"
start=$(date +%s)
(cd build/release && ctest --output-on-failure -j "${CARVE_JOBS:-2}" --timeout 7200 -R "$regex")
echo "property.sh: $cases cases per property, done in $(( $(date +%s) - start )) s"
