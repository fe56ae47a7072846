// The CPU that kernels are compiled for. Kernel-cache keys include all of it, so a
// cached object is never reused on a CPU with other features.
// Thread-safe: the result is computed once and cached.
#pragma once

#include <string>

#include "carve/status.h"

namespace carve::jit {

struct HostTarget {
  std::string triple;    // e.g. x86_64-pc-linux-gnu
  std::string cpu;       // e.g. znver3, skylake-avx512
  std::string features;  // LLVM subtarget feature string, e.g. "+avx2,+fma,-avx512f"
  std::string llvm_version;
};

// True when carve was built with the LLVM CPU JIT (CMake option CARVE_WITH_LLVM).
bool cpu_jit_available();

// The host target as LLVM sees it. Errors: kUnavailable when built without LLVM.
Result<HostTarget> host_target();

}  // namespace carve::jit
