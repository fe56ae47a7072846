// The kit's (emit_util.h) storage conversions and float rounding: 16-bit float bit
// patterns with integer bit tricks, and round-to-odd steps so a value is rounded once.
#include <llvm/IR/Intrinsics.h>

#include "emit_util.h"

namespace carve::jit::detail::util {

using llvm::Type;
using llvm::Value;

namespace {

// f32 <-> 16-bit patterns (i16), round to nearest even.
Value* f32_to_f16_bits(EmitContext& ec, Value* f) {
  auto& b = ec.b;
  Type* i32 = like_shape(b.getInt32Ty(), f->getType());
  Type* i16 = like_shape(b.getInt16Ty(), f->getType());
  Type* f32 = f->getType();
  Value* x = b.CreateBitCast(f, i32);
  Value* sign = b.CreateAnd(x, intc(i32, 0x80000000u));
  Value* ax = b.CreateXor(x, sign);
  // NaN/Inf/overflow (|x| >= 65536.0): 0x7e00 for NaN, 0x7c00 (inf) otherwise.
  Value* big = b.CreateICmpUGE(ax, intc(i32, 0x47800000u));
  Value* is_nan = b.CreateICmpUGT(ax, intc(i32, 0x7f800000u));
  Value* big_bits = b.CreateSelect(is_nan, intc(i32, 0x7e00), intc(i32, 0x7c00));
  // Subnormal or zero (|x| < 2^-14): align with a magic add (RNE by the FPU).
  Value* small = b.CreateICmpULT(ax, intc(i32, 113u << 23));
  Value* magic = fpc(f32, 0.5);
  Value* sum = b.CreateFAdd(b.CreateBitCast(ax, f32), magic);
  Value* small_bits = b.CreateSub(b.CreateBitCast(sum, i32), intc(i32, 126u << 23));
  // Normal: rebias the exponent and round to nearest even on bit 13.
  Value* odd = b.CreateAnd(b.CreateLShr(ax, intc(i32, 13)), intc(i32, 1));
  Value* adj = b.CreateAdd(ax, intc(i32, static_cast<uint32_t>((15 - 127) << 23) + 0xfffu));
  Value* normal_bits = b.CreateLShr(b.CreateAdd(adj, odd), intc(i32, 13));
  Value* bits = b.CreateSelect(big, big_bits, b.CreateSelect(small, small_bits, normal_bits));
  bits = b.CreateOr(bits, b.CreateLShr(sign, intc(i32, 16)));
  return b.CreateTrunc(bits, i16);
}

Value* f16_bits_to_f32(EmitContext& ec, Value* h) {
  auto& b = ec.b;
  Type* i32 = like_shape(b.getInt32Ty(), h->getType());
  Type* f32 = like_shape(b.getFloatTy(), h->getType());
  Value* x = b.CreateZExt(h, i32);
  Value* sign = b.CreateShl(b.CreateAnd(x, intc(i32, 0x8000)), intc(i32, 16));
  Value* em = b.CreateAnd(x, intc(i32, 0x7fff));
  Value* shifted = b.CreateShl(em, intc(i32, 13));
  Value* special = b.CreateICmpUGE(em, intc(i32, 0x7c00));
  Value* normal = b.CreateAdd(shifted, b.CreateSelect(special, intc(i32, 0x70000000u), intc(i32, 0x38000000u)));
  Value* sub = b.CreateFMul(b.CreateUIToFP(em, f32), fpc(f32, 5.9604644775390625e-8));
  Value* is_sub = b.CreateICmpULT(em, intc(i32, 0x400));
  Value* mag = b.CreateSelect(is_sub, b.CreateBitCast(sub, i32), normal);
  return b.CreateBitCast(b.CreateOr(mag, sign), f32);
}

Value* f32_to_bf16_bits(EmitContext& ec, Value* f) {
  auto& b = ec.b;
  Type* i32 = like_shape(b.getInt32Ty(), f->getType());
  Type* i16 = like_shape(b.getInt16Ty(), f->getType());
  Value* x = b.CreateBitCast(f, i32);
  Value* is_nan = b.CreateICmpUGT(b.CreateAnd(x, intc(i32, 0x7fffffffu)), intc(i32, 0x7f800000u));
  Value* odd = b.CreateAnd(b.CreateLShr(x, intc(i32, 16)), intc(i32, 1));
  Value* rounded = b.CreateLShr(b.CreateAdd(b.CreateAdd(x, intc(i32, 0x7fff)), odd), intc(i32, 16));
  Value* nan_bits = b.CreateOr(b.CreateAnd(b.CreateLShr(x, intc(i32, 16)), intc(i32, 0x8000)), intc(i32, 0x7fc0));
  return b.CreateTrunc(b.CreateSelect(is_nan, nan_bits, rounded), i16);
}

Value* bf16_bits_to_f32(EmitContext& ec, Value* h) {
  auto& b = ec.b;
  Type* i32 = like_shape(b.getInt32Ty(), h->getType());
  Type* f32 = like_shape(b.getFloatTy(), h->getType());
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(h, i32), intc(i32, 16)), f32);
}

