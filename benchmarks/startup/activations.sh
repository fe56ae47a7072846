#!/usr/bin/env bash
# activations.sh CARVE_BEFORE CARVE_AFTER MODEL.onnx...: per model, 3 processes each of carve
# before and after (`carve run MODEL --iters 20 --threads 1`, its median) and ONNX Runtime
# (ort_run.py: intra_op_num_threads=1, 20 runs, its median), interleaved; prints the median
# of the 3 per-process medians. ORT_PYTHON: a python with onnxruntime.
before=$1; after=$2; shift 2
ort=${ORT_PYTHON:-/work/venvs/ort/bin/python}
orun="$(dirname "$0")/ort_run.py"
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for m in "$@"; do
  stem=${m%.onnx}; inputs=()
  for f in "$stem".input.*.npy; do n=${f#$stem.input.}; inputs+=(--input "${n%.npy}=$f"); done
  b=(); a=(); o=()
  for i in 1 2 3; do
    b+=($(CARVE_CACHE_DIR=${TMPDIR:-/tmp}/carve-act-cache-before "$before" run "$m" "${inputs[@]}" --iters 20 --threads 1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | head -1))
    a+=($(CARVE_CACHE_DIR=${TMPDIR:-/tmp}/carve-act-cache-after "$after" run "$m" "${inputs[@]}" --iters 20 --threads 1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | head -1))
    o+=($($ort $orun "$m" 1 20 | sed -n 's/.*median run \([0-9.]*\) ms.*/\1/p'))
  done
  printf "%-22s before %8s  after %8s  ort %8s   (runs: %s | %s | %s)\n" "$(basename $m .onnx)" \
    "$(printf '%s\n' "${b[@]}" | med)" "$(printf '%s\n' "${a[@]}" | med)" "$(printf '%s\n' "${o[@]}" | med)" "${b[*]}" "${a[*]}" "${o[*]}"
done
