// Private helpers shared by the compute-op emitters (emit_matmul/conv/pool/reduction):
// element types, typed loads/stores, counted loops with loop-carried values, vector
// helpers and a polynomial exp. Everything emits into ec.b at its insertion point.
// Not used outside jit/llvm.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "carve/jit/tiles.h"
#include "emit.h"

namespace carve::jit::detail::util {

// The LLVM type of one stored element: f32 float, f16 half, bf16 bfloat, f64 double,
// i8/u8/bool i8, i32, i64.
llvm::Type* storage_type(EmitContext& ec, ir::DType dtype);
// The type arithmetic runs in: f16/bf16 widen to float; everything else as stored.
llvm::Type* compute_type(EmitContext& ec, ir::DType dtype);
bool is_fp(ir::DType dtype);
bool is_signed_int(ir::DType dtype);  // i8 i32 i64

llvm::Value* i64c(EmitContext& ec, int64_t v);
llvm::Value* fpc(llvm::Type* t, double v);  // float constant (scalar or splat vector)

// Address of element `index` (i64) of a buffer of `dtype` at `base`.
llvm::Value* elem_ptr(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index);
// Loads element `index` converted to compute_type(dtype); stores a compute-type scalar.
llvm::Value* load_elem(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index);
void store_elem(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index,
                llvm::Value* v);
// Converts a compute-type scalar or vector to the storage type of `dtype` (and back).
llvm::Value* to_storage(EmitContext& ec, ir::DType dtype, llvm::Value* v);
llvm::Value* to_compute(EmitContext& ec, ir::DType dtype, llvm::Value* v);

// Arithmetic on compute-type values (scalars or vectors), float or integer.
llvm::Value* add(EmitContext& ec, llvm::Value* a, llvm::Value* b);
llvm::Value* mul(EmitContext& ec, llvm::Value* a, llvm::Value* b);
llvm::Value* mul_add(EmitContext& ec, llvm::Value* a, llvm::Value* b, llvm::Value* c);  // a*b+c
// max(a, b) as `b > a ? b : a` (signedness from dtype for integers); floats: NaN if
// either is NaN (the reference's max_nan).
llvm::Value* max(EmitContext& ec, ir::DType dtype, llvm::Value* a, llvm::Value* b);
llvm::Value* zero(llvm::Type* t);
// The lowest value of the compute type: -inf for floats, the minimum for integers.
llvm::Value* lowest(EmitContext& ec, ir::DType dtype, llvm::Type* t);

llvm::Value* splat(EmitContext& ec, int lanes, llvm::Value* scalar);
llvm::VectorType* vec_type(llvm::Type* elem, int lanes);
llvm::Value* load_vec(EmitContext& ec, llvm::Type* vt, llvm::Value* ptr);
void store_vec(EmitContext& ec, llvm::Value* v, llvm::Value* ptr);
// Horizontal sum / max of a float vector (tree of shuffles).
llvm::Value* hsum(EmitContext& ec, llvm::Value* v);
llvm::Value* hmax(EmitContext& ec, llvm::Value* v);
// exp(x) for float/double scalars or vectors: Cody-Waite range reduction + polynomial,
// ~1-2 ulp for f32; inputs below ~-87 give 0, above ~88 give +inf.
llvm::Value* exp(EmitContext& ec, llvm::Value* x);

llvm::Value* min_i64(EmitContext& ec, llvm::Value* a, llvm::Value* b);
llvm::Value* max_i64(EmitContext& ec, llvm::Value* a, llvm::Value* b);

// for (iv = begin; iv < end; iv += step) body(iv). Signed compare. The body may emit
// more blocks; the loop continues from wherever the builder is when body returns.
void for_range(EmitContext& ec, llvm::Value* begin, llvm::Value* end, int64_t step,
               const std::function<void(llvm::Value* iv)>& body, const char* name = "i");
// The same with values carried from one iteration to the next; returns their final values.
std::vector<llvm::Value*> for_range_carry(
    EmitContext& ec, llvm::Value* begin, llvm::Value* end, int64_t step,
    std::vector<llvm::Value*> init,
    const std::function<std::vector<llvm::Value*>(llvm::Value* iv,
                                                  const std::vector<llvm::Value*>& carried)>& body,
    const char* name = "k");
void if_then(EmitContext& ec, llvm::Value* cond, const std::function<void()>& then_body);
void if_then_else(EmitContext& ec, llvm::Value* cond, const std::function<void()>& then_body,
                  const std::function<void()>& else_body);
// An alloca in the function's entry block (so it is allocated once per call).
llvm::Value* entry_alloca(EmitContext& ec, llvm::Type* t, int64_t count, const char* name);

// The tile range clamped to [0, num_tiles): tiles outside it are ignored.
struct TileRange {
  llvm::Value* begin;
  llvm::Value* end;
};
TileRange tile_range(EmitContext& ec, int64_t num_tiles);

// Where an anchor node stores its result: its own output, or, with an epilogue, the
// group's final output (the last node's output), with that value's dtype.
struct StoreTarget {
  llvm::Value* ptr;
  ir::DType dtype;
};
StoreTarget store_target(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue);
// Stores `v` (compute type of `anchor_dtype`, scalar or vector) for the element(s) at
// `linear` after the epilogue (if any) into the target.
void store_result(EmitContext& ec, const StoreTarget& target, ir::DType anchor_dtype,
                  const Epilogue& epilogue, llvm::Value* v, llvm::Value* linear);

// The group's tiles mapped onto `units` natural work units: kernel tile t covers units
// [t * chunk, min(units, (t + 1) * chunk)), chunk = ceil(units / group.num_tiles), so any
// num_tiles >= 1 works. body(t, unit) runs for every unit of the requested tiles.
void for_units(EmitContext& ec, int64_t units,
               const std::function<void(llvm::Value* tile, llvm::Value* unit)>& body);
int64_t units_per_kernel_tile(EmitContext& ec, int64_t units);

// True when `v` is an output operand of the group that the plan lets share bytes with
// another operand (KernelGroup::may_alias).
bool output_may_alias(EmitContext& ec, ir::ValueId v);

// The batched, blocked GEMM used by matmul, gemm and conv2d (f32/f64):
//   C[b](i, j) = epilogue(alpha * sum_k A[b](i, k) * B[b](k, j) + cterm(b, i, j))
// Per work unit (batch b, row tile, column tile of tiling::GemmTiles) it packs a K-block
// of B's column tile into a panel (scratch slot of the kernel tile, or a stack buffer)
// and runs an MR x (2 vectors) register-blocked FMA micro-kernel, K innermost.
struct GemmSpec {
  ir::DType dtype = ir::DType::kF32;  // f32 or f64
  // Address of A[b](0, 0); element (i, k) at + i * a_rs + k * a_cs.
  std::function<llvm::Value*(llvm::Value* b)> a_base;
  int64_t a_rs = 0, a_cs = 1;
  // Packs B[b] rows [k0, k0 + kc) x columns [j0, j0 + nc) into dst (row stride ld
  // elements); columns past nc may be left unset.
  std::function<void(llvm::Value* b, llvm::Value* k0, llvm::Value* kc, llvm::Value* j0,
                     llvm::Value* nc, llvm::Value* dst, int64_t ld)>
      pack_b;
  // Linear index (in the anchor output) of C[b](0, 0); element (i, j) at + i * ldc + j.
  std::function<llvm::Value*(llvm::Value* b)> out_base;
  int64_t ldc = 0;
  double alpha = 1.0;
  // Optional term added after alpha: scalar (lanes 0) or <lanes x T> for columns j...
  std::function<llvm::Value*(llvm::Value* b, llvm::Value* i, llvm::Value* j, int lanes)> cterm;
  ir::ValueId out_value = ir::kNoValue;  // anchor output value
};
Status emit_gemm(EmitContext& ec, const ir::Node& node, const tiling::GemmTiles& tiles,
                 const GemmSpec& spec, const Epilogue& epilogue);
// Copies n (runtime) contiguous elements of type t from src to dst (vectorised).
void copy_run(EmitContext& ec, llvm::Type* t, llvm::Value* dst, llvm::Value* src, llvm::Value* n);

}  // namespace carve::jit::detail::util
