// CUDA C code generation for kernel groups (fusion.h). No CUDA headers here; builds in
// every configuration (the generator is plain C++; only compiling/launching needs CUDA).
//
//   auto groups = jit::form_kernel_groups(graph, *order);   // the SAME groups as the CPU JIT
//   auto src = jit::cuda::generate_kernel(graph, (*groups)[0]);
//   // src->source: one self-contained translation unit (no #include) with
//   //   extern "C" __global__ void carve_kernel(<one pointer per operand>)
//   // src->launch: grid/block for cuLaunchKernel (static shared memory only).
//
// Kernel ABI (GPU): parameter i is the device address of KernelGroup::operands[i] (inputs,
// outputs, then scratch), typed by the operand's dtype (f16/bf16 as unsigned short, bool
// as unsigned char; handles by the handle's declared type; scratch as unsigned char* and
// unused). There are no size parameters: shapes and attributes are baked into the source,
// so identical groups produce identical text (and share one compiled module). One launch
// runs the whole group; the CPU tile split (num_tiles) does not apply on the GPU.
//
// Semantics follow carve/reference/reference.h:
//  - f32/f64 + - * / sqrt abs neg relu max min are computed in the dtype with non-contracting
//    intrinsics (__fadd_rn ...), so fused chains are bit-identical to the reference; f16/bf16
//    compute them in float and round after every node (exact, float has >= 2p+2 bits).
//  - floor ceil round (rint: half to even) trunc fmod are exact in the compute type.
//  - exp log tanh erf sigmoid silu gelu rsqrt pow clip hard_sigmoid and the trigonometric/
//    hyperbolic ops are computed in double (CUDA's double math, within 2 ulp of double)
//    and rounded once (to f16/bf16 through round-to-odd float, so no double rounding).
//  - conversions are written out in the generated source (no cuda_fp16.h needed): f16/bf16
//    round to nearest even; casts follow the reference cast rules (saturating truncation,
//    NaN -> 0, int wrap, x != 0 for bool).
//  - integers wrap (computed in unsigned 64-bit), x / 0 = 0, INT_MIN / -1 = INT_MIN,
//    x fmod 0 = 0.
//  - reductions/softmax/layer_norm/batch_norm/avg pools accumulate f32/f16/bf16 in double
//    when CodegenOptions::double_accumulation (default), matmul/gemm/conv in float (f64 in
//    double, integers wrap exactly). Summation order differs from the reference (parallel
//    trees), so float results agree within a tolerance, not bit for bit.
//  - out of range: a gather index outside [-n, n) yields zeros (as on the CPU); a
//    write_handle_at position outside [0, handle_dim - value_dim] writes nothing and is
//    reported through the module's error word (below), so the run fails with kOutOfBounds.
//
// Error word: a kernel with KernelSource::error_word defines
//   __device__ long long carve_error[2];   // kErrorWord; zero-initialised at module load
// and, on the first out-of-range position, sets it to {1, position}. The executor reads
// it after the run (cuModuleGetGlobal), clears it and fails the run naming the check.
//
// Thread-safety: pure functions. Errors: kUnsupported for an op/dtype the generator does not
// handle; kInvalidArgument for a malformed group (no nodes, unknown ids, operand mismatch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "carve/ir/graph.h"
#include "carve/jit/kernel.h"
#include "carve/status.h"

namespace carve::jit::cuda {

// Bumped whenever generated code changes meaning; part of every compile cache key.
inline constexpr std::string_view kCodegenVersion = "carve-cuda-codegen-1";
// The name of the one __global__ function in every generated source.
inline constexpr std::string_view kKernelEntry = "carve_kernel";
// The name of the error word's __device__ array (see above).
inline constexpr std::string_view kErrorWord = "carve_error";

struct CodegenOptions {
  int block_size = 256;             // threads per block of 1-D kernels (multiple of 32, <= 1024)
  int64_t max_blocks = 1 << 20;     // grid cap; kernels use grid-stride loops beyond it
  bool double_accumulation = true;  // see above
};

struct LaunchConfig {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;  // dynamic shared memory (generated kernels use static only: 0)
};

struct KernelSource {
  std::string entry{kKernelEntry};
  std::string source;        // complete CUDA C++ translation unit
  LaunchConfig launch;
  int num_params = 0;        // == group.operands.size()
  std::string family;        // "elementwise", "layout", "reduce", "softmax", "gemm", "conv", ...
  bool error_word = false;   // the source defines kErrorWord (it checks a position)
};

// The kernel for one group. Every non-view op of ir::OpKind is supported, views too (as
// copies, for make_single_node_group).
Result<KernelSource> generate_kernel(const ir::Graph& graph, const KernelGroup& group,
                                     const CodegenOptions& options = {});

// ---- GEMM through a library (cuBLASLt) ----
//
// A matmul/gemm/conv2d group can instead run as up to three launches on one stream:
//   1. conv2d only, unless 1x1/stride 1/no padding: `im2col` fills the workspace's column
//      matrices [batch][k x n] from the input (params: x, workspace);
//   2. ONE strided-batched row-major GEMM  product[z] = op(A[z]) * op(B[z])  (f32 products,
//      z < batch) by the library, into `product_operand` when there is no epilogue, else
//      into the workspace after the columns;
//   3. `epilogue` (when the group has more than the bare product: gemm's alpha/beta/C,
//      conv2d's bias, fused elementwise nodes): the group's operands, then the product, as
//      parameters; one thread per output element, the same chain and stores as
//      generate_kernel's epilogue.
// The product's layout is the anchor output's (row-major [batch][m][n]), so the epilogue
// reads it at the output's linear index. Element offsets and strides below are in elements.
struct GemmMatrix {
  int operand = -1;          // group operand; -1: the workspace (conv2d columns)
  int64_t offset = 0;        // of batch 0
  int64_t batch_stride = 0;  // 0: the same matrix for every z
  int64_t ld = 0;            // row-major leading dimension as stored
  bool transposed = false;   // stored as [k x m] (A) / [n x k] (B)
};

struct LibraryGemm {
  ir::DType dtype = ir::DType::kF32;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  GemmMatrix a, b;
  int product_operand = -1;        // the output the library writes when `epilogue` is empty
  std::optional<KernelSource> im2col;
  int column_source = -1;          // im2col: the input operand it reads
  int64_t column_elements = 0;     // workspace elements the columns take (im2col)
  std::optional<KernelSource> epilogue;
  int64_t product_elements = 0;    // batch * m * n
  // Workspace elements this group needs beyond the library's own workspace: columns, then
  // the product when there is an epilogue.
  int64_t workspace_elements() const { return column_elements + (epilogue ? product_elements : 0); }
};

// kUnsupported (with the reason) when the group does not map onto one strided-batched f32
// GEMM: not matmul/gemm/conv2d, not f32, a batch broadcast that is not all-or-nothing, a
// depthwise-like conv (one input channel per group), grouped conv with batch > 1, or an
// operand that may alias the product's destination. The caller then uses generate_kernel.
Result<LibraryGemm> plan_library_gemm(const ir::Graph& graph, const KernelGroup& group,
                                      const CodegenOptions& options = {});

}  // namespace carve::jit::cuda
