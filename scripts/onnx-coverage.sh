#!/usr/bin/env bash
# Regenerates tests/onnx/conformance/expected_failures.txt and docs/onnx-coverage.md from
# ONNX's backend node tests (Release build; the onnx/conformance/* tests check both).
#   bash scripts/onnx-coverage.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh release carve_onnx_conformance
cases=build/release/tests/onnx-node-cases
/usr/bin/python3 -W ignore tests/onnx/conformance/generate.py "$cases"
build/release/tests/carve_onnx_conformance --cases "$cases" \
  --write-expected tests/onnx/conformance/expected_failures.txt --write-doc docs/onnx-coverage.md
