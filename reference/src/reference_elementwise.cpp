// Reference kernels: unary, binary, comparisons, where, cast.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "reference_internal.h"

namespace carve::reference::ref {
namespace {

using ir::OpKind;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double float_unary(OpKind op, double x, const Ctx& ctx) {
  switch (op) {
    case OpKind::kNeg: return -x;
    case OpKind::kAbs: return std::fabs(x);
    case OpKind::kExp: return std::exp(x);
    case OpKind::kLog: return std::log(x);
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return 1.0 / std::sqrt(x);
    case OpKind::kTanh: return std::tanh(x);
    case OpKind::kSigmoid: return sigmoid(x);
    case OpKind::kRelu: return x < 0 ? 0.0 : x;
    case OpKind::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case OpKind::kErf: return std::erf(x);
    case OpKind::kSilu: return x * sigmoid(x);
    case OpKind::kHardSigmoid: {
      const double y = ctx.attr_float("alpha", 0.2) * x + ctx.attr_float("beta", 0.5);
      return std::isnan(y) ? y : std::max(0.0, std::min(1.0, y));
    }
    case OpKind::kClip: {
      const double lo = ctx.attr_float("min", -kInf), hi = ctx.attr_float("max", kInf);
      return x < lo ? lo : (x > hi ? hi : x);  // NaN falls through
    }
    case OpKind::kFloor: return std::floor(x);
    case OpKind::kCeil: return std::ceil(x);
    case OpKind::kRound: return std::nearbyint(x);  // half to even in the default rounding mode
    case OpKind::kTrunc: return std::trunc(x);
    case OpKind::kSin: return std::sin(x);
    case OpKind::kCos: return std::cos(x);
    case OpKind::kTan: return std::tan(x);
    case OpKind::kAsin: return std::asin(x);
    case OpKind::kAcos: return std::acos(x);
    case OpKind::kAtan: return std::atan(x);
    case OpKind::kSinh: return std::sinh(x);
    case OpKind::kCosh: return std::cosh(x);
    case OpKind::kAsinh: return std::asinh(x);
    case OpKind::kAcosh: return std::acosh(x);
    case OpKind::kAtanh: return std::atanh(x);
    default: return kNaN;
  }
}

// Integer clip bounds: [ceil(min), floor(max)] saturated to the dtype's range.
template <typename V>
std::pair<V, V> int_clip_bounds(ir::DType dtype, double lo, double hi) {
  V bounds[2];
  const double values[2] = {std::ceil(lo), std::floor(hi)};
  for (int i = 0; i < 2; ++i) {
    std::vector<uint8_t> encoded = encode_double(dtype, values[i]);  // saturating
    bounds[i] = load<V>(dtype, encoded.data(), 1)[0];
  }
  return {bounds[0], bounds[1]};
}

// V is int64_t, or uint64_t for u64 (whose values need not fit int64).
template <typename V>
Status int_unary(const Ctx& ctx) {
  const OpKind op = ctx.node.op;
  const ir::TensorType& t = ctx.in_type(0);
  std::vector<V> x = load<V>(t.dtype, ctx.in[0], count(t.shape));
  constexpr bool kSigned = std::is_signed_v<V>;
  switch (op) {
    case OpKind::kNeg:
      for (V& v : x) v = static_cast<V>(0 - static_cast<uint64_t>(v));  // wraps, no UB
      break;
    case OpKind::kAbs:
      if constexpr (kSigned) {
        for (V& v : x) v = v < 0 ? wrap_neg(v) : v;
      }
      break;
    case OpKind::kRelu:
      if constexpr (kSigned) {
        for (V& v : x) v = v < 0 ? 0 : v;
      }
      break;
    case OpKind::kClip: {
      auto [lo, hi] = int_clip_bounds<V>(t.dtype, ctx.attr_float("min", -kInf),
                                         ctx.attr_float("max", kInf));
      for (V& v : x) v = v < lo ? lo : (v > hi ? hi : v);
      break;
    }
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kRound:
    case OpKind::kTrunc:
      break;  // integers are already integral
    default:
      return ctx.error(ErrorCode::kInternal, "no integer form of this op");
  }
  store<V>(ctx.out_type(0).dtype, x, ctx.out[0]);
  return Status();
}

Status run_unary(const Ctx& ctx) {
  const OpKind op = ctx.node.op;
  const ir::TensorType& t = ctx.in_type(0);
  const int64_t n = count(t.shape);
  if (ir::is_float(t.dtype)) {
    std::vector<double> x = load_f64(t.dtype, ctx.in[0], n);
    for (double& v : x) v = float_unary(op, v, ctx);
    store_f64(ctx.out_type(0).dtype, x, ctx.out[0]);
    return Status();
  }
  // The narrower unsigned types are zero-extended, so int64 orders them correctly.
  return t.dtype == ir::DType::kU64 ? int_unary<uint64_t>(ctx) : int_unary<int64_t>(ctx);
}

double float_binary(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::kAdd: return a + b;
    case OpKind::kSub: return a - b;
    case OpKind::kMul: return a * b;
    case OpKind::kDiv: return a / b;
    case OpKind::kPow: return std::pow(a, b);
    case OpKind::kMax: return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
    case OpKind::kMin: return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
    case OpKind::kFmod: return std::fmod(a, b);  // exact, so rounding to the dtype is too
    default: return kNaN;
  }
}

int64_t int_pow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return exponent % 2 == 0 ? 1 : -1;
    return 0;  // |base| > 1: the real result truncates to 0; base 0: like x / 0
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (auto e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if ((e & 1) != 0) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

// u64: wrapping arithmetic, unsigned division and order.
uint64_t int_binary(OpKind op, uint64_t a, uint64_t b) {
  switch (op) {
    case OpKind::kAdd: return a + b;
    case OpKind::kSub: return a - b;
    case OpKind::kMul: return a * b;
    case OpKind::kDiv: return b == 0 ? 0 : a / b;
    case OpKind::kPow: {
      uint64_t result = 1;
      for (uint64_t e = b; e != 0; e >>= 1, a *= a) {
        if ((e & 1) != 0) result *= a;
      }
      return result;
    }
    case OpKind::kMax: return std::max(a, b);
    case OpKind::kMin: return std::min(a, b);
    case OpKind::kFmod: return b == 0 ? 0 : a % b;
    case OpKind::kBitShiftLeft: return b >= 64 ? 0 : a << b;
    case OpKind::kBitShiftRight: return b >= 64 ? 0 : a >> b;
    default: return 0;
  }
}

int64_t int_binary(OpKind op, int64_t a, int64_t b) {
  switch (op) {
    case OpKind::kAdd: return wrap_add(a, b);
    case OpKind::kSub: return wrap_sub(a, b);
    case OpKind::kMul: return wrap_mul(a, b);
    case OpKind::kDiv:
      if (b == 0) return 0;
      if (b == -1) return wrap_neg(a);  // INT64_MIN / -1 would overflow
      return a / b;                     // truncates toward zero
    case OpKind::kPow: return int_pow(a, b);
    case OpKind::kMax: return std::max(a, b);
    case OpKind::kMin: return std::min(a, b);
    case OpKind::kFmod:
      if (b == 0 || b == -1) return 0;  // INT64_MIN % -1 would overflow
      return a % b;                     // the sign of a
    // Unsigned types only (u8 u16 u32 here, zero-extended): a left shift past the width
    // leaves no bits once the result is truncated to it.
    case OpKind::kBitShiftLeft:
    case OpKind::kBitShiftRight:
      return static_cast<int64_t>(int_binary(op, static_cast<uint64_t>(a), static_cast<uint64_t>(b)));
    default: return 0;
  }
}

template <typename V>
bool compare(OpKind op, V a, V b) {
  switch (op) {
    case OpKind::kEqual: return a == b;
    case OpKind::kNotEqual: return a != b;
    case OpKind::kLess: return a < b;
    case OpKind::kLessEqual: return a <= b;
    case OpKind::kGreater: return a > b;
    case OpKind::kGreaterEqual: return a >= b;
    default: return false;
  }
}

template <typename V>
void binary_typed(const Ctx& ctx) {
  const OpKind op = ctx.node.op;
  const ir::TensorType& ta = ctx.in_type(0);
  const ir::TensorType& tb = ctx.in_type(1);
  const ir::TensorType& to = ctx.out_type(0);
  const std::vector<V> a = load<V>(ta.dtype, ctx.in[0], count(ta.shape));
  const std::vector<V> b = load<V>(tb.dtype, ctx.in[1], count(tb.shape));
  const int64_t n = count(to.shape);
  IndexWalker walk(to.shape, {broadcast_strides(ta.shape, to.shape),
                              broadcast_strides(tb.shape, to.shape)});
  if (ir::is_comparison(op)) {
    std::vector<int64_t> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i, walk.next()) {
      y[static_cast<size_t>(i)] = compare<V>(op, a[static_cast<size_t>(walk.offset(0))],
                                             b[static_cast<size_t>(walk.offset(1))]);
    }
    store_i64(to.dtype, y, ctx.out[0]);
    return;
  }
  std::vector<V> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i, walk.next()) {
    const V x0 = a[static_cast<size_t>(walk.offset(0))];
    const V x1 = b[static_cast<size_t>(walk.offset(1))];
    if constexpr (std::is_same_v<V, double>) {
      y[static_cast<size_t>(i)] = float_binary(op, x0, x1);
    } else {
      y[static_cast<size_t>(i)] = int_binary(op, x0, x1);
    }
  }
  store<V>(to.dtype, y, ctx.out[0]);
}

