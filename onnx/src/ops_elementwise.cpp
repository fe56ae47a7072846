// Elementwise ONNX operators: unary math, binary arithmetic with broadcasting,
// comparisons and logic, Where, Cast, Clip and the activation functions built on them.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <optional>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

Result<std::vector<Tensor>> inputs(const NodeContext& n, int count) {
  std::vector<Tensor> out;
  for (int i = 0; i < count; ++i) {
    CARVE_ASSIGN_OR_RETURN(Tensor t, n.input(i));
    out.push_back(std::move(t));
  }
  return out;
}

template <OpKind kind>
Status lower_unary(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(kind, {x}));
  return n.set_output(0, y);
}

template <OpKind kind>
Status lower_binary(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs(n, 2));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(kind, in));
  return n.set_output(0, y);
}

// Max, Min, Sum: variadic, folded left to right.
template <OpKind kind>
Status lower_variadic(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor acc, n.input(0));
  for (int i = 1; i < n.num_inputs(); ++i) {
    CARVE_ASSIGN_OR_RETURN(Tensor next, n.input(i));
    CARVE_ASSIGN_OR_RETURN(acc, n.op(kind, {acc, next}));
  }
  return n.set_output(0, acc);
}

// x^2 with a constant scalar exponent (what exporters emit for LayerNorm's variance):
// x * x, bit-identical for f32/f64 (pow computes x*x exactly in double, then rounds once),
// and one multiply instead of a libm pow per element.
bool is_constant_square(const Tensor& base, const Tensor& exponent) {
  if (!exponent.is_known() || base.is_known() || !ir::is_float(base.type.dtype)) return false;
  if (base.type.dtype != ir::DType::kF32 && base.type.dtype != ir::DType::kF64) return false;
  if (exponent.type.shape.rank() > base.type.shape.rank()) return false;  // would broadcast up
  const std::vector<double> values = to_doubles(exponent);
  return values.size() == 1 && values[0] == 2.0;
}

// Pow's exponent may have another dtype than the base: convert it to the base's.
Status lower_pow(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs(n, 2));
  if (is_constant_square(in[0], in[1])) {
    CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMul, {in[0], in[0]}));
    return n.set_output(0, y);
  }
  if (in[1].type.dtype != in[0].type.dtype) {
    CARVE_ASSIGN_OR_RETURN(in[1], n.op(OpKind::kCast, {in[1]}, {{"to", ir::dtype_name(in[0].type.dtype)}}));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kPow, in));
  return n.set_output(0, y);
}

Status lower_reciprocal(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  Tensor one = n.constant_doubles(x.type.dtype, {}, {1.0});
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kDiv, {one, x}));
  return n.set_output(0, y);
}

Status lower_where(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs(n, 3));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, in));
  return n.set_output(0, y);
}

Status lower_not(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kEqual, {x, n.constant_ints(ir::DType::kBool, {}, {0})}));
  return n.set_output(0, y);
}

// And(a, b) = where(a, b, false); Or(a, b) = where(a, true, b).
template <bool is_and>
Status lower_logic(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs(n, 2));
  Tensor fixed = n.constant_ints(ir::DType::kBool, {}, {is_and ? 0 : 1});
  std::vector<Tensor> args = is_and ? std::vector<Tensor>{in[0], in[1], fixed} : std::vector<Tensor>{in[0], fixed, in[1]};
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, args));
  return n.set_output(0, y);
}

Status lower_cast(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t to, n.attr_int("to"));
  Result<ir::DType> dtype = dtype_from_onnx(static_cast<int32_t>(to));
  if (!dtype.ok()) return n.unsupported(dtype.status().message());
  if (*dtype == x.type.dtype) return n.set_output(0, x);
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kCast, {x}, {{"to", ir::dtype_name(*dtype)}}));
  return n.set_output(0, y);
}

