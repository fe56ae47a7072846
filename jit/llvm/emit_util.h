// The one helper kit of the LLVM emitters (emit_*.cpp): element types, typed loads and
// stores, 16-bit float conversions, counted loops, tiles, vector helpers, a polynomial
// exp and node attributes. Everything emits into ec.b at its insertion point and accepts
// scalars or fixed vectors unless it says otherwise. Private to jit/llvm.
//
// Compute types (what arithmetic runs in): f32, f16, bf16 -> float; f64 -> double;
// i8/u8 -> i8; i32 -> i32; i64 -> i64; bool -> i1. Storage: f16/bf16 as i16 bit patterns
// (converted with integer bit tricks: round to nearest even, canonical quiet NaN, no
// libcalls or F16C), bool as one byte 0/1.
// Bool computes as i1 (what icmp yields and select takes), so only loads/stores convert.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "emit.h"

namespace carve::jit::detail::util {

// ---- types and constants
llvm::Type* storage_type(EmitContext& ec, ir::DType dtype);
llvm::Type* compute_type(EmitContext& ec, ir::DType dtype);
// `elem` with the shape (scalar or <N x >) of `like`.
llvm::Type* like_shape(llvm::Type* elem, llvm::Type* like);
bool is_fp(ir::DType dtype);
bool is_signed_int(ir::DType dtype);  // i8 i16 i32 i64
// `v` truncated toward zero and saturated to integer dtype `d` (NaN -> 0), as the bits of
// its dtype-wide two's complement (zero-extended): the cast rules of the reference.
uint64_t saturated_int_bits(ir::DType d, double v);

llvm::Value* i64c(EmitContext& ec, int64_t v);
llvm::Value* intc(llvm::Type* t, uint64_t v);  // integer constant (scalar or splat vector)
llvm::Value* fpc(llvm::Type* t, double v);     // float constant (scalar or splat vector)
llvm::Value* zero(llvm::Type* t);
// The lowest value of the compute type: -inf for floats, the minimum for integers.
llvm::Value* lowest(EmitContext& ec, ir::DType dtype, llvm::Type* t);

// ---- elements
// Address of element `index` (i64) of a buffer of `dtype` at `base`.
llvm::Value* elem_ptr(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index);
// Loads element `index` as compute_type(dtype); stores a compute-type scalar.
llvm::Value* load_elem(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index);
void store_elem(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index,
                llvm::Value* v);
// `lanes` (0 = scalar) contiguous elements from `index` on, in the compute type; store_n
// stores a scalar or a vector alike.
llvm::Value* load_n(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index,
                    int lanes);
void store_n(EmitContext& ec, ir::DType dtype, llvm::Value* base, llvm::Value* index,
             llvm::Value* v);
// Storage bits <-> compute type (emit_util_float.cpp).
llvm::Value* from_storage(EmitContext& ec, ir::DType dtype, llvm::Value* stored);
llvm::Value* to_storage(EmitContext& ec, ir::DType dtype, llvm::Value* v);

// ---- float rounding (emit_util_float.cpp)
// int64 -> double rounding to odd (so a following rounding to 16 bits rounds once).
llvm::Value* i64_to_f64_round_odd(EmitContext& ec, llvm::Value* x, bool is_signed);
// A float value (compute type of a float dtype) rounded to `dtype`'s precision and kept
// in the compute type: identity for f32/f64, f32 -> 16 bits -> f32 for f16/bf16.
llvm::Value* round_to(EmitContext& ec, ir::DType dtype, llvm::Value* v);
// A double rounded once to float dtype `dtype`, returned in its compute type.
llvm::Value* round_from_double(EmitContext& ec, ir::DType dtype, llvm::Value* d);

// ---- arithmetic on compute-type values, float or integer
llvm::Value* add(EmitContext& ec, llvm::Value* a, llvm::Value* b);
llvm::Value* mul(EmitContext& ec, llvm::Value* a, llvm::Value* b);
llvm::Value* mul_add(EmitContext& ec, llvm::Value* a, llvm::Value* b, llvm::Value* c);  // a*b+c
// max(a, b) as `b > a ? b : a` (signedness from dtype for integers); floats: NaN if
// either is NaN (the reference's max_nan).
llvm::Value* max(EmitContext& ec, ir::DType dtype, llvm::Value* a, llvm::Value* b);
llvm::Value* min_i64(EmitContext& ec, llvm::Value* a, llvm::Value* b);
llvm::Value* max_i64(EmitContext& ec, llvm::Value* a, llvm::Value* b);
// exp(x) for float/double scalars or vectors: floats are exp_f32; doubles Cody-Waite
// range reduction + a Taylor polynomial (inputs below -708 give 0, above 709 +inf).
llvm::Value* exp(EmitContext& ec, llvm::Value* x);

// ---- float math (emit_vmath.cpp): f32 scalars or <N x float> only, straight-line IR
// that vectorises; ulp bounds (measured by tests/jit/vmath_test.cpp) in that file:
// exp, log <= 1 ulp; tanh, erf, sigmoid <= 2; silu <= 3; gelu <= 6 (normal results).
llvm::Value* exp_f32(EmitContext& ec, llvm::Value* x);
// e^x for x <= 0 (softmax's exp(x - max)): exp_f32's reduction and polynomial without its
// overflow and subnormal handling; results below 2^-126 (x < -87.34) are 0, so within
// 2^-126 absolute there, 1 ulp above. NaN gives NaN.
llvm::Value* exp_nonpos_f32(EmitContext& ec, llvm::Value* x);
llvm::Value* log_f32(EmitContext& ec, llvm::Value* x);
llvm::Value* tanh_f32(EmitContext& ec, llvm::Value* x);
llvm::Value* erf_f32(EmitContext& ec, llvm::Value* x);
llvm::Value* sigmoid_f32(EmitContext& ec, llvm::Value* x);
llvm::Value* silu_f32(EmitContext& ec, llvm::Value* x);   // x * sigmoid(x)
llvm::Value* gelu_f32(EmitContext& ec, llvm::Value* x);   // x/2 * (1 + erf(x / sqrt 2))

// ---- vectors
llvm::Value* splat(EmitContext& ec, int lanes, llvm::Value* scalar);
llvm::Value* splat_like(EmitContext& ec, llvm::Value* scalar, int lanes);  // lanes 0: scalar
llvm::VectorType* vec_type(llvm::Type* elem, int lanes);
llvm::Value* load_vec(EmitContext& ec, llvm::Type* vt, llvm::Value* ptr);
void store_vec(EmitContext& ec, llvm::Value* v, llvm::Value* ptr);
// Folds the lanes of a vector (power-of-two lanes) with f as a tree of shuffles.
llvm::Value* horizontal(EmitContext& ec, llvm::Value* v,
                        const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& f);

// ---- control flow
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
// Items [lo, hi) of a row-major space whose rows hold `width` items, one row piece at a
// time, so that per-row work (outer coordinates) is done once a row: row(index) runs
// first, then item(row_start, col) for each column of the piece.
void for_rows(EmitContext& ec, llvm::Value* lo, llvm::Value* hi, int64_t width,
              const std::function<void(llvm::Value* row)>& row,
              const std::function<void(llvm::Value* row_start, llvm::Value* col)>& item);
// Coordinates of row-major index `linear` over `dims`, outermost first.
std::vector<llvm::Value*> unravel(EmitContext& ec, llvm::Value* linear,
                                  const std::vector<int64_t>& dims);
// base + sum_j idx[j] * strides[j] over the coordinates in idx (zero strides skipped).
llvm::Value* strided_offset(EmitContext& ec, llvm::Value* base, const std::vector<llvm::Value*>& idx,
                            const std::vector<int64_t>& strides);
void if_then(EmitContext& ec, llvm::Value* cond, const std::function<void()>& then_body);
void if_then_else(EmitContext& ec, llvm::Value* cond, const std::function<void()>& then_body,
                  const std::function<void()>& else_body);
// An alloca in the function's entry block (so it is allocated once per call).
llvm::Value* entry_alloca(EmitContext& ec, llvm::Type* t, int64_t count, const char* name);

// ---- tiles
struct Range {
  llvm::Value* lo;
  llvm::Value* hi;
};
// [lo, hi) of `total` items for the call's tiles when the space is split into
// group.num_tiles chunks of ceil(total / num_tiles).
Range tile_items(EmitContext& ec, int64_t total);
// The group's tiles mapped onto `units` natural work units: kernel tile t covers units
// [t * chunk, min(units, (t + 1) * chunk)), chunk = ceil(units / group.num_tiles), so any
// num_tiles >= 1 works. body(t, unit) runs for every unit of the requested tiles.
void for_units(EmitContext& ec, int64_t units,
               const std::function<void(llvm::Value* tile, llvm::Value* unit)>& body);
int64_t units_per_kernel_tile(EmitContext& ec, int64_t units);

// ---- results
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
                  const Epilogue& epilogue, llvm::Value* v, llvm::Value* linear,
                  llvm::Value* last_dim_index = nullptr);
// Applies the epilogue in place to target elements [lo, lo + n) that hold the anchor's
// results (target dtype == anchor dtype), `lanes` at a time with a scalar tail.
void epilogue_in_place(EmitContext& ec, const StoreTarget& target, const Epilogue& epilogue,
                       llvm::Value* lo, int64_t n, int lanes);
// True when `v` is an output operand of the group that the plan lets share bytes with
// another operand (KernelGroup::may_alias).
bool output_may_alias(EmitContext& ec, ir::ValueId v);
// Copies n (runtime) contiguous elements of type t from src to dst (vectorised).
void copy_run(EmitContext& ec, llvm::Type* t, llvm::Value* dst, llvm::Value* src, llvm::Value* n);

// ---- node attributes (the fallback when absent or of another kind)
double attr_float(const ir::Node& n, const char* name, double fallback);  // ints widen
int64_t attr_int(const ir::Node& n, const char* name, int64_t fallback);
std::vector<int64_t> attr_ints(const ir::Node& n, const char* name, std::vector<int64_t> fallback);

}  // namespace carve::jit::detail::util
