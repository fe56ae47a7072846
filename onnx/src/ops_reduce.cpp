// The ONNX reductions: ReduceSum/Mean/Max/Prod and ArgMax/ArgMin map onto carve's ops;
// ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp are
// composed of an elementwise step, one of them, and another elementwise step.
// DynamicQuantizeLinear is here too: min/max reductions and elementwise steps.
#include <onnx/onnx_pb.h>

#include <limits>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// Which reduction a Reduce* op composes.
enum class Family { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Axes as an attribute (ReduceSum before 13, the others before 18) or as an optional
// constant input. `all` (no axes) reduces everything; `none` (no axes with
// noop_with_empty_axes) reduces nothing, which ONNX's reference treats as a reduction
// over no axes: ReduceSumSquare then gives x*x and ReduceL1 |x|.
struct Reduction {
  std::vector<int64_t> axes;
  int64_t keepdims = 1;
  bool none = false;
};

Result<Reduction> read_reduction(const NodeContext& n) {
  Reduction r;
  CARVE_ASSIGN_OR_RETURN(r.keepdims, n.attr_int("keepdims", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t noop, n.attr_int("noop_with_empty_axes", 0));
  if (n.has_input(1)) {
    CARVE_ASSIGN_OR_RETURN(r.axes, n.const_ints(1, "axes"));
  } else {
    CARVE_ASSIGN_OR_RETURN(r.axes, n.attr_ints("axes", std::vector<int64_t>{}));
  }
  r.none = r.axes.empty() && noop != 0;
  return r;
}

Result<Tensor> reduce(NodeContext& n, OpKind kind, const Tensor& x, const Reduction& r, int64_t keepdims) {
  if (r.none) return x;
  ir::Attrs attrs{{"keepdims", keepdims}};
  if (!r.axes.empty()) attrs["axes"] = r.axes;
  return n.op(kind, {x}, std::move(attrs));
}

// An order-reversing involution that cannot overflow, so min(x) = flip(max(flip(x))):
// -x for floats, -1 - x for integers (-x overflows at the signed minimum; on unsigned
// types the constant wraps to the maximum: max - x).
Result<Tensor> flip(NodeContext& n, const Tensor& x) {
  const ir::DType dtype = x.type.dtype;
  if (ir::is_float(dtype)) return n.op(OpKind::kNeg, {x});
  return n.op(OpKind::kSub, {n.constant_ints(dtype, {}, {-1}), x});
}

// log(sum(exp(x))) shifted by the maximum so exp cannot overflow. A non-finite maximum
// (an infinite or NaN element) is not subtracted, which keeps ONNX's inf/-inf/NaN results.
Result<Tensor> log_sum_exp(NodeContext& n, const Tensor& x, const Reduction& r) {
  const ir::DType dtype = x.type.dtype;
  CARVE_ASSIGN_OR_RETURN(Tensor m, reduce(n, OpKind::kReduceMax, x, r, 1));
  CARVE_ASSIGN_OR_RETURN(Tensor abs_m, n.op(OpKind::kAbs, {m}));
  Tensor inf = n.constant_doubles(dtype, {}, {std::numeric_limits<double>::infinity()});
  CARVE_ASSIGN_OR_RETURN(Tensor finite, n.op(OpKind::kLess, {abs_m, inf}));
  CARVE_ASSIGN_OR_RETURN(Tensor shift, n.op(OpKind::kWhere, {finite, m, n.constant_doubles(dtype, {}, {0.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor shifted, n.op(OpKind::kSub, {x, shift}));
  CARVE_ASSIGN_OR_RETURN(Tensor e, n.op(OpKind::kExp, {shifted}));
  CARVE_ASSIGN_OR_RETURN(Tensor s, reduce(n, OpKind::kReduceSum, e, r, r.keepdims));
  CARVE_ASSIGN_OR_RETURN(Tensor l, n.op(OpKind::kLog, {s}));
  if (!r.keepdims && !r.none) {
    CARVE_ASSIGN_OR_RETURN(shift, n.op(OpKind::kReshape, {shift}, {{"shape", l.type.shape.dims()}}));
  }
  return n.op(OpKind::kAdd, {l, shift});
}

template <Family family>
Status lower_reduce(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Reduction r, read_reduction(n));
  const ir::DType dtype = x.type.dtype;
  if (dtype == ir::DType::kBool) return n.unsupported("bool input (ONNX reductions take numbers)");
  constexpr bool float_only = family == Family::kL2 || family == Family::kLogSum || family == Family::kLogSumExp;
  if (float_only && !ir::is_float(dtype))
    return n.unsupported(fmt::format("{} input: carve computes {} in floating point only", ir::dtype_name(dtype),
                                     n.op_type()));
  // Not an ok Status: a Result made from one asserts (every branch below sets y).
  Result<Tensor> y = Status(ErrorCode::kInternal, "no lowering for the reduction family");
  switch (family) {
    case Family::kSum: y = reduce(n, OpKind::kReduceSum, x, r, r.keepdims); break;
    case Family::kMean: y = reduce(n, OpKind::kReduceMean, x, r, r.keepdims); break;
    case Family::kMax: y = reduce(n, OpKind::kReduceMax, x, r, r.keepdims); break;
    case Family::kProd: y = reduce(n, OpKind::kReduceProd, x, r, r.keepdims); break;
    case Family::kMin: {
      CARVE_ASSIGN_OR_RETURN(Tensor flipped, flip(n, x));
      CARVE_ASSIGN_OR_RETURN(Tensor m, reduce(n, OpKind::kReduceMax, flipped, r, r.keepdims));
      y = flip(n, m);
      break;
    }
    case Family::kL1: {
      CARVE_ASSIGN_OR_RETURN(Tensor a, n.op(OpKind::kAbs, {x}));
      y = reduce(n, OpKind::kReduceSum, a, r, r.keepdims);
      break;
    }
    case Family::kL2:
    case Family::kSumSquare: {
      CARVE_ASSIGN_OR_RETURN(Tensor sq, n.op(OpKind::kMul, {x, x}));
      y = reduce(n, OpKind::kReduceSum, sq, r, r.keepdims);
      if (family == Family::kL2 && y.ok()) y = n.op(OpKind::kSqrt, {*y});
      break;
    }
    case Family::kLogSum: {
      CARVE_ASSIGN_OR_RETURN(Tensor s, reduce(n, OpKind::kReduceSum, x, r, r.keepdims));
      y = n.op(OpKind::kLog, {s});
      break;
    }
    case Family::kLogSumExp: y = log_sum_exp(n, x, r); break;
  }
  if (!y.ok()) return y.status();
  return n.set_output(0, *y);
}

// DynamicQuantizeLinear(x f32) -> (y u8, scale f32, zero point u8), as ONNX's reference:
// scale = (max(0, max x) - min(0, min x)) / 255, zero point = clip(round(-min / scale),
// 0, 255) (the same as rounding the clipped value: the bounds are integers), y =
// clip(round(x / scale) + zero point, 0, 255); round is half to even.
Status lower_dynamic_quantize_linear(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const ir::DType dt = x.type.dtype;
  if (dt != ir::DType::kF32) return n.unsupported(fmt::format("{} input (ONNX defines float only)", ir::dtype_name(dt)));
  const Reduction all{{}, 0, false};
  Tensor zero = n.constant_doubles(dt, {}, {0.0});
  CARVE_ASSIGN_OR_RETURN(Tensor hi, reduce(n, OpKind::kReduceMax, x, all, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor neg_x, flip(n, x));
  CARVE_ASSIGN_OR_RETURN(Tensor neg_lo, reduce(n, OpKind::kReduceMax, neg_x, all, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor lo, flip(n, neg_lo));
  CARVE_ASSIGN_OR_RETURN(hi, n.op(OpKind::kMax, {hi, zero}));
  CARVE_ASSIGN_OR_RETURN(lo, n.op(OpKind::kMin, {lo, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor range, n.op(OpKind::kSub, {hi, lo}));
  CARVE_ASSIGN_OR_RETURN(Tensor scale, n.op(OpKind::kDiv, {range, n.constant_doubles(dt, {}, {255.0})}));
  CARVE_ASSIGN_OR_RETURN(Tensor lo_steps, n.op(OpKind::kDiv, {lo, scale}));
  CARVE_ASSIGN_OR_RETURN(Tensor neg_lo_steps, n.op(OpKind::kNeg, {lo_steps}));
  CARVE_ASSIGN_OR_RETURN(Tensor zp, round_and_saturate(n, neg_lo_steps, std::nullopt, ir::DType::kU8));
  CARVE_ASSIGN_OR_RETURN(Tensor zp_f32, n.op(OpKind::kCast, {zp}, {{"to", ir::dtype_name(dt)}}));
  CARVE_ASSIGN_OR_RETURN(Tensor steps, n.op(OpKind::kDiv, {x, scale}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, round_and_saturate(n, steps, zp_f32, ir::DType::kU8));
  CARVE_RETURN_IF_ERROR(n.set_output(0, y));
  CARVE_RETURN_IF_ERROR(n.set_output(1, scale));
  return n.set_output(2, zp);
}

// ArgMax/ArgMin (every opset: axis may be negative from 11, select_last_index from 12;
// the attributes' defaults cover the older forms).
template <OpKind kArg>
Status lower_arg(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t raw, n.attr_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw, x.type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(int64_t keepdims, n.attr_int("keepdims", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t last, n.attr_int("select_last_index", 0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(kArg, {x}, {{"axis", axis}, {"keepdims", int64_t{keepdims != 0}},
                                                     {"select_last_index", int64_t{last != 0}}}));
  return n.set_output(0, y);
}

}  // namespace

void register_reduce_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  const std::vector<std::string_view> attrs{"axes", "keepdims", "noop_with_empty_axes"};
  t["ReduceSum"] = {lower_reduce<Family::kSum>, attrs};
  t["ReduceMean"] = {lower_reduce<Family::kMean>, attrs};
  t["ReduceMax"] = {lower_reduce<Family::kMax>, attrs};
  t["ReduceMin"] = {lower_reduce<Family::kMin>, attrs};
  t["ReduceProd"] = {lower_reduce<Family::kProd>, attrs};
  t["ReduceL1"] = {lower_reduce<Family::kL1>, attrs};
  t["ReduceL2"] = {lower_reduce<Family::kL2>, attrs};
  t["ReduceSumSquare"] = {lower_reduce<Family::kSumSquare>, attrs};
  t["ReduceLogSum"] = {lower_reduce<Family::kLogSum>, attrs};
  t["ReduceLogSumExp"] = {lower_reduce<Family::kLogSumExp>, attrs};
  t["DynamicQuantizeLinear"] = {lower_dynamic_quantize_linear, {}};
  t["ArgMax"] = {lower_arg<OpKind::kArgMax>, {"axis", "keepdims", "select_last_index"}};
  t["ArgMin"] = {lower_arg<OpKind::kArgMin>, {"axis", "keepdims", "select_last_index"}};
}

}  // namespace carve::onnx::detail