// double -> float rounding to odd (so a following RNE to 16 bits rounds exactly once).
Value* f64_to_f32_round_odd(EmitContext& ec, Value* d) {
  auto& b = ec.b;
  Type* f32 = like_shape(b.getFloatTy(), d->getType());
  Type* i32 = like_shape(b.getInt32Ty(), d->getType());
  Value* r = b.CreateFPTrunc(d, f32);
  Value* back = b.CreateFPExt(r, d->getType());
  Value* inexact = b.CreateFCmpONE(back, d);
  Value* away = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                                b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d));
  Value* bits = b.CreateBitCast(r, i32);
  bits = b.CreateSub(bits, b.CreateZExt(away, i32));
  bits = b.CreateOr(bits, b.CreateZExt(inexact, i32));
  return b.CreateBitCast(bits, f32);
}

}  // namespace

Value* from_storage(EmitContext& ec, ir::DType dtype, Value* stored) {
  switch (dtype) {
    case ir::DType::kF16: return f16_bits_to_f32(ec, stored);
    case ir::DType::kBf16: return bf16_bits_to_f32(ec, stored);
    case ir::DType::kBool: return ec.b.CreateICmpNE(stored, zero(stored->getType()));
    default: return stored;
  }
}

Value* to_storage(EmitContext& ec, ir::DType dtype, Value* v) {
  switch (dtype) {
    case ir::DType::kF16: return f32_to_f16_bits(ec, v);
    case ir::DType::kBf16: return f32_to_bf16_bits(ec, v);
    case ir::DType::kBool: return ec.b.CreateZExt(v, like_shape(ec.b.getInt8Ty(), v->getType()));
    default: return v;
  }
}

Value* i64_to_f64_round_odd(EmitContext& ec, Value* x, bool is_signed) {
  auto& b = ec.b;
  Type* i64 = x->getType();
  Type* f64 = like_shape(b.getDoubleTy(), i64);
  Value* zero = intc(i64, 0);
  Value* neg = is_signed ? b.CreateICmpSLT(x, zero) : nullptr;
  Value* mag = is_signed ? b.CreateSelect(neg, b.CreateSub(zero, x), x) : x;
  Value* lz = b.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, mag, llvm::ConstantInt::getFalse(b.getContext()));
  // keep 53 bits from the top set bit: shift = max(0, 11 - lz)
  Value* shift = b.CreateSub(intc(i64, 11), lz);
  shift = b.CreateSelect(b.CreateICmpSGT(shift, zero), shift, zero);
  Value* unit = b.CreateShl(intc(i64, 1), shift);
  Value* mask = b.CreateSub(unit, intc(i64, 1));
  Value* sticky = b.CreateICmpNE(b.CreateAnd(mag, mask), zero);
  Value* kept = b.CreateAnd(mag, b.CreateNot(mask));
  kept = b.CreateOr(kept, b.CreateSelect(sticky, unit, zero));
  Value* d = b.CreateUIToFP(kept, f64);
  return is_signed ? b.CreateSelect(neg, b.CreateFNeg(d), d) : d;
}

Value* round_to(EmitContext& ec, ir::DType dtype, Value* v) {
  if (dtype == ir::DType::kF16) return f16_bits_to_f32(ec, f32_to_f16_bits(ec, v));
  if (dtype == ir::DType::kBf16) return bf16_bits_to_f32(ec, f32_to_bf16_bits(ec, v));
  return v;
}

Value* round_from_double(EmitContext& ec, ir::DType dtype, Value* d) {
  auto& b = ec.b;
  switch (dtype) {
    case ir::DType::kF64: return d;
    case ir::DType::kF32: return b.CreateFPTrunc(d, like_shape(b.getFloatTy(), d->getType()));
    case ir::DType::kF16:
    case ir::DType::kBf16: return round_to(ec, dtype, f64_to_f32_round_odd(ec, d));
    default: return d;
  }
}

}  // namespace carve::jit::detail::util
