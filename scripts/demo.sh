#!/usr/bin/env bash
# The main job: set up (if needed), build Release, run the carve demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
./build/release/tools/carve demo
