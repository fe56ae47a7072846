#!/usr/bin/env bash
# Checks one layering rule over the source tree, drawn from the #include lines:
#   scripts/check-layers.sh RULE      (RULE: one of the names below; `all` runs every rule)
# Dependencies point one way: ir <- planner, reference, jit <- runtime <- onnx <- tools.
# Prints every offending include as file:line and exits 1 when there is one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# rule name -> "folders|allowed carve include prefixes (regex)"
declare -A rules=(
  [ir]="ir|carve/(ir/|(status|file)\.h)"
  [planner]="planner|carve/(ir/|(status|file)\.h|planner/)"
  [reference]="reference|carve/(ir/|(status|file)\.h|reference/)"
  [jit]="jit|carve/(ir/|(status|file)\.h|jit/)"
  [runtime]="runtime|carve/(ir/|(status|file)\.h|planner/|reference/|jit/|runtime/)"
)

sources() { find "$@" -type f \( -name '*.h' -o -name '*.cpp' \) | sort; }

check_carve_includes() {  # folder allowed-regex
  local bad
  bad=$(sources "$1" | xargs grep -nE '^\s*#\s*include\s+"carve/' | grep -vE "\"$2" || true)
  if [[ -n "$bad" ]]; then echo "$1 includes outside its layer:"; echo "$bad"; return 1; fi
}

# Third-party headers confined to folders: LLVM to jit/llvm, CUDA to jit/cuda and runtime/cuda;
# never in a public header (include/ folders).
check_confined() {  # name header-regex allowed-folder-regex
  local bad
  bad=$(sources ir planner reference jit runtime onnx tools | xargs grep -nE "^\s*#\s*include\s+<($2)" |
        grep -vE "^($3)" || true)
  local public
  public=$(sources ir planner reference jit runtime onnx | grep '/include/' |
           xargs grep -nE "^\s*#\s*include\s+<($2)" || true)
  bad=$(printf '%s\n%s' "$bad" "$public" | sed '/^$/d' | sort -u)
  if [[ -n "$bad" ]]; then echo "$1 headers outside their folders or in a public header:"; echo "$bad"; return 1; fi
}

run_rule() {
  case "$1" in
    llvm) check_confined LLVM 'llvm/|llvm-c/' 'jit/llvm/' ;;
    cuda) check_confined CUDA 'cuda\.h|cuda_runtime|nvrtc\.h|cudaTypedefs' 'jit/cuda/|runtime/cuda/' ;;
    *)
      [[ -n "${rules[$1]:-}" ]] || { echo "check-layers: unknown rule '$1'" >&2; return 2; }
      check_carve_includes "${rules[$1]%%|*}" "${rules[$1]#*|}" ;;
  esac
}

rule=${1:?usage: check-layers.sh RULE|all}
if [[ "$rule" == all ]]; then
  rc=0
  for r in ir planner reference jit runtime llvm cuda; do run_rule "$r" || rc=1; done
  exit $rc
fi
run_rule "$rule"
