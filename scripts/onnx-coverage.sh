#!/usr/bin/env bash
# Regenerates tests/onnx/conformance/expected_failures.txt and docs/onnx-coverage.md from
# ONNX's backend node tests (Release build; the onnx/conformance/* tests check both).
#   bash scripts/onnx-coverage.sh
#   ORT_PYTHON=/path/to/python bash scripts/onnx-coverage.sh   # + ONNX Runtime's count on the same cases
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh release carve_onnx_conformance
cases=build/release/tests/onnx-node-cases
/usr/bin/python3 -W ignore tests/onnx/conformance/generate.py "$cases"
note=""
if [ -n "${ORT_PYTHON:-}" ]; then
  ort=$("$ORT_PYTHON" scripts/onnx-coverage-ort.py "$cases" 2>/dev/null | tail -1)
  note="Reference: ${ort%.} (\`scripts/onnx-coverage-ort.py\`: the same files and comparison; cases with sequence, optional, string or bfloat16 data count as failures for it too)."
fi
build/release/tests/carve_onnx_conformance --cases "$cases" --note "$note" \
  --write-expected tests/onnx/conformance/expected_failures.txt --write-doc docs/onnx-coverage.md
