// NVRTC in a build without the CUDA toolkit (CARVE_WITH_CUDA=OFF or not found): everything
// reports kUnavailable; code generation (codegen_*.cpp) still works.
#include "carve/jit/cuda/nvrtc.h"

namespace carve::jit::cuda {
namespace {
Status no_nvrtc() {
  return Status(ErrorCode::kUnavailable, "NVRTC not available: carve was built without the CUDA backend");
}
}  // namespace

Status nvrtc_status() { return no_nvrtc(); }
Result<std::string> nvrtc_version() { return no_nvrtc(); }
Result<std::vector<int>> nvrtc_supported_archs() { return no_nvrtc(); }
Result<std::string> nvrtc_library_dir() { return no_nvrtc(); }

struct NvrtcCompiler::Impl {};
NvrtcCompiler::NvrtcCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvrtcCompiler::~NvrtcCompiler() = default;
Result<std::unique_ptr<NvrtcCompiler>> NvrtcCompiler::create(const NvrtcOptions&) { return no_nvrtc(); }
Result<std::shared_ptr<const CudaBinary>> NvrtcCompiler::compile(std::string_view, std::string_view) { return no_nvrtc(); }
std::vector<std::string> NvrtcCompiler::options_for(std::string_view) const { return {}; }
Result<std::string> NvrtcCompiler::resolve_target(std::string_view) const { return no_nvrtc(); }
NvrtcStats NvrtcCompiler::stats() const { return {}; }
const std::string& NvrtcCompiler::cache_dir() const {
  static const std::string empty;
  return empty;
}
void NvrtcCompiler::clear_memory_cache() {}

}  // namespace carve::jit::cuda
