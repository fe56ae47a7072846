// Elementwise chains: every unary/binary/comparison/where/cast op on every dtype the IR
// allows, numpy broadcasting, fused chains kept in registers, and the fused epilogue of
// the compute emitters (make_epilogue).
//
// Semantics follow carve/reference/reference.h exactly where it is cheap to:
//  - f32/f64 + - * / and sqrt, abs, neg, relu, clip, max, min are computed in the dtype;
//    f16/bf16 compute them in float and round to the dtype after every op (float has
//    enough precision that this equals rounding the exact result once).
//  - exp, log, tanh, erf, sigmoid, silu and gelu on f32/f16/bf16 are computed in float by
//    the vectorisable float math (emit_vmath.cpp: polynomial approximations with stated
//    ulp bounds, 1 to 4 ulp), then rounded to f16/bf16 (so within one 16-bit ulp of the
//    reference); on f64, and rsqrt, pow and hard_sigmoid on every float dtype, they are
//    computed in double (libm through LLVM intrinsics / calls resolved by the JIT) and
//    rounded once, to f16/bf16 via round-to-odd float, so there is no double rounding.
//  - sin cos tan asin acos atan sinh cosh asinh acosh atanh call libm in double (scalar
//    calls, lane by lane) and round once: the reference's own functions, so identical.
//  - floor, ceil, round (half to even), trunc and fmod (frem) are exact in the compute
//    type; the rounding ops are identities on integers.
//  - integers wrap (no nsw/nuw), x / 0 = 0, INT_MIN / -1 = INT_MIN, x fmod 0 = 0, pow
//    with a negative exponent is the truncated real result; u8 is unsigned.
//  - max/min propagate NaN; relu(x) = x < 0 ? 0 : x; clip keeps NaN and on integers
//    clamps to [ceil(min), floor(max)] saturated to the dtype.
//  - cast: float -> int truncates and saturates (NaN -> 0); int -> int keeps the low bits;
//    -> bool is x != 0; -> f16/bf16 rounds once from the source value.
// Fused values are kept in registers in compute types, rounded to their dtype per node,
// so a fused chain gives bit-identical results to the unfused nodes.
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "carve/ir/half.h"
#include "emit.h"
#include "emit_util.h"

