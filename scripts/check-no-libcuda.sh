#!/usr/bin/env bash
# scripts/check-no-libcuda.sh BINARY...: fails if any binary has a link-time dependency on
# libcuda or libnvrtc (both must be dlopened at run time). Run by CTest (cuda/ldd/...).
set -euo pipefail
status=0
for bin in "$@"; do
  if ldd "$bin" | grep -Ei 'libcuda|libnvrtc'; then
    echo "FAIL: $bin links CUDA libraries (they must be dlopened)" >&2
    status=1
  else
    echo "ok: $bin has no libcuda/libnvrtc"
  fi
done
exit $status
