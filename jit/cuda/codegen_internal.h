// Helpers shared by the codegen_*.cpp files (CUDA C text generation). No CUDA headers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "carve/jit/cuda/cuda_codegen.h"

namespace carve::jit::cuda::detail {

// Storage type of a dtype in generated code (f16/bf16: unsigned short, bool: unsigned char).
std::string_view stype(ir::DType dtype);
// Compute type: float for f32/f16/bf16, double for f64, bool for bool, unsigned long long
// for u64 (its values and order are past long long's), long long for the other ints.
std::string_view ctype(ir::DType dtype);
// Accumulator for sums: double (f64, or f32/f16/bf16 with wide), float, or the integer
// compute type.
std::string_view acc_type(ir::DType dtype, bool wide);
// Whether an accumulator type is an integer one (wrapping carve_w* arithmetic).
bool is_int_acc(std::string_view acc);

// Exact double literal (hex float; inf/nan through helpers).
std::string dlit(double v);
std::string ilit(int64_t v);

// Expressions. `x` is an expression of ctype(dtype) unless stated.
std::string load(ir::DType dtype, std::string_view ptr, std::string_view idx);  // -> ctype
std::string store(ir::DType dtype, std::string_view ptr, std::string_view idx, std::string_view x);
std::string round_to(ir::DType dtype, std::string_view x);     // a compute value rounded to dtype
std::string from_double(ir::DType dtype, std::string_view d);  // double -> ctype, rounded once
// An integer compute value (long long, or u64 when from_u64) -> ctype, cast rules.
std::string from_int(ir::DType dtype, std::string_view v, bool from_u64 = false);
// A storage-typed literal for `value` converted with the cast rules (pad's value).
std::string storage_literal(ir::DType dtype, double value);
// The dtype's lowest value as a compute literal (-inf, or the integer minimum).
std::string lowest_literal(ir::DType dtype);

// The common prelude: typedefs and conversion helpers, no includes.
std::string_view prelude();

int64_t numel(const std::vector<int64_t>& dims);
std::vector<int64_t> row_major(const std::vector<int64_t>& dims);
// Strides of `in` numpy-broadcast against `out` (0 for broadcast dims).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);
int normalize_axis(int64_t axis, int rank);

// Code that splits linear index `lin` into `<prefix><d>` for every dim of `dims` (row-major).
std::string decompose(const std::vector<int64_t>& dims, std::string_view lin, std::string_view prefix,
                      std::string_view indent);
// sum_d <prefix>d * strides[d] (terms with stride 0 or dim 1 dropped); "0" when empty.
std::string offset_of(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      std::string_view prefix);

class KernelWriter {
 public:
  KernelWriter(const ir::Graph& graph, const KernelGroup& group, const CodegenOptions& options);

  const ir::Graph& graph() const { return g_; }
  const KernelGroup& group() const { return group_; }
  const CodegenOptions& options() const { return opt_; }
  const ir::Node& anchor() const { return g_.node(group_.nodes.front()); }

  // Checks operands/handles; call before anything else.
  Status init();
  // Operand index of value v with the role, or -1.
  int operand(ir::ValueId v, OperandRole role) const;
  // The operand's pointer parameter name ("p3").
  static std::string param(int i);
  const ir::TensorType& operand_type(int i) const { return types_[static_cast<size_t>(i)]; }
  const ir::TensorType& value_type(ir::ValueId v) const { return g_.value(v).type; }
  // First operand of a role (the handle operand of a state op).
  int first(OperandRole role) const;

  std::string body;  // the kernel body, between the braces
  LaunchConfig launch;
  std::string family;
  // Device helper functions placed before the kernel (e.g. an int pow).
  std::string helpers;
  int max_threads = 0;  // __launch_bounds__ when > 0
  bool error_word = false;  // define kErrorWord (cuda_codegen.h) before the kernel
  std::string extra_params;  // appended after the operands' parameters (", const float* q")

  void launch_1d(int64_t work_items);  // grid-stride 1-D config over work items
  // "for (long long i = ...; i < n; i += stride)" grid-stride loop header over `n` items.
  static std::string grid_loop(std::string_view var, int64_t n);

  Result<KernelSource> finish() const;

 private:
  const ir::Graph& g_;
  const KernelGroup& group_;
  const CodegenOptions& opt_;
  std::vector<ir::TensorType> types_;
};

// Per-node attribute access with defaults (attributes were validated by inference).
int64_t attr_int(const ir::Node& n, std::string_view name, int64_t fallback);
double attr_float(const ir::Node& n, std::string_view name, double fallback);
std::vector<int64_t> attr_ints(const ir::Node& n, std::string_view name, std::vector<int64_t> fallback);
std::string attr_string(const ir::Node& n, std::string_view name);

Status unsupported(const ir::Graph& g, const ir::Node& n, std::string_view why);

// Elementwise chain: emits statements computing group.nodes[first..] for the output element
// whose index over `out_dims` is held in `<prefix>d` variables and whose linear index is
// `lin`. `values` maps already-computed values to compute-typed variables (an epilogue's
// anchor value); external operands are loaded with broadcasting. Adds the stores of every
// output operand unless `stores` is false (the caller stores from `values`). Appends to `code`.
Status emit_chain(KernelWriter& w, size_t first, const std::vector<int64_t>& out_dims,
                  std::string_view lin, std::string_view prefix,
                  std::map<ir::ValueId, std::string>& values, std::string& code,
                  std::string_view indent, bool stores = true);

// matmul/gemm/conv2d epilogues (codegen_gemm.cpp). gemm_epilogue: statements that define
// the anchor's value `value` (a compute value of the output dtype) at linear output index
// `lin`, then the fused chain and the stores. The value expressions below read `sum` (the
// K sum, of the accumulator type `acc`): gemm_value also `i`, `j` (row, column of the
// [m x n_cols] output), conv_value also `oc` (the output channel).
Status gemm_epilogue(KernelWriter& w, const std::string& value, const std::string& lin, std::string& code,
                     std::string_view indent);
std::string sum_to_value(ir::DType dtype, std::string_view acc, const std::string& sum);
std::string gemm_value(KernelWriter& w, int64_t m, int64_t n_cols);
std::string conv_value(KernelWriter& w, std::string_view acc);

// Families.
Status emit_elementwise(KernelWriter& w);
Status emit_layout(KernelWriter& w);
Status emit_reduce(KernelWriter& w);       // reduce_sum/mean/max
Status emit_arg(KernelWriter& w);          // arg_max, arg_min
Status emit_rows(KernelWriter& w);         // softmax, layer_norm, global_avg_pool
Status emit_batch_norm(KernelWriter& w);
Status emit_pool(KernelWriter& w);         // max_pool, avg_pool
Status emit_gemm(KernelWriter& w);         // matmul, gemm (+ epilogue)
Status emit_conv(KernelWriter& w);         // conv2d (+ epilogue)
Status emit_index(KernelWriter& w);        // gather_nd, scatter_nd, top_k

}  // namespace carve::jit::cuda::detail