namespace carve::jit::detail {

using llvm::Type;
using llvm::Value;
using ir::DType;
using ir::OpKind;
using namespace util;

namespace {

Status unsupported(const ir::Graph& g, const ir::Node& node, const std::string& why) {
  return Status(ErrorCode::kUnsupported, fmt::format("{}: {}", ir::describe_node(g, node.id), why));
}

// double-precision math helpers (scalar or vector doubles)
Value* libm_call(EmitContext& ec, const char* name, Value* x) {
  auto& b = ec.b;
  Type* dt = b.getDoubleTy();
  auto callee = ec.module.getOrInsertFunction(name, llvm::FunctionType::get(dt, {dt}, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotThrow();
    f->setWillReturn();
    f->setDoesNotAccessMemory();
  }
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(x->getType())) {
    // lane by lane (the epilogue may pass vectors)
    unsigned n = vt->getElementCount().getFixedValue();
    Value* out = llvm::PoisonValue::get(vt);
    for (unsigned i = 0; i < n; ++i) {
      Value* lane = b.CreateCall(callee, {b.CreateExtractElement(x, i)});
      out = b.CreateInsertElement(out, lane, i);
    }
    return out;
  }
  return b.CreateCall(callee, {x});
}

Value* exp_d(llvm::IRBuilder<>& b, Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x); }

// NaN-propagating max/min on floats; otherwise std::max/std::min (x when equal, so
// max(-0, +0) = -0 and max(+0, -0) = +0, like the reference).
Value* fmax_nan(llvm::IRBuilder<>& b, Value* x, Value* y, bool is_max) {
  Value* pick_y = is_max ? b.CreateFCmpOLT(x, y) : b.CreateFCmpOLT(y, x);
  pick_y = b.CreateOr(pick_y, b.CreateFCmpUNO(y, y));
  return b.CreateSelect(pick_y, y, x);
}

// Integer division or remainder with defined results: x / 0 = 0, MIN / -1 = MIN (wraps);
// x rem 0 = 0, MIN rem -1 = 0 (no trap).
Value* int_div(llvm::IRBuilder<>& b, Value* x, Value* y, bool is_signed, bool rem) {
  Type* t = x->getType();
  Value* zero = intc(t, 0);
  Value* is_zero = b.CreateICmpEQ(y, zero);
  if (!is_signed) {
    Value* safe = b.CreateSelect(is_zero, intc(t, 1), y);
    return b.CreateSelect(is_zero, zero, rem ? b.CreateURem(x, safe) : b.CreateUDiv(x, safe));
  }
  Value* is_m1 = b.CreateICmpEQ(y, llvm::Constant::getAllOnesValue(t));
  Value* trivial = b.CreateOr(is_zero, is_m1);
  Value* safe = b.CreateSelect(trivial, intc(t, 1), y);
  if (rem) return b.CreateSelect(trivial, zero, b.CreateSRem(x, safe));
  Value* q = b.CreateSDiv(x, safe);
  return b.CreateSelect(is_zero, zero, b.CreateSelect(is_m1, b.CreateSub(zero, x), q));
}

// Wrapping integer power by squaring over every exponent bit (straight-line code).
Value* int_pow(llvm::IRBuilder<>& b, Value* x, Value* e, bool is_signed) {
  Type* t = x->getType();
  unsigned bits = t->getScalarSizeInBits();
  Value* one = intc(t, 1);
  Value* zero = intc(t, 0);
  Value* result = one;
  Value* base = x;
  for (unsigned i = 0; i < bits; ++i) {
    Value* bit = b.CreateICmpNE(b.CreateAnd(e, intc(t, uint64_t{1} << i)), zero);
    result = b.CreateSelect(bit, b.CreateMul(result, base), result);
    if (i + 1 < bits) base = b.CreateMul(base, base);
  }
  if (!is_signed) return result;
  // negative exponent: 1 for base 1, +-1 for base -1 (by parity), else 0
  Value* neg_e = b.CreateICmpSLT(e, zero);
  Value* odd = b.CreateICmpNE(b.CreateAnd(e, one), zero);
  Value* minus_one = llvm::Constant::getAllOnesValue(t);
  Value* neg_result = b.CreateSelect(
      b.CreateICmpEQ(x, one), one,
      b.CreateSelect(b.CreateICmpEQ(x, minus_one), b.CreateSelect(odd, minus_one, one), zero));
  return b.CreateSelect(neg_e, neg_result, result);
}

// Integer clip bounds: [ceil(min), floor(max)] saturated to the dtype, as its bits.
std::pair<uint64_t, uint64_t> int_bounds(DType d, double lo, double hi) {
  return {saturated_int_bits(d, std::ceil(lo)), saturated_int_bits(d, std::floor(hi))};
}

// A double constant rounded to float dtype `d`, as a compute-type constant.
Value* float_const(Type* t, DType d, double v) {
  switch (d) {
    case DType::kF16: return fpc(t, ir::f16_to_float(ir::double_to_f16(v)));
    case DType::kBf16: return fpc(t, ir::bf16_to_float(ir::double_to_bf16(v)));
    case DType::kF32: return fpc(t, static_cast<double>(static_cast<float>(v)));
    default: return fpc(t, v);
  }
}

Value* cast_value(EmitContext& ec, DType from, DType to, Value* v) {
  auto& b = ec.b;
  Type* dst = like_shape(compute_type(ec, to), v->getType());
  if (from == to) return v;
  if (to == DType::kBool) {
    if (is_fp(from)) return b.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
    return b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (from == DType::kBool) {
    if (is_fp(to)) return b.CreateUIToFP(v, dst);
    return b.CreateZExt(v, dst);
  }
  if (is_fp(from) && is_fp(to)) {
    if (to == DType::kF64) return b.CreateFPExt(v, dst);  // from float (f32/f16/bf16)
    if (from == DType::kF64) return round_from_double(ec, to, v);
    // float-valued source (f32, f16, bf16) to f32/f16/bf16
    return to == DType::kF32 ? v : round_to(ec, to, v);
  }
  if (is_fp(from)) {  // -> integer: truncate, saturate, NaN -> 0
    auto id = ir::is_unsigned_int(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
    return b.CreateIntrinsic(id, {dst, v->getType()}, {v});
  }
  bool sgn = is_signed_int(from);
  if (is_fp(to)) {
    if (to == DType::kF32 || to == DType::kF64) return sgn ? b.CreateSIToFP(v, dst) : b.CreateUIToFP(v, dst);
    // f16/bf16: round once from the integer value
    Type* dt = like_shape(b.getDoubleTy(), v->getType());
    Value* d = nullptr;
    if (from == DType::kI64 || from == DType::kU64) {
      d = i64_to_f64_round_odd(ec, v, sgn);
    } else {
      d = sgn ? b.CreateSIToFP(v, dt) : b.CreateUIToFP(v, dt);  // exact
    }
    return round_from_double(ec, to, d);
  }
  // int -> int: wrap (keep the low bits), sign- or zero-extend by the source
  unsigned fb = v->getType()->getScalarSizeInBits(), tb = dst->getScalarSizeInBits();
  if (fb == tb) return v;
  if (fb > tb) return b.CreateTrunc(v, dst);
  return sgn ? b.CreateSExt(v, dst) : b.CreateZExt(v, dst);
}

// The float-math (emit_vmath.cpp) form of a transcendental op on a float value; null for
// ops without one (they stay on the double path).
Value* float_math(EmitContext& ec, OpKind op, Value* x) {
  switch (op) {
    case OpKind::kExp: return exp_f32(ec, x);
    case OpKind::kLog: return log_f32(ec, x);
    case OpKind::kTanh: return tanh_f32(ec, x);
    case OpKind::kErf: return erf_f32(ec, x);
    case OpKind::kSigmoid: return sigmoid_f32(ec, x);
    case OpKind::kSilu: return silu_f32(ec, x);
    case OpKind::kGelu: return gelu_f32(ec, x);
    default: return nullptr;
  }
}

// Applies elementwise `node` to compute-type arguments (in input order); the result is
// rounded to the output dtype.
Result<Value*> apply_elementwise(EmitContext& ec, const ir::Node& node, const std::vector<Value*>& args) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  if (args.size() != node.inputs.size() || node.outputs.size() != 1) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("{}: wrong operand count", ir::describe_node(g, node.id)));
  }
  const OpKind op = node.op;
  const DType in = g.value(node.inputs[op == OpKind::kWhere ? 1 : 0]).type.dtype;
  const DType out = g.value(node.outputs[0]).type.dtype;
  Value* x = args[0];
  Type* t = x->getType();
  const bool fp = is_fp(in);
  const bool sgn = is_signed_int(in);

