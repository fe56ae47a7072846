// NVRTC: compiles generated CUDA C (cuda_codegen.h) to a cubin or PTX. No CUDA headers here.
//
//   auto nv = jit::cuda::NvrtcCompiler::create({});           // kUnavailable without NVRTC
//   auto bin = (*nv)->compile(src->source, "sm_90");          // cubin for a known arch
//
// libnvrtc is dlopened at run time (never linked): "libnvrtc.so.<major>", "libnvrtc.so",
// then the toolkit's lib directory known at build time, $CUDA_HOME/lib64 and
// /usr/local/cuda/lib64 (CARVE_NVRTC_LIBRARY overrides all of them with one path). The
// builtins library (libnvrtc-builtins.so.<major>.<minor>) is preloaded from NVRTC's own
// directory (found with dladdr), since NVRTC opens it by bare name and fails on machines
// where that directory is not on the loader path.
//
// Output: for an arch NVRTC lists in nvrtcGetSupportedArchs, a cubin (--gpu-architecture=sm_XY);
// otherwise PTX for the newest supported virtual arch not above it (compute_XY), which the
// driver JIT-compiles (newer GPUs than this NVRTC knows keep working).
// Options: -default-device, --std=c++17, and no fast math (accuracy against the reference
// interpreter); --fmad stays on (only matmul/conv inner loops can contract: elementwise code
// uses non-contracting intrinsics). CompileOptions::extra adds more.
//
// Cache: key = SHA-256 over the source, the resolved target (sm_XY/compute_XY), every
// option, the NVRTC version and kCodegenVersion. Hits in memory return the same binary; the
// disk cache (<cache_dir>/cuda-<key>.bin, written atomically via rename, with a header that
// repeats the key and size) survives processes. cache_dir defaults to $CARVE_CACHE_DIR;
// unreadable/corrupt/unwritable cache files fall back to compiling (never an error).
//
// Thread-safety: compile() may be called from many threads (the cache is mutex-protected;
// two threads missing on one key may both compile it, and one result is kept).
// Errors: kUnavailable "NVRTC not available: ..." when the library cannot be loaded;
// kInvalidArgument for a malformed arch; kInternal "NVRTC compilation failed" with the log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "carve/status.h"

namespace carve::jit::cuda {

enum class BinaryKind : uint8_t { kCubin, kPtx };

struct CudaBinary {
  BinaryKind kind = BinaryKind::kCubin;
  std::string target;           // "sm_90" (cubin) or "compute_90" (ptx)
  std::vector<uint8_t> bytes;   // the cubin, or the PTX text with its trailing NUL
  std::string log;              // NVRTC's log (warnings); empty when none
  std::string key;              // hex SHA-256 cache key
  bool from_memory_cache = false;
  bool from_disk_cache = false;
};

struct NvrtcOptions {
  std::string cache_dir;    // empty: $CARVE_CACHE_DIR, else no disk cache
  bool disk_cache = true;   // false: never touch a disk cache
  bool memory_cache = true;
  bool fast_math = false;   // --use_fast_math (off: accuracy vs the reference)
  std::vector<std::string> extra;  // more NVRTC options, verbatim
};

struct NvrtcStats {
  int64_t requests = 0, compiles = 0, memory_hits = 0, disk_hits = 0, disk_writes = 0;
  double compile_seconds = 0;
};

// Whether NVRTC can be loaded; the message says why not.
Status nvrtc_status();
// "13.0" style version of the loaded NVRTC.
Result<std::string> nvrtc_version();
// Real archs NVRTC can emit cubins for, as compute capabilities*10 (75, 80, 86, 89, 90, ...).
Result<std::vector<int>> nvrtc_supported_archs();
// Directory libnvrtc was loaded from (where the builtins were preloaded from).
Result<std::string> nvrtc_library_dir();

// The SHA-256 cache key of one compile request (exposed for tests and tools).
std::string compile_cache_key(std::string_view source, std::string_view target,
                              const std::vector<std::string>& options, std::string_view nvrtc_version);
// Hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);

class NvrtcCompiler {
 public:
  static Result<std::unique_ptr<NvrtcCompiler>> create(const NvrtcOptions& options = {});
  ~NvrtcCompiler();
  NvrtcCompiler(const NvrtcCompiler&) = delete;
  NvrtcCompiler& operator=(const NvrtcCompiler&) = delete;

  // arch: "sm_XY" / "compute_XY" / "XY" (compute capability x10).
  Result<std::shared_ptr<const CudaBinary>> compile(std::string_view source, std::string_view arch);
  // The options compile() passes for an arch (for keys and tests).
  std::vector<std::string> options_for(std::string_view target) const;
  // The target compile() would use for an arch: "sm_90" or "compute_XY" for unknown ones.
  Result<std::string> resolve_target(std::string_view arch) const;

  NvrtcStats stats() const;
  const std::string& cache_dir() const;
  void clear_memory_cache();

  struct Impl;

 private:
  explicit NvrtcCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace carve::jit::cuda
