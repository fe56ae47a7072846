#!/usr/bin/env bash
# The main job: set up (if needed), build Release, run the carve demo: the whole pipeline
# on a shipped model (import, plan, JIT, parallel + sequential runs, KV decoding), writing
# build/demo/plan.svg and build/demo/trace.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
./build/release/tools/carve demo --out-dir build/demo