  // double-precision evaluation for the transcendental ops (floats only)
  auto to_d = [&](Value* v) {
    Type* dt = like_shape(b.getDoubleTy(), v->getType());
    return v->getType()->getScalarType()->isDoubleTy() ? v : b.CreateFPExt(v, dt);
  };
  auto from_d = [&](Value* d) { return round_from_double(ec, out, d); };

  const bool rounding = op == OpKind::kFloor || op == OpKind::kCeil || op == OpKind::kRound || op == OpKind::kTrunc;
  if (ir::is_unary_elementwise(op) && !fp && op != OpKind::kNeg && op != OpKind::kAbs &&
      op != OpKind::kRelu && op != OpKind::kClip && !rounding) {
    return unsupported(g, node, fmt::format("{} needs a float input, got {}", ir::op_name(op), ir::dtype_name(in)));
  }

  switch (op) {
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kRound:
    case OpKind::kTrunc: {
      if (!fp) return x;  // integers are already integral
      // exact in the compute type, and an integral value of a dtype is representable in it
      const llvm::Intrinsic::ID id = op == OpKind::kFloor  ? llvm::Intrinsic::floor
                                     : op == OpKind::kCeil ? llvm::Intrinsic::ceil
                                     : op == OpKind::kRound ? llvm::Intrinsic::roundeven
                                                            : llvm::Intrinsic::trunc;
      return round_to(ec, out, b.CreateUnaryIntrinsic(id, x));
    }
    case OpKind::kNeg:
      return fp ? round_to(ec, out, b.CreateFNeg(x)) : b.CreateSub(intc(t, 0), x);
    case OpKind::kAbs:
      if (fp) return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      if (!sgn) return x;
      return b.CreateSelect(b.CreateICmpSLT(x, intc(t, 0)), b.CreateSub(intc(t, 0), x), x);
    case OpKind::kRelu: {
      Value* zero = llvm::Constant::getNullValue(t);
      if (fp) return b.CreateSelect(b.CreateFCmpOLT(x, zero), zero, x);
      if (!sgn) return x;
      return b.CreateSelect(b.CreateICmpSLT(x, zero), zero, x);
    }
    case OpKind::kClip: {
      constexpr double kInf = std::numeric_limits<double>::infinity();
      double lo = attr_float(node, "min", -kInf), hi = attr_float(node, "max", kInf);
      if (fp) {
        Value* l = float_const(t, in, lo);
        Value* h = float_const(t, in, hi);
        Value* r = b.CreateSelect(b.CreateFCmpOLT(x, l), l, x);
        return b.CreateSelect(b.CreateFCmpOGT(r, h), h, r);
      }
      auto [li, hi_i] = int_bounds(in, lo, hi);
      Value* l = intc(t, li);
      Value* h = intc(t, hi_i);
      Value* below = sgn ? b.CreateICmpSLT(x, l) : b.CreateICmpULT(x, l);
      Value* r = b.CreateSelect(below, l, x);
      Value* above = sgn ? b.CreateICmpSGT(r, h) : b.CreateICmpUGT(r, h);
      return b.CreateSelect(above, h, r);
    }
    case OpKind::kSqrt:
      // correctly rounded in float, and float -> f16/bf16 rounding is innocuous for sqrt
      return round_to(ec, out, b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
    default:
      break;
  }
  // f32/f16/bf16 (compute type float): the vectorisable float math, rounded to the dtype.
  if (fp && !t->getScalarType()->isDoubleTy()) {
    if (Value* v = float_math(ec, op, x)) return round_to(ec, out, v);
  }

  if (op >= OpKind::kSin && op <= OpKind::kAtanh) {
    // coverage, not speed: libm in double (the reference's functions, named like the
    // ops), rounded once
    return from_d(libm_call(ec, std::string(ir::op_name(op)).c_str(), to_d(x)));
  }
  switch (op) {
    case OpKind::kExp: return from_d(exp_d(b, to_d(x)));
    case OpKind::kLog: return from_d(b.CreateUnaryIntrinsic(llvm::Intrinsic::log, to_d(x)));
    case OpKind::kTanh: return from_d(b.CreateUnaryIntrinsic(llvm::Intrinsic::tanh, to_d(x)));
    case OpKind::kErf: return from_d(libm_call(ec, "erf", to_d(x)));
    case OpKind::kRsqrt: {
      Value* d = to_d(x);
      return from_d(b.CreateFDiv(fpc(d->getType(), 1.0), b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, d)));
    }
    case OpKind::kSigmoid:
    case OpKind::kSilu: {
      Value* d = to_d(x);
      Type* dt = d->getType();
      Value* s = b.CreateFDiv(fpc(dt, 1.0), b.CreateFAdd(fpc(dt, 1.0), exp_d(b, b.CreateFNeg(d))));
      return from_d(op == OpKind::kSilu ? b.CreateFMul(d, s) : s);
    }
    case OpKind::kGelu: {
      Value* d = to_d(x);
      Type* dt = d->getType();
      Value* e = libm_call(ec, "erf", b.CreateFDiv(d, fpc(dt, std::sqrt(2.0))));
      return from_d(b.CreateFMul(b.CreateFMul(fpc(dt, 0.5), d), b.CreateFAdd(fpc(dt, 1.0), e)));
    }
    case OpKind::kHardSigmoid: {
      Value* d = to_d(x);
      Type* dt = d->getType();
      Value* v = b.CreateFAdd(b.CreateFMul(fpc(dt, attr_float(node, "alpha", 0.2)), d), fpc(dt, attr_float(node, "beta", 0.5)));
      // std::max(0, std::min(1, v)), NaN kept
      Value* r = b.CreateSelect(b.CreateFCmpOLT(v, fpc(dt, 1.0)), v, fpc(dt, 1.0));
      r = b.CreateSelect(b.CreateFCmpOLT(fpc(dt, 0.0), r), r, fpc(dt, 0.0));
      return from_d(b.CreateSelect(b.CreateFCmpUNO(v, v), v, r));
    }
    default:
      break;
  }

