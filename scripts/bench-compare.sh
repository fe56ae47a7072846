#!/usr/bin/env bash
# The side-by-side benchmark: carve vs ONNX Runtime (CPU) and PyTorch (CPU, eager) end
# to end, the GPT-style decoder with KV cache, the planner on MiniMalloc and on the
# exported model graphs, dispatch overhead, JIT compile time, elementwise vs memcpy,
# matmul vs OpenBLAS. Writes build/bench-results/results.{json,md} and prints the markdown.
#
#   scripts/bench-compare.sh [compare.py options]   e.g. --threads 2 --procs 5 --iters 30
#
# Benchmark-only dependencies, installed here if missing (the build and the tests never
# need them): Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy,
# libopenblas0-pthread (torch's BLAS), and a venv build/bench-venv over /usr/bin/python3
# (--system-site-packages, so it sees Debian's torch and numpy 1.24) with onnxruntime
# from PyPI (pinned to a wheel built for numpy 1.x). CARVE_BENCH_NO_INSTALL=1 skips the
# installs; CARVE_BENCH_NO_BUILD=1 skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
ORT_VERSION=${CARVE_BENCH_ORT_VERSION:-1.19.2}
VENV=build/bench-venv

if [[ "${CARVE_BENCH_NO_INSTALL:-0}" != 1 ]]; then
  if ! /usr/bin/python3 -c 'import torch, torchvision, onnx, numpy' 2>/dev/null \
      || ! [[ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]] || ! [[ -x /usr/bin/time ]]; then
    SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy python3-venv \
      libopenblas0-pthread time
  fi
  if ! [[ -x $VENV/bin/python ]] || ! $VENV/bin/python -c "import onnxruntime" 2>/dev/null; then
    /usr/bin/python3 -m venv --system-site-packages $VENV
    # --no-deps: keep Debian's numpy 1.24 (onnxruntime's own requirement would accept it,
    # but pip may still try to upgrade); its small pure-Python deps are installed next.
    $VENV/bin/pip install --no-deps "onnxruntime==$ORT_VERSION"
    $VENV/bin/pip install coloredlogs flatbuffers packaging protobuf sympy
  fi
fi

if [[ "${CARVE_BENCH_NO_BUILD:-0}" != 1 ]]; then
  [[ -f build/release/build.ninja ]] || cmake -G Ninja -S . -B build/release -DCMAKE_BUILD_TYPE=Release
  cmake --build build/release -j"${CARVE_BUILD_JOBS:-$(nproc)}" --target carve kv_decoder_bench \
    bench_dispatch bench_jit_elementwise bench_jit_matmul bench_planner_scaling
fi

export CARVE_BENCH_COMMAND="scripts/bench-compare.sh${*:+ $*}"
exec $VENV/bin/python benchmarks/compare/compare.py "$@"