Status run_where(const Ctx& ctx) {
  const ir::TensorType& to = ctx.out_type(0);
  const auto size = static_cast<size_t>(ir::dtype_size(to.dtype));
  const int64_t n = count(to.shape);
  IndexWalker walk(to.shape, {broadcast_strides(ctx.in_type(0).shape, to.shape),
                              broadcast_strides(ctx.in_type(1).shape, to.shape),
                              broadcast_strides(ctx.in_type(2).shape, to.shape)});
  const auto* cond = static_cast<const uint8_t*>(ctx.in[0]);
  const auto* x = static_cast<const uint8_t*>(ctx.in[1]);
  const auto* y = static_cast<const uint8_t*>(ctx.in[2]);
  auto* out = static_cast<uint8_t*>(ctx.out[0]);
  for (int64_t i = 0; i < n; ++i, walk.next()) {
    const bool c = cond[walk.offset(0)] != 0;
    const uint8_t* src = c ? x + static_cast<size_t>(walk.offset(1)) * size
                           : y + static_cast<size_t>(walk.offset(2)) * size;
    std::memcpy(out + static_cast<size_t>(i) * size, src, size);
  }
  return Status();
}

Status run_cast(const Ctx& ctx) {
  const ir::TensorType& from = ctx.in_type(0);
  const ir::DType to = ctx.out_type(0).dtype;
  const int64_t n = count(from.shape);
  if (ir::is_float(from.dtype)) {
    store_f64(to, load_f64(from.dtype, ctx.in[0], n), ctx.out[0]);
  } else if (from.dtype == ir::DType::kU64) {
    store_u64(to, load_u64(from.dtype, ctx.in[0], n), ctx.out[0]);  // to floats: unsigned
  } else {
    store_i64(to, load_i64(from.dtype, ctx.in[0], n), ctx.out[0]);
  }
  return Status();
}

}  // namespace

Status run_elementwise(const Ctx& ctx) {
  const OpKind op = ctx.node.op;
  if (ir::is_unary_elementwise(op)) return run_unary(ctx);
  if (ir::is_binary_elementwise(op)) {
    CARVE_REF_DISPATCH(ctx.in_type(0).dtype, binary_typed, ctx);
    return Status();
  }
  if (op == OpKind::kWhere) return run_where(ctx);
  if (op == OpKind::kCast) return run_cast(ctx);
  return ctx.error(ErrorCode::kInternal, "not an elementwise op");
}

}  // namespace carve::reference::ref