  if (op == OpKind::kCast) return cast_value(ec, in, out, x);
  if (op == OpKind::kWhere) return b.CreateSelect(args[0], args[1], args[2]);

  Value* y = args[1];
  if (ir::is_comparison(op)) {
    if (fp) {
      switch (op) {
        case OpKind::kEqual: return b.CreateFCmpOEQ(x, y);
        case OpKind::kNotEqual: return b.CreateFCmpUNE(x, y);
        case OpKind::kLess: return b.CreateFCmpOLT(x, y);
        case OpKind::kLessEqual: return b.CreateFCmpOLE(x, y);
        case OpKind::kGreater: return b.CreateFCmpOGT(x, y);
        default: return b.CreateFCmpOGE(x, y);
      }
    }
    switch (op) {
      case OpKind::kEqual: return b.CreateICmpEQ(x, y);
      case OpKind::kNotEqual: return b.CreateICmpNE(x, y);
      case OpKind::kLess: return sgn ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
      case OpKind::kLessEqual: return sgn ? b.CreateICmpSLE(x, y) : b.CreateICmpULE(x, y);
      case OpKind::kGreater: return sgn ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y);
      default: return sgn ? b.CreateICmpSGE(x, y) : b.CreateICmpUGE(x, y);
    }
  }
  if (in == DType::kBool) return unsupported(g, node, "arithmetic on bool");
  if (fp) {
    switch (op) {
      case OpKind::kAdd: return round_to(ec, out, b.CreateFAdd(x, y));
      case OpKind::kSub: return round_to(ec, out, b.CreateFSub(x, y));
      case OpKind::kMul: return round_to(ec, out, b.CreateFMul(x, y));
      case OpKind::kDiv: return round_to(ec, out, b.CreateFDiv(x, y));
      case OpKind::kMax: return fmax_nan(b, x, y, true);
      case OpKind::kMin: return fmax_nan(b, x, y, false);
      case OpKind::kPow: return from_d(b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, to_d(x), to_d(y)));
      // frem is C fmod: exact, so f16/bf16 (computed in float) need no rounding either
      case OpKind::kFmod: return b.CreateFRem(x, y);
      default: break;
    }
  } else {
    switch (op) {
      case OpKind::kAdd: return b.CreateAdd(x, y);
      case OpKind::kSub: return b.CreateSub(x, y);
      case OpKind::kMul: return b.CreateMul(x, y);
      case OpKind::kDiv: return int_div(b, x, y, sgn, false);
      case OpKind::kFmod: return int_div(b, x, y, sgn, true);
      case OpKind::kPow: return int_pow(b, x, y, sgn);
      case OpKind::kMax: return b.CreateSelect(sgn ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y), x, y);
      case OpKind::kMin: return b.CreateSelect(sgn ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y), x, y);
      case OpKind::kBitShiftLeft:
      case OpKind::kBitShiftRight: {
        // shl/lshr by the width or more is poison in LLVM (select drops it): they give 0.
        Value* width = intc(t, t->getScalarSizeInBits());
        Value* shifted = op == OpKind::kBitShiftLeft ? b.CreateShl(x, y) : b.CreateLShr(x, y);
        return b.CreateSelect(b.CreateICmpUGE(y, width), intc(t, 0), shifted);
      }
      default: break;
    }
  }
  return unsupported(g, node, "not an elementwise op the JIT knows");
}

