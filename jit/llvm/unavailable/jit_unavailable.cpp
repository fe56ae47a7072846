// Built when CARVE_WITH_LLVM=OFF: the JIT API exists but every entry point reports
// kUnavailable. fusion.cpp (no LLVM) is still built, so grouping works in this build.
#include "carve/jit/jit.h"

namespace carve::jit {

struct JitCompiler::Impl {
  JitOptions options;
  std::string cache_dir;
};

namespace {
Status unavailable() {
  return Status(ErrorCode::kUnavailable,
                "carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
}
}  // namespace

JitCompiler::JitCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitCompiler::~JitCompiler() = default;

Result<std::unique_ptr<JitCompiler>> JitCompiler::create(const JitOptions&) { return unavailable(); }

Result<std::vector<CompiledKernel>> JitCompiler::compile(const ir::Graph&, std::span<const KernelGroup>, bool) {
  return unavailable();
}
Result<CompiledKernel> JitCompiler::compile_group(const ir::Graph&, const KernelGroup&, bool) {
  return unavailable();
}
Result<std::string> JitCompiler::emit_ir(const ir::Graph&, const KernelGroup&, bool) {
  return unavailable();
}
JitStats JitCompiler::stats() const { return {}; }
const JitOptions& JitCompiler::options() const { return impl_->options; }
int JitCompiler::compile_threads() const { return 1; }
const std::string& JitCompiler::cache_dir() const { return impl_->cache_dir; }

}  // namespace carve::jit
