// Built when CARVE_WITH_LLVM=OFF (e.g. the CUDA-only build on GPU machines).
#include "carve/jit/host_target.h"

namespace carve::jit {

bool cpu_jit_available() { return false; }

Result<HostTarget> host_target() {
  return Status(ErrorCode::kUnavailable, "carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
}

}  // namespace carve::jit