// Broadcast layout of operands against an output shape: output dims of extent 1 are
// dropped and neighbours that every operand broadcasts (or not) alike are merged.
struct BroadcastLayout {
  std::vector<int64_t> dims;                  // collapsed output dims (at least one)
  std::vector<std::vector<int64_t>> strides;  // per operand, per collapsed dim (0 = broadcast)
  int64_t total = 0;                          // output elements
};

BroadcastLayout broadcast_layout(const ir::Shape& out, const std::vector<ir::Shape>& operands) {
  BroadcastLayout layout;
  int r = out.rank();
  layout.total = 1;
  for (int j = 0; j < r; ++j) layout.total *= out[j];
  // Per kept output dim: its extent and which operands broadcast along it.
  std::vector<int64_t> dims;
  std::vector<std::vector<bool>> bcast;  // [dim][operand]
  for (int j = 0; j < r; ++j) {
    if (out[j] == 1) continue;
    std::vector<bool> flags;
    for (const ir::Shape& s : operands) {
      int k = j - (r - s.rank());
      int64_t d = k >= 0 ? s[k] : 1;
      flags.push_back(d == 1);
    }
    if (!dims.empty() && bcast.back() == flags) {
      dims.back() *= out[j];
    } else {
      dims.push_back(out[j]);
      bcast.push_back(std::move(flags));
    }
  }
  if (dims.empty()) {
    dims.push_back(layout.total);
    bcast.push_back(std::vector<bool>(operands.size(), false));
  }
  layout.dims = dims;
  layout.strides.assign(operands.size(), std::vector<int64_t>(dims.size(), 0));
  for (size_t k = 0; k < operands.size(); ++k) {
    int64_t stride = 1;
    for (size_t j = dims.size(); j-- > 0;) {
      if (bcast[j][k]) continue;
      layout.strides[k][j] = stride;
      stride *= dims[j];
    }
  }
  return layout;
}

// Whether operand k is laid out like the output (same shape): its offset is the index.
bool broadcast_offset_is_identity(const BroadcastLayout& layout, size_t k) {
  const auto& st = layout.strides[k];
  int64_t expect = 1;
  for (size_t j = layout.dims.size(); j-- > 0;) {
    if (st[j] != expect) return false;
    expect *= layout.dims[j];
  }
  return true;
}