// Clip: min/max are attributes before opset 11 and optional inputs after. Constant
// bounds become one clip node; bounds computed at run time (or min > max, where ONNX
// gives max) become max(x, min) then min(., max): NaN in x or a bound propagates, as
// in ONNX's np.clip reference.
Status lower_clip(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  if (n.opset() < 11) {
    CARVE_ASSIGN_OR_RETURN(lo, n.attr_float("min", lo));
    CARVE_ASSIGN_OR_RETURN(hi, n.attr_float("max", hi));
  } else if (n.has_attr("min") || n.has_attr("max")) {
    return n.unsupported("attributes min/max are opset < 11; from opset 11 they are inputs");
  }
  std::optional<Tensor> bounds[2];  // the min and max inputs, where present
  bool known = true;
  for (int i = 0; i < 2; ++i) {
    if (!n.has_input(i + 1)) continue;
    CARVE_ASSIGN_OR_RETURN(Tensor b, n.input(i + 1));
    const ir::Shape& s = b.type.shape;
    Result<int64_t> count = s.num_elements();
    if (!count.ok() || *count != 1 || s.rank() > x.type.shape.rank())  // would broadcast x up
      return n.invalid(fmt::format("{} must be a scalar, got {}", i == 0 ? "min" : "max", b.type.to_string()));
    if (b.is_known()) {
      (i == 0 ? lo : hi) = to_doubles(b)[0];
    } else {
      known = false;
    }
    bounds[i] = std::move(b);
  }
  if (known && lo <= hi) {
    CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kClip, {x}, {{"min", lo}, {"max", hi}}));
    return n.set_output(0, y);
  }
  if (n.opset() < 11) {  // attributes, min > max
    bounds[0] = n.constant_doubles(x.type.dtype, {}, {lo});
    bounds[1] = n.constant_doubles(x.type.dtype, {}, {hi});
  }
  Tensor y = x;
  for (int i = 0; i < 2; ++i) {
    if (!bounds[i]) continue;
    CARVE_ASSIGN_OR_RETURN(y, n.op(i == 0 ? OpKind::kMax : OpKind::kMin, {y, *bounds[i]}));
  }
  return n.set_output(0, y);
}

// Mod: fmod=1 is C fmod (carve's fmod op: exact, where x - trunc(x / y) * y is not);
// fmod=0, integers only as ONNX requires, takes the divisor's sign (Python's %): the
// truncated remainder plus y where it is nonzero and its sign differs from y's.
Status lower_mod(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs(n, 2));
  CARVE_ASSIGN_OR_RETURN(int64_t fmod, n.attr_int("fmod", 0));
  if (fmod != 0 && fmod != 1) return n.invalid(fmt::format("fmod = {} (must be 0 or 1)", fmod));
  const ir::DType dt = in[0].type.dtype;
  if (fmod == 0 && ir::is_float(dt))
    return n.invalid(fmt::format("fmod = 0 on {} (ONNX requires fmod = 1 for floats)", ir::dtype_name(dt)));
  CARVE_ASSIGN_OR_RETURN(Tensor r, n.op(OpKind::kFmod, in));
  if (fmod == 1 || ir::is_unsigned_int(dt)) return n.set_output(0, r);  // unsigned: no sign to fix
  Tensor zero = n.constant_ints(dt, {}, {0});
  CARVE_ASSIGN_OR_RETURN(Tensor y_negative, n.op(OpKind::kLess, {in[1], zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor r_positive, n.op(OpKind::kGreater, {r, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor r_negative, n.op(OpKind::kLess, {r, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor differ, n.op(OpKind::kWhere, {y_negative, r_positive, r_negative}));
  CARVE_ASSIGN_OR_RETURN(Tensor shifted, n.op(OpKind::kAdd, {r, in[1]}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {differ, shifted, r}));
  return n.set_output(0, y);
}

Status lower_hard_sigmoid(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 0.2));
  CARVE_ASSIGN_OR_RETURN(double beta, n.attr_float("beta", 0.5));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kHardSigmoid, {x}, {{"alpha", alpha}, {"beta", beta}}));
  return n.set_output(0, y);
}

// HardSwish(x) = x * HardSigmoid(x; 1/6, 1/2).
Status lower_hard_swish(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor s, n.op(OpKind::kHardSigmoid, {x}, {{"alpha", 1.0 / 6.0}, {"beta", 0.5}}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMul, {x, s}));
  return n.set_output(0, y);
}

