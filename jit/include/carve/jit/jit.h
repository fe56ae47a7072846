// The CPU JIT: compiles KernelGroups (fusion.h) to native functions with LLVM ORC.
//
//   auto jit = jit::JitCompiler::create({});            // kUnavailable without LLVM
//   auto order = ir::execution_order(graph);
//   auto groups = jit::form_kernel_groups(graph, *order);
//   auto kernels = (*jit)->compile(graph, *groups);       // one CompiledKernel per group
//   kernels->at(0).fn(operand_addresses, 0, kernels->at(0).group.num_tiles);
//
// Per group the engine builds an LLVM module with one Kernel-ABI function (kernel.h),
// emits the group's body (elementwise chains, layout copies, compute ops with fused
// epilogues), verifies it, optimises it with the new pass manager at opt_level for the
// host CPU (target-cpu/target-features from host_target(), so loops vectorise) and
// generates machine code with ORC LLJIT.
//
// Floating-point policy (docs/jit-numerics.md): no fast-math flags anywhere -- nothing is
// reassociated, no reduction is reordered, and no result depends on the thread count
// (tiles are fixed at compile time, each output element is computed by one tile in one
// order). What may differ from the reference interpreter (carve/reference): f32/f16/bf16
// exp, log, tanh, erf, sigmoid, silu and gelu are polynomial approximations evaluated in
// float (jit/llvm/emit_vmath.cpp; exp, log <= 1 ulp, tanh, erf, sigmoid <= 2, silu <= 3,
// gelu <= 6, asserted by tests/jit/vmath_test.cpp), and multiply-adds may be contracted
// to FMA (llvm.fmuladd) where the host has it. f64 keeps libm.
//
// Kernel cache: the key is a SHA-256 over the generated (pre-optimisation) IR text, the
// target triple, CPU name, feature string, LLVM version, carve version, opt level and an
// engine version tag -- never a group name (two groups with identical code share one
// kernel). Hits in the in-memory cache (key -> function address, kept alive by the
// JitCompiler) skip everything after IR generation; hits in the on-disk cache
// (kernel_cache.h: on by default, `~/.cache/carve`) skip optimisation and machine-code
// generation, so a second process with the same folder does no codegen for kernels it has
// seen. A bad disk entry -- corrupt, or an object the JIT cannot load -- is logged naming
// the file, removed and compiled again in the same call: never an error.
//
// Ownership/lifetime: kernel function pointers stay valid while their JitCompiler lives.
// Thread-safety: compile(), compile_group(), emit_ir() and stats() may be called
// concurrently from any number of threads (each kernel compiles on the thread that asked
// for it -- compile() starts compile_threads - 1 helpers for its batch and joins them --
// with its own TargetMachine; concurrent requests for one key compile it once).
// Errors: kUnavailable in a build without LLVM (CARVE_WITH_LLVM=OFF); kUnsupported for an
// op/dtype combination no emitter handles; kInvalidArgument for a malformed group;
// kInternal when the emitted IR fails verification (with the verifier's message) or LLVM
// fails; kInvalidArgument for cache_max_bytes < 1 or compile_threads < 0. Cache files
// never cause an error: an unreadable, bad or unwritable cache falls back to compiling
// (and logs why).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/jit/kernel.h"
#include "carve/jit/kernel_cache.h"
#include "carve/status.h"

namespace carve::jit {

struct JitOptions {
  // 0..3 (0: no IR optimisation; 2/3: default O2/O3 pipelines). 2 by measurement (AVX2,
  // docs/benchmarks.md "Start-up: O2"): squeezenet1_0's 23 kernels compile in 1.06 s
  // instead of 2.07, bert's and gpt's 10-25 % sooner, and the kernels run as fast as at
  // O3 within the noise (per-launch minimums against ORT's in the same run).
  int opt_level = 2;
  int compile_threads = 0;  // threads compile() spreads a batch over; 0 = hardware concurrency
  // The on-disk kernel cache folder (created if missing). Empty: default_cache_dir()
  // ($CARVE_CACHE_DIR, else $XDG_CACHE_HOME/carve, else ~/.cache/carve).
  std::string cache_dir;
  bool disk_cache = true;  // false: never read or write a disk cache, whatever is set
  int64_t cache_max_bytes = kDefaultCacheMaxBytes;  // the folder's LRU size bound
  // Where cache warnings go (a bad entry removed, a failed write, a folder that cannot be
  // made), one line each, one call at a time per JitCompiler; empty: standard error,
  // prefixed "carve: ".
  CacheLog log;
};

struct CompiledKernel {
  KernelGroup group;
  KernelFn fn = nullptr;
  bool from_memory_cache = false;  // this JitCompiler had compiled identical IR before
  bool from_disk_cache = false;    // the object came from cache_dir (no codegen)
  std::string key;                 // hex SHA-256 cache key
};

struct JitStats {
  int64_t kernels_requested = 0;  // compile_group calls (compile counts each group)
  int64_t modules_emitted = 0;    // IR modules generated (every request emits IR to key it)
  int64_t codegen_count = 0;      // modules optimised and compiled to machine code
  int64_t memory_hits = 0;        // served from the in-memory cache
  int64_t disk_hits = 0;          // objects loaded from the disk cache
  int64_t disk_writes = 0;        // objects written to the disk cache
  int64_t disk_bad_entries = 0;   // bad disk entries removed (and compiled again)
  int64_t disk_write_failures = 0;  // disk writes that failed (nothing left behind)
  int64_t disk_evictions = 0;     // entries removed to keep cache_max_bytes
  int64_t object_bytes = 0;       // object files linked (code + data of every distinct kernel)
  double emit_seconds = 0;        // IR generation + verification + keying
  double codegen_seconds = 0;     // optimisation + machine-code generation
  double link_seconds = 0;        // ORC materialisation/linking excluding codegen
};

class JitCompiler {
 public:
  static Result<std::unique_ptr<JitCompiler>> create(const JitOptions& options = {});
  ~JitCompiler();
  JitCompiler(const JitCompiler&) = delete;
  JitCompiler& operator=(const JitCompiler&) = delete;

  // One CompiledKernel per group, in order, compiled on compile_threads() threads at once
  // (the code does not depend on how many); the first error in group order is returned.
  // use_disk_cache = false: this call neither reads nor writes the disk cache (the memory
  // cache still serves and keeps its kernels).
  Result<std::vector<CompiledKernel>> compile(const ir::Graph& graph, std::span<const KernelGroup> groups,
                                              bool use_disk_cache = true);
  Result<CompiledKernel> compile_group(const ir::Graph& graph, const KernelGroup& group, bool use_disk_cache = true);

  // The group's LLVM IR as text (before optimisation, or after when `optimized`), for
  // `carve ... --explain` and debugging. Does not touch the caches or the JIT.
  Result<std::string> emit_ir(const ir::Graph& graph, const KernelGroup& group,
                              bool optimized = false);

  JitStats stats() const;
  const JitOptions& options() const;
  int compile_threads() const;  // options().compile_threads, or the hardware concurrency
  // The disk cache folder in use; empty when there is none.
  const std::string& cache_dir() const;

  struct Impl;

 private:
  explicit JitCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace carve::jit