// For an operand that repeats one contiguous block along the leading dims (a bias [n]
// under [m, n]: strides 0 over a prefix of the collapsed dims, contiguous over the rest),
// the block's elements; its offset for output index i is i % block. 0 otherwise.
int64_t broadcast_row_block(const BroadcastLayout& layout, size_t k) {
  const auto& st = layout.strides[k];
  int64_t block = 1;
  size_t j = layout.dims.size();
  for (; j-- > 0;) {
    if (st[j] != block) break;
    block *= layout.dims[j];
  }
  for (size_t d = 0; d <= j && j < layout.dims.size(); ++d) {
    if (st[d] != 0) return 0;
  }
  return block > 1 && block < layout.total ? block : 0;
}

// Element offset of operand k for output linear index `linear`.
Value* broadcast_offset(EmitContext& ec, const BroadcastLayout& layout, size_t k, Value* linear) {
  if (broadcast_offset_is_identity(layout, k)) return linear;
  return strided_offset(ec, i64c(ec, 0), unravel(ec, linear, layout.dims), layout.strides[k]);
}

// Evaluates the chain `nodes` for one element. `known` holds values already in registers
// (compute types); `load(k)` loads external operand k (an index into `externals`).
Result<Value*> eval_chain(EmitContext& ec, const std::vector<const ir::Node*>& nodes,
                          std::map<ir::ValueId, Value*>& known,
                          const std::vector<ir::ValueId>& externals,
                          const std::function<Value*(size_t)>& load) {
  Value* last = nullptr;
  for (const ir::Node* n : nodes) {
    std::vector<Value*> args;
    for (ir::ValueId v : n->inputs) {
      auto it = known.find(v);
      if (it == known.end()) {
        auto pos = std::find(externals.begin(), externals.end(), v);
        if (pos == externals.end()) {
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("group '{}': {} reads {}, which is not an operand", ec.group.name,
                                    ir::describe_node(ec.graph, n->id), ir::describe_value(ec.graph, v)));
        }
        Value* loaded = load(static_cast<size_t>(pos - externals.begin()));
        it = known.emplace(v, loaded).first;
      }
      args.push_back(it->second);
    }
    CARVE_ASSIGN_OR_RETURN(last, apply_elementwise(ec, *n, args));
    known[n->outputs[0]] = last;
  }
  return last;
}

Status check_operands(EmitContext& ec) {
  for (size_t i = 0; i < ec.group.operands.size(); ++i) {
    const KernelOperand& op = ec.group.operands[i];
    if (op.role == OperandRole::kScratch) continue;
    if (!ec.graph.has_value(op.value)) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("group '{}': operand #{} is not a value of the graph", ec.group.name, i));
    }
  }
  return Status();
}

}  // namespace

