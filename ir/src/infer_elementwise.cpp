// Inference for unary, binary, comparison, where and cast.
#include "infer_internal.h"

namespace carve::ir::detail {
namespace {

// Transcendental ops only make sense on floats; neg/abs/relu/clip also take integers, and
// the rounding ops too (as identities, so integer graphs need no casts around them).
bool float_only(OpKind op) {
  switch (op) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kRelu:
    case OpKind::kClip:
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kRound:
    case OpKind::kTrunc:
      return false;
    default:
      return true;
  }
}

Result<Types> infer_unary(OpKind op, const TensorType& x, const AttrReader& attrs) {
  if (float_only(op)) {
    CARVE_RETURN_IF_ERROR(expect_float(x, "input"));
  } else {
    CARVE_RETURN_IF_ERROR(expect_numeric(x, "input"));
  }
  if (op == OpKind::kHardSigmoid) {
    CARVE_RETURN_IF_ERROR(attrs.get_float("alpha", 0.2).status());
    CARVE_RETURN_IF_ERROR(attrs.get_float("beta", 0.5).status());
  }
  if (op == OpKind::kClip) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    CARVE_ASSIGN_OR_RETURN(double lo, attrs.get_float("min", -kInf));
    CARVE_ASSIGN_OR_RETURN(double hi, attrs.get_float("max", kInf));
    if (!(lo <= hi)) {  // also rejects NaN
      return attr_error(fmt::format("attribute 'min' = {} must be <= 'max' = {}", lo, hi));
    }
  }
  return Types{x};
}

}  // namespace

Result<Types> infer_elementwise(OpKind op, Inputs in, const AttrReader& attrs) {
  if (is_unary_elementwise(op)) return infer_unary(op, in[0], attrs);

  if (is_binary_elementwise(op)) {
    CARVE_RETURN_IF_ERROR(expect_same_dtype(in[0], in[1], "operands"));
    if (!is_comparison(op)) CARVE_RETURN_IF_ERROR(expect_numeric(in[0], "operands"));
    if ((op == OpKind::kBitShiftLeft || op == OpKind::kBitShiftRight) && !is_unsigned_int(in[0].dtype)) {
      return type_error(fmt::format("bit shifts take unsigned integers, got {}", dtype_name(in[0].dtype)));
    }
    CARVE_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(in[0].shape, in[1].shape));
    DType dtype = is_comparison(op) ? DType::kBool : in[0].dtype;
    return Types{TensorType{dtype, std::move(shape)}};
  }

  if (op == OpKind::kWhere) {
    if (in[0].dtype != DType::kBool) {
      return type_error(fmt::format("condition must be bool, got {}", dtype_name(in[0].dtype)));
    }
    CARVE_RETURN_IF_ERROR(expect_same_dtype(in[1], in[2], "x and y"));
    const Shape shapes[] = {in[0].shape, in[1].shape, in[2].shape};
    CARVE_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(shapes));
    return Types{TensorType{in[1].dtype, std::move(shape)}};
  }

  // cast
  CARVE_ASSIGN_OR_RETURN(std::string to, attrs.get_string("to"));
  Result<DType> dtype = parse_dtype(to);
  if (!dtype.ok()) {
    return attr_error(fmt::format("attribute 'to' = \"{}\" is not a dtype", to));
  }
  return Types{TensorType{*dtype, in[0].shape}};
}

}  // namespace carve::ir::detail
