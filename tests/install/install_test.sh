#!/usr/bin/env bash
# The installed package, used as an embedder would: tests/CMakeLists.txt runs
#   install_test.sh prefix  BUILD PREFIX    cmake --install BUILD into an empty PREFIX (the fixture)
#   install_test.sh layout  BUILD PREFIX    files in place, SONAME, only carve's symbols exported
#   install_test.sh embed_c BUILD PREFIX    examples/embed_c built with cc + pkg-config alone, run
#   install_test.sh embed_cpp BUILD PREFIX  examples/embed_cpp built with find_package alone, run
# HAVE_JIT / HAVE_ONNX (0/1) say what the build has; a consumer whose model needs a missing
# part is built but not run, and the test exits 77 (skipped) saying so.
set -euo pipefail
step=$1 build=$2 prefix=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
work="$prefix.work"
fail() { echo "install/$step: $*" >&2; exit 1; }
skip() { echo "SKIP install/$step: $*"; exit 77; }

case "$step" in
  prefix)
    rm -rf "$prefix" "$work"
    cmake --install "$build" --prefix "$prefix" >/dev/null
    ;;
  layout)
    for f in include/carve/carve.h include/carve/status.h include/carve/runtime/session.h lib/libcarve.so \
             lib/libcarve.so.0 lib/cmake/carve/carveConfig.cmake lib/cmake/carve/carveTargets.cmake \
             lib/pkgconfig/carve.pc bin/carve; do
      [[ -e "$prefix/$f" ]] || fail "missing $f"
    done
    # grep without -q reads all its input: with pipefail, -q's early exit would fail the
    # pipeline on the writer's SIGPIPE once the output is long enough.
    readelf -d "$prefix/lib/libcarve.so" | grep 'SONAME.*\[libcarve\.so\.0\]' >/dev/null || fail "no SONAME libcarve.so.0"
    # Exported: the C ABI (carve_*) and the C++ API (carve::...), nothing of LLVM, TBB, protobuf, fmt, std.
    # (nm prints the symbol version, @@CARVE_0, after each name: dropped.)
    others=$(nm -D --defined-only -C "$prefix/lib/libcarve.so" | cut -d' ' -f3- | sed -E 's/@@?CARVE_0$//' |
             grep -vE '^(carve_[a-z0-9_]+|carve::.*|(typeinfo|typeinfo name|vtable|VTT) for carve::.*|CARVE_0)$' || true)
    # Except standard-library instantiations a linked shared dependency exports as well
    # (oneDNN's std::to_string, shared_ptr and future internals): ld keeps a symbol that a
    # needed library also defines dynamic, so that one definition is used process-wide.
    if [[ -n "$others" ]]; then
      deps=$(ldd "$prefix/lib/libcarve.so" | awk '/=> \//{print $3}')
      shared_std=$(for d in $deps; do nm -D --defined-only -C "$d" 2>/dev/null | cut -d' ' -f3-; done |
                   grep -E '^((typeinfo|typeinfo name|vtable) for )?(std::|__gnu_cxx::)' | sort -u || true)
      others=$(comm -23 <(echo "$others" | sort -u) <(echo "$shared_std") | grep -v '^$' || true)
    fi
    [[ -z "$others" ]] || fail "exports symbols that are not carve's:"$'\n'"$(echo "$others" | head -20)"
    nm -D --defined-only "$prefix/lib/libcarve.so" | grep -E ' T carve_program_run(@@CARVE_0)?$' >/dev/null || fail "carve_program_run not exported"
    bad=$(grep -rlE '#\s*include\s*<(llvm|tbb|oneapi|google|onnx|fmt|nlohmann|cuda)' "$prefix/include" || true)
    [[ -z "$bad" ]] || fail "installed headers include third-party headers: $bad"
    "$prefix/bin/carve" --help >/dev/null || fail "bin/carve --help failed"
    ;;
  embed_c)
    mkdir -p "$work"
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    # shellcheck disable=SC2046  # pkg-config's flags are meant to split
    cc -std=c11 -Wall -Wextra -pedantic -Werror "$src/examples/embed_c/main.c" $(pkg-config --cflags --libs carve) \
       -o "$work/embed_c"
    [[ "${HAVE_JIT:-1}" == 1 ]] || skip "built, not run: this build has no CPU JIT"
    (cd "$src/examples/embed_c" && LD_LIBRARY_PATH="$prefix/lib" "$work/embed_c")
    ;;
  embed_cpp)
    [[ "${HAVE_ONNX:-1}" == 1 && "${HAVE_JIT:-1}" == 1 ]] || skip "its model is ONNX: this build has no ONNX importer or no CPU JIT"
    rm -rf "$work/embed_cpp"
    cmake -G Ninja -S "$src/examples/embed_cpp" -B "$work/embed_cpp" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
    cmake --build "$work/embed_cpp" >/dev/null
    (cd "$src/examples/embed_cpp" && "$work/embed_cpp/embed_cpp")
    ;;
  *) fail "unknown step (prefix|layout|embed_c|embed_cpp)" ;;
esac