Status emit_elementwise_group(EmitContext& ec) {
  const ir::Graph& g = ec.graph;
  llvm::IRBuilder<>& b = ec.b;
  CARVE_RETURN_IF_ERROR(check_operands(ec));
  std::vector<const ir::Node*> nodes;
  for (ir::NodeId id : ec.group.nodes) {
    const ir::Node& n = g.node(id);
    if (!ir::is_elementwise(n.op) || n.outputs.size() != 1) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("group '{}': {} is not elementwise", ec.group.name, ir::describe_node(g, id)));
    }
    nodes.push_back(&n);
  }
  const ir::Value& result = g.value(nodes.back()->outputs[0]);
  const ir::Shape& out_shape = result.type.shape;

  // External inputs and stored outputs.
  std::vector<ir::ValueId> externals;
  std::vector<ir::Shape> shapes;
  std::vector<std::pair<ir::ValueId, Value*>> stores;
  for (size_t i = 0; i < ec.group.operands.size(); ++i) {
    const KernelOperand& op = ec.group.operands[i];
    if (op.role == OperandRole::kInput) {
      externals.push_back(op.value);
      shapes.push_back(g.value(op.value).type.shape);
    } else if (op.role == OperandRole::kOutput) {
      if (g.value(op.value).type.shape != out_shape) {
        return Status(ErrorCode::kUnsupported,
                      fmt::format("group '{}': stored value {} does not have the chain's output shape {}",
                                  ec.group.name, ir::describe_value(g, op.value), out_shape.to_string()));
      }
      stores.emplace_back(op.value, ec.operand_ptrs[i]);
    }
  }
  if (stores.empty()) return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}' stores nothing", ec.group.name));
  std::vector<Value*> in_ptrs;
  for (ir::ValueId v : externals) in_ptrs.push_back(operand_ptr(ec, v));

  BroadcastLayout layout = broadcast_layout(out_shape, shapes);
  Range range = tile_items(ec, layout.total);
  const size_t m = layout.dims.size();

  // One element: out index `o`, operand k at offset base[k] + c * inner_stride[k].
  auto body = [&](Value* o, const std::vector<Value*>& base, Value* c) -> Status {
    std::map<ir::ValueId, Value*> known;
    auto load = [&](size_t k) {
      int64_t s = layout.strides[k].back();
      Value* idx = s == 0 ? base[k] : (base[k] ? b.CreateAdd(base[k], c) : c);
      return load_elem(ec, g.value(externals[k]).type.dtype, in_ptrs[k], idx);
    };
    CARVE_RETURN_IF_ERROR(eval_chain(ec, nodes, known, externals, load).status());
    for (auto& [v, ptr] : stores) store_elem(ec, g.value(v).type.dtype, ptr, o, known.at(v));
    return Status();
  };

  Status status;
  if (m == 1) {
    // Contiguous fast path (every operand same-shape or a scalar): one flat loop.
    std::vector<Value*> base(externals.size(), nullptr);
    for (size_t k = 0; k < externals.size(); ++k) {
      if (layout.strides[k].back() == 0) base[k] = i64c(ec, 0);
    }
    for_range(ec, range.lo, range.hi, 1, [&](Value* i) {
      if (status.ok()) status = body(i, base, i);
    });
    return status;
  }
  // Rows of the innermost collapsed dim; outer coordinates resolved once per row.
  const std::vector<int64_t> outer(layout.dims.begin(), layout.dims.end() - 1);
  std::vector<Value*> base(externals.size());
  for_rows(ec, range.lo, range.hi, layout.dims.back(), [&](Value* row) {
    std::vector<Value*> idx = unravel(ec, row, outer);
    for (size_t k = 0; k < externals.size(); ++k) base[k] = strided_offset(ec, i64c(ec, 0), idx, layout.strides[k]);
  }, [&](Value* row_start, Value* c) {
    if (status.ok()) status = body(b.CreateAdd(row_start, c), base, c);
  });
  return status;
}

Epilogue make_epilogue(EmitContext& ec) { return make_chain_epilogue(ec, ec.group.nodes); }

