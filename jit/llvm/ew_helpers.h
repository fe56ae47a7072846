// Private helpers of the elementwise/layout emitters and the dispatcher (defined in
// emit_dispatch.cpp). Element values live in "elementwise compute types":
//   f32, f16, bf16 -> float; f64 -> double; i8/u8 -> i8; i32 -> i32; i64 -> i64; bool -> i1.
// f16/bf16 are stored as i16 bit patterns and converted here with integer bit tricks
// (round to nearest even, canonical quiet NaN), so no libcalls or F16C are needed.
// Every function accepts scalars or fixed vectors unless it says otherwise.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "emit.h"

namespace carve::jit::detail::ew {

llvm::Type* compute_type(llvm::LLVMContext& ctx, ir::DType dtype);
llvm::Type* storage_type(llvm::LLVMContext& ctx, ir::DType dtype);
// `elem` with the shape (scalar or <N x >) of `like`.
llvm::Type* like_shape(llvm::Type* elem, llvm::Type* like);
bool is_signed_int(ir::DType dtype);

llvm::Value* i64c(llvm::IRBuilder<>& b, int64_t v);

// Scalar element `index` (i64) of a `dtype` buffer at `base`, as compute type / stored.
llvm::Value* load_value(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* base, llvm::Value* index);
void store_value(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* base, llvm::Value* index,
                 llvm::Value* v);
// Storage bits <-> compute type.
llvm::Value* from_storage(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* stored);
llvm::Value* to_storage(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* v);

// f32 <-> 16-bit patterns (i16), round to nearest even.
llvm::Value* f32_to_f16_bits(llvm::IRBuilder<>& b, llvm::Value* f);
llvm::Value* f16_bits_to_f32(llvm::IRBuilder<>& b, llvm::Value* h);
llvm::Value* f32_to_bf16_bits(llvm::IRBuilder<>& b, llvm::Value* f);
llvm::Value* bf16_bits_to_f32(llvm::IRBuilder<>& b, llvm::Value* h);
// double -> float rounding to odd (so a following RNE to 16 bits rounds exactly once).
llvm::Value* f64_to_f32_round_odd(llvm::IRBuilder<>& b, llvm::Value* d);
// int64 -> double rounding to odd.
llvm::Value* i64_to_f64_round_odd(llvm::IRBuilder<>& b, llvm::Value* x, bool is_signed);
// A float value (compute type of a float dtype) rounded to `dtype`'s precision and kept
// in the compute type: identity for f32/f64, f32 -> 16 bits -> f32 for f16/bf16.
llvm::Value* round_to(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* v);
// A double rounded once to float dtype `dtype`, returned in its compute type.
llvm::Value* round_from_double(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* d);

// for (iv = begin; iv < end; ++iv) body(iv). Signed compare; the body may add blocks.
void emit_for(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end,
              const std::function<void(llvm::Value*)>& body, const char* name = "i");
// iv = begin; while (iv < end) iv = body(iv). The body returns the next iv (> iv).
void emit_while(llvm::IRBuilder<>& b, llvm::Value* begin, llvm::Value* end,
                const std::function<llvm::Value*(llvm::Value*)>& body, const char* name = "r");
void emit_if(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& then_body);

// [lo, hi) of `total` items for the call's [tile_begin, tile_end) when the space is split
// into group.num_tiles chunks of ceil(total / num_tiles) (tile numbers clamped).
struct Range {
  llvm::Value* lo;
  llvm::Value* hi;
};
Range tile_items(EmitContext& ec, int64_t total);

// Broadcast layout of operands against an output shape: output dims of extent 1 are
// dropped and neighbours that every operand broadcasts (or not) alike are merged.
struct BroadcastLayout {
  std::vector<int64_t> dims;                  // collapsed output dims (at least one)
  std::vector<std::vector<int64_t>> strides;  // per operand, per collapsed dim (0 = broadcast)
  int64_t total = 0;                          // output elements
};
BroadcastLayout broadcast_layout(const ir::Shape& out, const std::vector<ir::Shape>& operands);
// Element offset of operand k for output linear index `linear`.
llvm::Value* broadcast_offset(llvm::IRBuilder<>& b, const BroadcastLayout& layout, size_t k,
                              llvm::Value* linear);

// Applies elementwise `node` to compute-type arguments (in input order); in_dtype is the
// dtype of input 0 (input 1 for where); the result is rounded to the output dtype.
Result<llvm::Value*> apply_elementwise(llvm::IRBuilder<>& b, llvm::Module& m, const ir::Graph& g,
                                       const ir::Node& node, const std::vector<llvm::Value*>& args);

}  // namespace carve::jit::detail::ew
