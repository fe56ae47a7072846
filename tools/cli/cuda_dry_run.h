// The CUDA dry run behind `carve compile --device cuda --dry-run`: what a cuda Session's
// compile() would build and compile, done without a GPU.
//
// It builds the device program exactly as the Session does (runtime::build_device_program
// over a CPU arena: the same kernel groups, the same CPU placement from
// CompileOptions::placement), takes the kernels the GPU would run
// (runtime::device_kernels), generates each one's CUDA C (jit::cuda::generate_kernel) and
// compiles every distinct source with NVRTC for every requested arch, on a few threads.
// A GEMM group that cuBLASLt can run (jit::cuda::plan_library_gemm, SessionOptions::
// cuda_gemm) also has its im2col/epilogue kernels compiled: which of the two a Session
// uses depends on the machine's cuBLASLt, so both must compile.
// Kernels placed on the CPU are listed with the reason, never compiled here (a cuda
// Session compiles them with the CPU JIT). A kernel the generator rejects or NVRTC fails
// on is a failure in the report, not an error of the call: the report names every one.
//
// Errors (returned): the program cannot be built (as Session::compile), a bad arch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/jit/cuda/nvrtc.h"
#include "carve/runtime/compile_options.h"
#include "carve/status.h"

namespace carve::cli {

// One requested arch and what NVRTC made of the distinct sources for it.
struct DryRunArch {
  std::string arch;    // as asked: "sm_80"
  std::string target;  // what NVRTC emits: "sm_80" (cubin) or "compute_90" (PTX)
  int64_t compiled = 0;    // distinct sources compiled (or found in a cache)
  int64_t cache_hits = 0;  // of those, from the memory or disk cache
  int64_t failed = 0;
};

// A node the CUDA program runs on the CPU.
struct DryRunCpuNode {
  int32_t kernel = -1;  // Program kernel index
  std::string node, op, reason;
};

// A kernel that does not compile: its index in the program (the CUDA path's group order),
// its group, nodes ("name (op)"), which of its sources, the arch ("" when generation
// failed, for every arch) and the error with NVRTC's log.
struct DryRunFailure {
  int32_t kernel = -1;
  std::string group;
  std::vector<std::string> nodes;
  std::string arch;
  std::string part;  // "" the group's kernel, or "cuBLASLt im2col" / "cuBLASLt epilogue"
  Status status;
  int32_t same_source = 0;  // other kernels with the identical source (they fail too)
};

struct DryRunReport {
  int64_t kernels = 0;         // kernels the GPU runs (generated)
  int64_t library_gemms = 0;   // of those, GEMM groups cuBLASLt can run (their kernels counted in sources)
  int64_t unique_sources = 0;  // distinct generated sources (identical groups share one)
  std::vector<DryRunArch> archs;
  std::vector<DryRunCpuNode> cpu_nodes;
  std::vector<DryRunFailure> failures;
  double build_seconds = 0, generate_seconds = 0, nvrtc_seconds = 0;
  bool ok() const { return failures.empty(); }
};

struct DryRunOptions {
  std::vector<std::string> archs;  // "sm_80", "compute_90", "90" (NvrtcCompiler::compile)
  int threads = 1;                 // NVRTC compiles at once
  // Why a node in CompileOptions::placement runs on the CPU (the caller knows who put it there).
  std::string placement_reason = "placed on cpu by CompileOptions::placement";
};

Result<DryRunReport> cuda_dry_run(const ir::Graph& graph, const runtime::CompileOptions& compile,
                                  jit::cuda::NvrtcCompiler& nvrtc, const DryRunOptions& options);

// "kernel 3 'fused_add_relu_3' [add_1 (add), relu_2 (relu)] for sm_80: <message, first
// `log_lines` lines>": the line a failure is reported with.
std::string describe_failure(const DryRunFailure& failure, int log_lines = 8);

}  // namespace carve::cli
