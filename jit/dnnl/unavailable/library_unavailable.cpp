// Stands in for jit/dnnl/ when the build has no oneDNN (CARVE_WITH_DNNL=OFF): every group
// is declined, so the JIT generates all kernels.
#include "carve/jit/library_kernel.h"

namespace carve::jit {

std::unique_ptr<LibraryKernel> make_library_kernel(const ir::Graph&, const KernelGroup&, const ConstantBytes&) {
  return nullptr;
}

std::string library_provider_name() { return ""; }

std::string library_blocked_layout() { return ""; }

int64_t library_channel_block() { return 0; }

}  // namespace carve::jit