Epilogue make_chain_epilogue(EmitContext& ec, std::span<const ir::NodeId> chain) {
  if (chain.size() < 2) return Epilogue();
  const ir::Graph& g = ec.graph;
  const ir::Node& anchor = g.node(chain.front());
  std::vector<const ir::Node*> nodes;
  for (size_t i = 1; i < chain.size(); ++i) nodes.push_back(&g.node(chain[i]));
  ir::ValueId anchor_out = anchor.outputs.empty() ? ir::kNoValue : anchor.outputs[0];
  const ir::Shape out_shape = g.value(nodes.back()->outputs[0]).type.shape;
  // External operands the epilogue reads (not the anchor's inputs unless the chain reads them).
  std::vector<ir::ValueId> externals;
  std::vector<ir::Shape> shapes;
  for (const ir::Node* n : nodes) {
    for (ir::ValueId v : n->inputs) {
      bool produced = v == anchor_out;
      for (const ir::Node* p : nodes) produced = produced || p->outputs[0] == v;
      if (!produced && std::find(externals.begin(), externals.end(), v) == externals.end()) {
        externals.push_back(v);
        shapes.push_back(g.value(v).type.shape);
      }
    }
  }
  BroadcastLayout layout = broadcast_layout(out_shape, shapes);
  DType final_dtype = g.value(nodes.back()->outputs[0]).type.dtype;

  // Per external operand: contiguous with the output (a residual), one element for all
  // (a scalar), or neither (gathered lane by lane).
  // kRow: a block repeated along the leading dims (a bias): a vector load at linear % block
  // when the lanes stay inside one block, gathered otherwise.
  enum class Access { kContiguous, kScalar, kRow, kGather };
  std::vector<Access> access;
  std::vector<int64_t> row_block;
  for (size_t k = 0; k < externals.size(); ++k) {
    const auto& st = layout.strides[k];
    bool scalar = std::all_of(st.begin(), st.end(), [](int64_t s) { return s == 0; });
    bool contiguous = broadcast_offset_is_identity(layout, k);
    row_block.push_back(broadcast_row_block(layout, k));
    access.push_back(scalar ? Access::kScalar
                     : contiguous ? Access::kContiguous
                     : row_block.back() > 0 ? Access::kRow
                                            : Access::kGather);
  }

  // `g` by reference: [=] alone would copy the whole graph, constants included, per kernel.
  // The epilogue is used while this group is emitted, when the graph is alive.
  // A vector of anchor results is evaluated as vectors (the float math vectorises), with
  // each operand loaded as a vector, a splat or a lane-by-lane gather.
  const int64_t last_dim = out_shape.rank() > 0 ? out_shape[out_shape.rank() - 1] : 1;
  return [=, &g](EmitContext& ec2, Value* value, Value* linear, Value* last_dim_index) -> Value* {
    llvm::IRBuilder<>& b = ec2.b;
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(value->getType());
    const int lanes = vt ? static_cast<int>(vt->getNumElements()) : 0;
    auto load = [&](size_t k) -> Value* {
      const DType dt = g.value(externals[k]).type.dtype;
      Value* ptr = operand_ptr(ec2, externals[k]);
      auto gather = [&]() -> Value* {
        Value* out = llvm::PoisonValue::get(llvm::FixedVectorType::get(compute_type(ec2, dt), static_cast<unsigned>(lanes)));
        for (int j = 0; j < lanes; ++j) {
          Value* off = broadcast_offset(ec2, layout, k, b.CreateAdd(linear, i64c(ec2, j)));
          out = b.CreateInsertElement(out, load_elem(ec2, dt, ptr, off), static_cast<uint64_t>(j));
        }
        return out;
      };
      switch (lanes == 0 ? Access::kGather : access[k]) {
        case Access::kContiguous: return load_n(ec2, dt, ptr, linear, lanes);
        case Access::kScalar: return splat_like(ec2, load_elem(ec2, dt, ptr, i64c(ec2, 0)), lanes);
        case Access::kRow: {
          const int64_t block = row_block[k];
          // A block of the last dim's size starts each output row: the caller's column,
          // when given, is its offset, and the lanes lie in that row (Epilogue).
          if (last_dim_index != nullptr && block == last_dim) return load_n(ec2, dt, ptr, last_dim_index, lanes);
          if (last_dim_index != nullptr && block % last_dim == 0) {  // whole rows (an attention mask)
            Value* row = b.CreateURem(b.CreateUDiv(linear, i64c(ec2, last_dim)), i64c(ec2, block / last_dim));
            return load_n(ec2, dt, ptr, b.CreateAdd(b.CreateMul(row, i64c(ec2, last_dim)), last_dim_index), lanes);
          }
          Value* off = b.CreateURem(linear, i64c(ec2, block));
          Value* inside = b.CreateICmpULE(b.CreateAdd(off, i64c(ec2, lanes)), i64c(ec2, block));
          auto* vec_bb = llvm::BasicBlock::Create(ec2.ctx, "row.vec", ec2.fn);
          auto* gather_bb = llvm::BasicBlock::Create(ec2.ctx, "row.gather", ec2.fn);
          auto* join_bb = llvm::BasicBlock::Create(ec2.ctx, "row.join", ec2.fn);
          b.CreateCondBr(inside, vec_bb, gather_bb);
          b.SetInsertPoint(vec_bb);
          Value* v = load_n(ec2, dt, ptr, off, lanes);
          llvm::BasicBlock* vec_end = b.GetInsertBlock();
          b.CreateBr(join_bb);
          b.SetInsertPoint(gather_bb);
          Value* gv = gather();
          llvm::BasicBlock* gather_end = b.GetInsertBlock();
          b.CreateBr(join_bb);
          b.SetInsertPoint(join_bb);
          llvm::PHINode* phi = b.CreatePHI(v->getType(), 2);
          phi->addIncoming(v, vec_end);
          phi->addIncoming(gv, gather_end);
          return phi;
        }
        case Access::kGather: break;
      }
      if (lanes == 0) return load_elem(ec2, dt, ptr, broadcast_offset(ec2, layout, k, linear));
      return gather();
    };
    std::map<ir::ValueId, Value*> known{{anchor_out, value}};
    auto r = eval_chain(ec2, nodes, known, externals, load);
    if (r.ok()) return *r;
    Type* ct = compute_type(ec2, final_dtype);
    return llvm::PoisonValue::get(lanes == 0 ? ct : llvm::FixedVectorType::get(ct, static_cast<unsigned>(lanes)));
  };
}

}  // namespace carve::jit::detail
