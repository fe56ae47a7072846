#!/usr/bin/env bash
# oneTBB built with ThreadSanitizer for the tsan configuration (scripts/build.sh tsan).
# Debian's libtbb is not instrumented: TSan cannot see the synchronisation inside it (a task
# published by one thread and run by another), so every parallel run would report false
# races. This builds the same version from Debian's own source package (the .orig tarball
# of onetbb 2021.8.0-2+deb12u1, checked against the .dsc's SHA-256) with -fsanitize=thread.
#   scripts/tbb-tsan.sh PREFIX   -> PREFIX/lib/cmake/TBB (skipped when already there)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(realpath -m "${1:-build/tbb-tsan}")"
[ -f "$prefix/lib/cmake/TBB/TBBConfig.cmake" ] && exit 0

version=2021.8.0
tarball="onetbb_${version}.orig.tar.xz"
sha256=7e9111b8bb59c8800bf6d0b06afe7b0891937443d2dae1ee1101c8e2ede6a7ef
work="$prefix.work"
rm -rf "$work"
mkdir -p "$work"
echo "tbb-tsan: fetching Debian's $tarball"
curl -sSfL --retry 3 -o "$work/$tarball" "http://deb.debian.org/debian/pool/main/o/onetbb/$tarball"
echo "$sha256  $work/$tarball" | sha256sum -c --quiet
tar -xJf "$work/$tarball" -C "$work"
cmake -G Ninja -S "$work/oneTBB-$version" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTBB_SANITIZE=thread -DTBB_TEST=OFF -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "$work/build" -j "${CARVE_JOBS:-2}" >/dev/null
cmake --install "$work/build" >/dev/null
rm -rf "$work"
echo "tbb-tsan: installed in $prefix"
