#!/usr/bin/env bash
# The side-by-side benchmark: carve vs ONNX Runtime, OpenVINO, IREE (all CPU) and PyTorch
# (CPU, eager) end to end, the GPT-style decoder with KV cache (carve, ORT, OpenVINO,
# torch), the planner on MiniMalloc and on the exported model graphs, dispatch overhead,
# JIT compile time, elementwise vs memcpy, matmul vs OpenBLAS. Writes
# build/bench-results/results.{json,md} and prints the markdown.
#
#   scripts/bench-compare.sh [compare.py options]   e.g. --threads 1,2 --procs 5 --iters 30
#   scripts/bench-compare.sh --cnn --layers --threads 1,2 --skip decoder,planner,gbench
#   scripts/bench-compare.sh --transformers --threads 1,2 --skip planner,gbench   (+ the decoder row)
#   scripts/bench-compare.sh --models resnet18,layer_conv3x3_64_56 --carve PATH   (see --help)
#
# Benchmark-only dependencies, installed here if missing (the build and the tests never
# need them):
#  - Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy (1.24),
#    libopenblas0-pthread (torch's BLAS): compare.py itself, the model exports and the
#    torch worker run on /usr/bin/python3 with these.
#  - a venv build/bench-venv WITHOUT the system site-packages, with PyPI's onnxruntime,
#    openvino, iree-base-compiler, iree-base-runtime, onnx and their own numpy 2.x: the
#    ORT / OpenVINO / IREE workers run on its python. Two interpreters because Debian's
#    torch 1.13 is built against numpy 1.x and current ORT wheels want numpy 2.x; no
#    process imports both. An older venv made over the system site-packages is replaced.
# CARVE_BENCH_NO_INSTALL=1 skips the installs; CARVE_BENCH_NO_BUILD=1 skips the build
# (e.g. with --carve PATH); CARVE_BENCH_PEERS overrides the pip requirement list.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/bench-venv
PEERS=${CARVE_BENCH_PEERS:-"onnxruntime>=1.32 openvino iree-base-compiler[onnx] iree-base-runtime onnx numpy>=2"}
# The import test: every peer package the workers load, plus the IREE tools on disk.
PEER_CHECK='import onnxruntime, openvino, iree.runtime, iree.compiler, onnx, numpy; assert int(numpy.__version__.split(".")[0]) >= 2'

if [[ "${CARVE_BENCH_NO_INSTALL:-0}" != 1 ]]; then
  if ! /usr/bin/python3 -c 'import torch, torchvision, onnx, numpy' 2>/dev/null \
      || ! [[ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]] || ! [[ -x /usr/bin/time ]] \
      || ! /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then
    SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
    $SUDO apt-get update
    $SUDO apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy python3-venv \
      libopenblas0-pthread time
  fi
  # The earlier venv of this script saw Debian's packages (include-system-site-packages =
  # true) and pinned ORT 1.19.2 for numpy 1.24: start that one afresh.
  if [[ -f $VENV/pyvenv.cfg ]] && grep -qi '^include-system-site-packages *= *true' $VENV/pyvenv.cfg; then
    echo "bench-compare: replacing $VENV (it was made over the system site-packages)" >&2
    rm -rf $VENV
  fi
  if ! [[ -x $VENV/bin/python ]] || ! $VENV/bin/python -c "$PEER_CHECK" 2>/dev/null \
      || ! [[ -x $VENV/bin/iree-import-onnx && -x $VENV/bin/iree-compile ]]; then
    [[ -x $VENV/bin/python ]] || /usr/bin/python3 -m venv $VENV
    $VENV/bin/pip install --quiet --upgrade pip
    # shellcheck disable=SC2086  # PEERS is a list of requirements
    $VENV/bin/pip install --upgrade $PEERS
  fi
fi

if [[ "${CARVE_BENCH_NO_BUILD:-0}" != 1 ]]; then
  [[ -f build/release/build.ninja ]] || cmake -G Ninja -S . -B build/release -DCMAKE_BUILD_TYPE=Release
  cmake --build build/release -j"${CARVE_BUILD_JOBS:-$(nproc)}" --target carve kv_decoder_bench \
    bench_dispatch bench_jit_elementwise bench_jit_matmul bench_planner_scaling
fi

export CARVE_BENCH_COMMAND="scripts/bench-compare.sh${*:+ $*}"
exec /usr/bin/python3 benchmarks/compare/compare.py --peer-python "$VENV/bin/python" "$@"