// LeakyRelu(x) = x < 0 ? alpha * x : x.
Status lower_leaky_relu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 0.01));
  Tensor zero = n.constant_doubles(x.type.dtype, {}, {0.0});
  CARVE_ASSIGN_OR_RETURN(Tensor negative, n.op(OpKind::kLess, {x, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kMul, {x, n.constant_doubles(x.type.dtype, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {negative, scaled, x}));
  return n.set_output(0, y);
}

// Gelu (opset 20): the erf form is carve's gelu; approximate='tanh' is
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in element-wise ops.
Status lower_gelu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(std::string approximate, n.attr_string("approximate", "none"));
  if (approximate == "none") {
    CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGelu, {x}));
    return n.set_output(0, y);
  }
  if (approximate != "tanh") return n.invalid(fmt::format("approximate='{}' (none or tanh)", approximate));
  const ir::DType t = x.type.dtype;
  CARVE_ASSIGN_OR_RETURN(Tensor x2, n.op(OpKind::kMul, {x, x}));
  CARVE_ASSIGN_OR_RETURN(Tensor x3, n.op(OpKind::kMul, {x2, x}));
  CARVE_ASSIGN_OR_RETURN(Tensor cubic, n.op(OpKind::kMul, {x3, n.constant_doubles(t, {}, {0.044715})}));
  CARVE_ASSIGN_OR_RETURN(Tensor inner, n.op(OpKind::kAdd, {x, cubic}));
  CARVE_ASSIGN_OR_RETURN(inner, n.op(OpKind::kMul, {inner, n.constant_doubles(t, {}, {std::sqrt(2.0 / M_PI)})}));
  CARVE_ASSIGN_OR_RETURN(Tensor th, n.op(OpKind::kTanh, {inner}));
  CARVE_ASSIGN_OR_RETURN(Tensor one_plus, n.op(OpKind::kAdd, {th, n.constant_doubles(t, {}, {1.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor half_x, n.op(OpKind::kMul, {x, n.constant_doubles(t, {}, {0.5})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMul, {half_x, one_plus}));
  return n.set_output(0, y);
}

// PRelu(x, slope) = x < 0 ? slope * x : x (slope broadcasts to x).
Status lower_prelu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor slope, n.input(1));
  Tensor zero = n.constant_doubles(x.type.dtype, {}, {0.0});
  CARVE_ASSIGN_OR_RETURN(Tensor negative, n.op(OpKind::kLess, {x, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kMul, {x, slope}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {negative, scaled, x}));
  return n.set_output(0, y);
}

// The activations below are composed of carve ops; ONNX defines them on floats.
Result<Tensor> float_input(const NodeContext& n, int i) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(i));
  if (!ir::is_float(x.type.dtype))
    return n.unsupported(fmt::format("{} input (ONNX defines {} on floats)", ir::dtype_name(x.type.dtype), n.op_type()));
  return x;
}

// Elu(x) = x < 0 ? alpha * (exp(x) - 1) : x.
Status lower_elu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 1.0));
  const ir::DType dt = x.type.dtype;
  CARVE_ASSIGN_OR_RETURN(Tensor negative, n.op(OpKind::kLess, {x, n.constant_doubles(dt, {}, {0.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kExp, {x}));
  CARVE_ASSIGN_OR_RETURN(Tensor em1, n.op(OpKind::kSub, {e, n.constant_doubles(dt, {}, {1.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kMul, {em1, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {negative, scaled, x}));
  return n.set_output(0, y);
}

// Selu(x) = gamma * (x > 0 ? x : alpha * exp(x) - alpha); the defaults are ONNX's
// float constants.
Status lower_selu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 1.67326319217681884765625));
  CARVE_ASSIGN_OR_RETURN(double gamma, n.attr_float("gamma", 1.05070102214813232421875));
  const ir::DType dt = x.type.dtype;
  CARVE_ASSIGN_OR_RETURN(Tensor positive, n.op(OpKind::kGreater, {x, n.constant_doubles(dt, {}, {0.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kExp, {x}));
  CARVE_ASSIGN_OR_RETURN(Tensor ae, n.op(OpKind::kMul, {e, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor neg, n.op(OpKind::kSub, {ae, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor picked, n.op(OpKind::kWhere, {positive, x, neg}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMul, {picked, n.constant_doubles(dt, {}, {gamma})}));
  return n.set_output(0, y);
}

// Celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Status lower_celu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 1.0));
  if (alpha == 0) return n.invalid("alpha is 0");
  const ir::DType dt = x.type.dtype;
  Tensor zero = n.constant_doubles(dt, {}, {0.0});
  CARVE_ASSIGN_OR_RETURN(Tensor scaled, n.op(OpKind::kDiv, {x, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kExp, {scaled}));
  CARVE_ASSIGN_OR_RETURN(Tensor em1, n.op(OpKind::kSub, {e, n.constant_doubles(dt, {}, {1.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor neg, n.op(OpKind::kMul, {em1, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor neg_part, n.op(OpKind::kMin, {neg, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor pos_part, n.op(OpKind::kMax, {x, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kAdd, {pos_part, neg_part}));
  return n.set_output(0, y);
}

// ThresholdedRelu(x) = x > alpha ? x : 0.
Status lower_thresholded_relu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 1.0));
  const ir::DType dt = x.type.dtype;
  CARVE_ASSIGN_OR_RETURN(Tensor keep, n.op(OpKind::kGreater, {x, n.constant_doubles(dt, {}, {alpha})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {keep, x, n.constant_doubles(dt, {}, {0.0})}));
  return n.set_output(0, y);
}

// log(1 + t) for t in [0, 1] without log1p: u = 1 + t rounds, and log(u) * t / (u - 1)
// corrects for that rounding (u - 1 is exact), so small t keeps its relative accuracy
// instead of log(1 + t) flushing to 0 below half an ulp of 1.
Result<Tensor> log1p_of_unit(NodeContext& n, const Tensor& t) {
  const ir::DType dt = t.type.dtype;
  Tensor one = n.constant_doubles(dt, {}, {1.0});
  CARVE_ASSIGN_OR_RETURN(Tensor u, n.op(OpKind::kAdd, {t, one}));
  CARVE_ASSIGN_OR_RETURN(Tensor um1, n.op(OpKind::kSub, {u, one}));
  CARVE_ASSIGN_OR_RETURN(Tensor log_u, n.op(OpKind::kLog, {u}));
  CARVE_ASSIGN_OR_RETURN(Tensor ratio, n.op(OpKind::kDiv, {t, um1}));
  CARVE_ASSIGN_OR_RETURN(Tensor corrected, n.op(OpKind::kMul, {log_u, ratio}));
  CARVE_ASSIGN_OR_RETURN(Tensor rounded_away, n.op(OpKind::kEqual, {um1, n.constant_doubles(dt, {}, {0.0})}));
  return n.op(OpKind::kWhere, {rounded_away, t, corrected});
}

}  // namespace

// Softplus(x) = log(1 + exp(x)), as max(x, 0) + log1p(exp(-|x|)): exp never overflows.
Result<Tensor> softplus(NodeContext& n, const Tensor& x) {
  CARVE_ASSIGN_OR_RETURN(Tensor a, n.op(OpKind::kAbs, {x}));
  CARVE_ASSIGN_OR_RETURN(Tensor na, n.op(OpKind::kNeg, {a}));
  CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kExp, {na}));
  CARVE_ASSIGN_OR_RETURN(Tensor l, log1p_of_unit(n, e));
  CARVE_ASSIGN_OR_RETURN(Tensor r, n.op(OpKind::kRelu, {x}));
  return n.op(OpKind::kAdd, {r, l});
}

namespace {

Status lower_softplus(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, softplus(n, x));
  return n.set_output(0, y);
}

// Mish(x) = x * tanh(softplus(x)).
Status lower_mish(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor sp, softplus(n, x));
  CARVE_ASSIGN_OR_RETURN(Tensor t, n.op(OpKind::kTanh, {sp}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMul, {x, t}));
  return n.set_output(0, y);
}

// Softsign(x) = x / (1 + |x|).
Status lower_softsign(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor a, n.op(OpKind::kAbs, {x}));
  CARVE_ASSIGN_OR_RETURN(Tensor d, n.op(OpKind::kAdd, {a, n.constant_doubles(x.type.dtype, {}, {1.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kDiv, {x, d}));
  return n.set_output(0, y);
}

// Shrink(x) = x < -lambd ? x + bias : x > lambd ? x - bias : 0. On integers the
// attributes must be whole numbers, so the comparisons and the shift stay exact.
Status lower_shrink(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(double bias, n.attr_float("bias", 0.0));
  CARVE_ASSIGN_OR_RETURN(double lambd, n.attr_float("lambd", 0.5));
  const ir::DType dt = x.type.dtype;
  // Unsigned types would need negative thresholds, which they cannot hold.
  if (dt == ir::DType::kBool || ir::is_unsigned_int(dt)) return n.unsupported(fmt::format("{} input", ir::dtype_name(dt)));
  if (!ir::is_float(dt) && (bias != std::trunc(bias) || lambd != std::trunc(lambd)))
    return n.unsupported(fmt::format("{} input with fractional bias {} or lambd {}", ir::dtype_name(dt), bias, lambd));
  CARVE_ASSIGN_OR_RETURN(Tensor low, n.op(OpKind::kLess, {x, n.constant_doubles(dt, {}, {-lambd})}));
  CARVE_ASSIGN_OR_RETURN(Tensor high, n.op(OpKind::kGreater, {x, n.constant_doubles(dt, {}, {lambd})}));
  CARVE_ASSIGN_OR_RETURN(Tensor up, n.op(OpKind::kAdd, {x, n.constant_doubles(dt, {}, {bias})}));
  CARVE_ASSIGN_OR_RETURN(Tensor down, n.op(OpKind::kSub, {x, n.constant_doubles(dt, {}, {bias})}));
  CARVE_ASSIGN_OR_RETURN(Tensor inner, n.op(OpKind::kWhere, {high, down, n.constant_doubles(dt, {}, {0.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {low, up, inner}));
  return n.set_output(0, y);
}

// Sign(x) = x > 0 ? 1 : x < 0 ? -1 : x (0 stays 0 and NaN stays NaN, as numpy's sign).
Status lower_sign(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const ir::DType dt = x.type.dtype;
  if (dt == ir::DType::kBool) return n.unsupported("bool input");
  Tensor zero = n.constant_doubles(dt, {}, {0.0});
  CARVE_ASSIGN_OR_RETURN(Tensor positive, n.op(OpKind::kGreater, {x, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor negative, n.op(OpKind::kLess, {x, zero}));
  // Unsigned types have no -1; their negative mask is always false, so any value does.
  Tensor minus_one = n.constant_ints(dt, {}, {ir::is_unsigned_int(dt) ? 0 : -1});
  CARVE_ASSIGN_OR_RETURN(Tensor inner, n.op(OpKind::kWhere, {negative, minus_one, x}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {positive, n.constant_doubles(dt, {}, {1.0}), inner}));
  return n.set_output(0, y);
}

// Mean = Sum / count, summed left to right as ONNX's reference does.
Status lower_mean(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor acc, float_input(n, 0));
  for (int i = 1; i < n.num_inputs(); ++i) {
    CARVE_ASSIGN_OR_RETURN(Tensor next, n.input(i));
    CARVE_ASSIGN_OR_RETURN(acc, n.op(OpKind::kAdd, {acc, next}));
  }
  if (n.num_inputs() > 1) {
    Tensor count = n.constant_doubles(acc.type.dtype, {}, {static_cast<double>(n.num_inputs())});
    CARVE_ASSIGN_OR_RETURN(acc, n.op(OpKind::kDiv, {acc, count}));
  }
  return n.set_output(0, acc);
}

Result<Tensor> bool_input(const NodeContext& n, int i) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(i));
  if (x.type.dtype != ir::DType::kBool)
    return n.invalid(fmt::format("input {} is {} (ONNX defines {} on bool)", i, ir::dtype_name(x.type.dtype), n.op_type()));
  return x;
}

// Xor(a, b) = a != b on bools.
Status lower_xor(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor a, bool_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor b, bool_input(n, 1));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kNotEqual, {a, b}));
  return n.set_output(0, y);
}

// IsNaN(x) = x != x (an unordered comparison: true exactly for NaN).
Status lower_is_nan(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kNotEqual, {x, x}));
  return n.set_output(0, y);
}

// IsInf: x == +inf, x == -inf, |x| == inf, or (neither detected) x < -inf, never true.
Status lower_is_inf(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, float_input(n, 0));
  CARVE_ASSIGN_OR_RETURN(int64_t positive, n.attr_int("detect_positive", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t negative, n.attr_int("detect_negative", 1));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const ir::DType dt = x.type.dtype;
  // Not an ok Status: a Result made from one asserts (every branch below sets y).
  Result<Tensor> y = Status(ErrorCode::kInternal, "no lowering for the detected signs");
  if (positive && negative) {
    CARVE_ASSIGN_OR_RETURN(Tensor a, n.op(OpKind::kAbs, {x}));
    y = n.op(OpKind::kEqual, {a, n.constant_doubles(dt, {}, {kInf})});
  } else if (positive || negative) {
    y = n.op(OpKind::kEqual, {x, n.constant_doubles(dt, {}, {positive ? kInf : -kInf})});
  } else {
    y = n.op(OpKind::kLess, {x, n.constant_doubles(dt, {}, {-kInf})});
  }
  if (!y.ok()) return y.status();
  return n.set_output(0, *y);
}

// CastLike(x, like): Cast to like's dtype.
// BitShift(x, y) with direction LEFT or RIGHT: unsigned integers only (ONNX's types);
// shifts by the bit width or more give 0.
Status lower_bit_shift(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs(n, 2));
  CARVE_ASSIGN_OR_RETURN(std::string direction, n.attr_string("direction"));
  if (direction != "LEFT" && direction != "RIGHT")
    return n.invalid(fmt::format("direction = \"{}\" (must be \"LEFT\" or \"RIGHT\")", direction));
  const ir::DType dt = in[0].type.dtype;
  if (!ir::is_unsigned_int(dt))
    return n.invalid(fmt::format("{} input (ONNX defines BitShift on unsigned integers)", ir::dtype_name(dt)));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(direction == "LEFT" ? OpKind::kBitShiftLeft : OpKind::kBitShiftRight, in));
  return n.set_output(0, y);
}

Status lower_cast_like(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(ir::TensorType like, n.input_type(1));
  if (like.dtype == x.type.dtype) return n.set_output(0, x);
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kCast, {x}, {{"to", ir::dtype_name(like.dtype)}}));
  return n.set_output(0, y);
}

Status lower_identity(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  return n.set_output(0, x);
}

// Dropout is the identity in inference, and its mask output (when read) all true. In
// training mode only ratio 0 is deterministic, and the same; any other ratio is random.
Status lower_dropout(NodeContext& n) {
  bool training = false;
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> mode, n.const_ints(2, "training_mode"));
    training = !mode.empty() && mode[0] != 0;
  }
  if (training) {
    double ratio = 0.5;
    if (n.has_input(1)) {
      CARVE_ASSIGN_OR_RETURN(ratio, n.const_scalar(1, "ratio"));
    } else {
      CARVE_ASSIGN_OR_RETURN(ratio, n.attr_float("ratio", 0.5));
    }
    if (ratio != 0.0) return n.unsupported("training_mode=1 with a ratio above 0 is random (inference only)");
  }
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_RETURN_IF_ERROR(n.set_output(0, x));
  if (!n.output_used(1)) return Status();
  const ir::TensorType mask{ir::DType::kBool, x.type.shape};
  CARVE_RETURN_IF_ERROR(n.check_folded(mask));
  CARVE_ASSIGN_OR_RETURN(int64_t count, x.type.shape.num_elements());
  return n.set_output(1, n.constant_ints(ir::DType::kBool, x.type.shape, std::vector<int64_t>(static_cast<size_t>(count), 1)));
}

}  // namespace

void register_elementwise_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Relu"] = {lower_unary<OpKind::kRelu>, {}};
  t["Sigmoid"] = {lower_unary<OpKind::kSigmoid>, {}};
  t["Tanh"] = {lower_unary<OpKind::kTanh>, {}};
  t["Sqrt"] = {lower_unary<OpKind::kSqrt>, {}};
  t["Erf"] = {lower_unary<OpKind::kErf>, {}};
  t["Exp"] = {lower_unary<OpKind::kExp>, {}};
  t["Log"] = {lower_unary<OpKind::kLog>, {}};
  t["Neg"] = {lower_unary<OpKind::kNeg>, {}};
  t["Abs"] = {lower_unary<OpKind::kAbs>, {}};
  t["Reciprocal"] = {lower_reciprocal, {}};
  t["Add"] = {lower_binary<OpKind::kAdd>, {}};
  t["Sub"] = {lower_binary<OpKind::kSub>, {}};
  t["Mul"] = {lower_binary<OpKind::kMul>, {}};
  t["Div"] = {lower_binary<OpKind::kDiv>, {}};
  t["Pow"] = {lower_pow, {}};
  t["Max"] = {lower_variadic<OpKind::kMax>, {}};
  t["Min"] = {lower_variadic<OpKind::kMin>, {}};
  t["Sum"] = {lower_variadic<OpKind::kAdd>, {}};
  t["Equal"] = {lower_binary<OpKind::kEqual>, {}};
  t["Less"] = {lower_binary<OpKind::kLess>, {}};
  t["LessOrEqual"] = {lower_binary<OpKind::kLessEqual>, {}};
  t["Greater"] = {lower_binary<OpKind::kGreater>, {}};
  t["GreaterOrEqual"] = {lower_binary<OpKind::kGreaterEqual>, {}};
  t["Not"] = {lower_not, {}};
  t["And"] = {lower_logic<true>, {}};
  t["Or"] = {lower_logic<false>, {}};
  t["Where"] = {lower_where, {}};
  // saturate (opset 19+) applies only to float8 targets, which carve does not have.
  t["Cast"] = {lower_cast, {"to", "saturate"}};
  t["Clip"] = {lower_clip, {"min", "max"}};
  t["HardSigmoid"] = {lower_hard_sigmoid, {"alpha", "beta"}};
  t["HardSwish"] = {lower_hard_swish, {}};
  t["LeakyRelu"] = {lower_leaky_relu, {"alpha"}};
  t["Gelu"] = {lower_gelu, {"approximate"}};
  t["PRelu"] = {lower_prelu, {}};
  t["Floor"] = {lower_unary<OpKind::kFloor>, {}};
  t["Ceil"] = {lower_unary<OpKind::kCeil>, {}};
  t["Round"] = {lower_unary<OpKind::kRound>, {}};
  t["Sin"] = {lower_unary<OpKind::kSin>, {}};
  t["Cos"] = {lower_unary<OpKind::kCos>, {}};
  t["Tan"] = {lower_unary<OpKind::kTan>, {}};
  t["Asin"] = {lower_unary<OpKind::kAsin>, {}};
  t["Acos"] = {lower_unary<OpKind::kAcos>, {}};
  t["Atan"] = {lower_unary<OpKind::kAtan>, {}};
  t["Sinh"] = {lower_unary<OpKind::kSinh>, {}};
  t["Cosh"] = {lower_unary<OpKind::kCosh>, {}};
  t["Asinh"] = {lower_unary<OpKind::kAsinh>, {}};
  t["Acosh"] = {lower_unary<OpKind::kAcosh>, {}};
  t["Atanh"] = {lower_unary<OpKind::kAtanh>, {}};
  t["Mod"] = {lower_mod, {"fmod"}};
  t["Elu"] = {lower_elu, {"alpha"}};
  t["Selu"] = {lower_selu, {"alpha", "gamma"}};
  t["Celu"] = {lower_celu, {"alpha"}};
  t["ThresholdedRelu"] = {lower_thresholded_relu, {"alpha"}};
  t["Softplus"] = {lower_softplus, {}};
  t["Mish"] = {lower_mish, {}};
  t["Softsign"] = {lower_softsign, {}};
  t["Shrink"] = {lower_shrink, {"bias", "lambd"}};
  t["Sign"] = {lower_sign, {}};
  t["Mean"] = {lower_mean, {}};
  t["Xor"] = {lower_xor, {}};
  t["IsNaN"] = {lower_is_nan, {}};
  t["IsInf"] = {lower_is_inf, {"detect_negative", "detect_positive"}};
  t["CastLike"] = {lower_cast_like, {"saturate"}};
  t["BitShift"] = {lower_bit_shift, {"direction"}};
  t["Identity"] = {lower_identity, {}};
  t["Dropout"] = {lower_dropout, {"ratio", "seed"}};
}

}  // namespace carve::onnx::detail
