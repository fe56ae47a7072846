// Tensor-producing and indexing ONNX operators: Constant, ConstantOfShape, Range
// (known at import), Gather, Pad and Trilu (a constant mask through Where).
#include <onnx/onnx_pb.h>

#include <cmath>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

Status lower_constant(NodeContext& n) {
  if (const auto* a = n.attr("value")) {
    if (a->type() != ::onnx::AttributeProto::TENSOR) return n.invalid("attribute 'value' must be a tensor");
    Result<Tensor> t = decode_tensor(a->t(), n.ctx, true);
    if (!t.ok()) return t.status().with_context(n.where());
    t->data->name = n.name() + "/value";  // renamed after the output by set_output
    return n.set_output(0, *t);
  }
  if (n.has_attr("value_float")) {
    CARVE_ASSIGN_OR_RETURN(double v, n.attr_float("value_float"));
    return n.set_output(0, n.constant_doubles(ir::DType::kF32, {}, {v}));
  }
  if (n.has_attr("value_floats")) {
    CARVE_ASSIGN_OR_RETURN(std::vector<double> v, n.attr_floats("value_floats"));
    return n.set_output(0, n.constant_doubles(ir::DType::kF32, ir::Shape{static_cast<int64_t>(v.size())}, v));
  }
  if (n.has_attr("value_int")) {
    CARVE_ASSIGN_OR_RETURN(int64_t v, n.attr_int("value_int"));
    return n.set_output(0, n.constant_ints(ir::DType::kI64, {}, {v}));
  }
  if (n.has_attr("value_ints")) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attr_ints("value_ints"));
    return n.set_output(0, n.constant_ints(ir::DType::kI64, ir::Shape{static_cast<int64_t>(v.size())}, v));
  }
  return n.unsupported("a Constant needs one of value, value_float(s), value_int(s)");
}

Status lower_constant_of_shape(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.const_ints(0, "shape"));
  ir::Shape shape(dims);
  if (Status valid = shape.validate(); !valid.ok()) return n.error(ErrorCode::kShapeError, valid.message());
  ir::DType dtype = ir::DType::kF32;
  double fill = 0.0;
  if (const auto* a = n.attr("value")) {
    if (a->type() != ::onnx::AttributeProto::TENSOR) return n.invalid("attribute 'value' must be a tensor");
    Result<Tensor> t = decode_tensor(a->t(), n.ctx, true);
    if (!t.ok()) return t.status().with_context(n.where());
    if (*t->type.shape.num_elements() != 1) return n.invalid("attribute 'value' must hold one element");
    dtype = t->type.dtype;
    fill = to_doubles(*t)[0];
  }
  // The fill goes through an int64/double vector: 8 bytes per element.
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{dtype, shape}, sizeof(int64_t)));
  const auto count = static_cast<size_t>(*shape.num_elements());
  if (ir::is_integer(dtype) || dtype == ir::DType::kBool) {
    // Integers go through int64 so large fill values are exact.
    return n.set_output(0, n.constant_ints(dtype, shape, std::vector<int64_t>(count, static_cast<int64_t>(fill))));
  }
  return n.set_output(0, n.constant_doubles(dtype, shape, std::vector<double>(count, fill)));
}

// Range(start, limit, delta): ceil((limit - start) / delta) elements, at least 0.
Status lower_range(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(ir::TensorType type, n.input_type(0));
  CARVE_ASSIGN_OR_RETURN(double start, n.const_scalar(0, "start"));
  CARVE_ASSIGN_OR_RETURN(double limit, n.const_scalar(1, "limit"));
  CARVE_ASSIGN_OR_RETURN(double delta, n.const_scalar(2, "delta"));
  if (delta == 0) return n.invalid("delta is 0");
  const double steps = std::max(std::ceil((limit - start) / delta), 0.0);
  // NaN or past int64 (converting it would be undefined); the size cap then bounds it.
  if (!(steps < 0x1p62)) return n.invalid(fmt::format("Range of {} to {} by {} has too many elements", start, limit, delta));
  const auto count = static_cast<int64_t>(steps);
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{type.dtype, ir::Shape{count}}, sizeof(int64_t)));
  if (ir::is_integer(type.dtype)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.const_ints(0, "start"));
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> d, n.const_ints(2, "delta"));
    std::vector<int64_t> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = s[0] + i * d[0];
    return n.set_output(0, n.constant_ints(type.dtype, ir::Shape{count}, v));
  }
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = start + static_cast<double>(i) * delta;
  return n.set_output(0, n.constant_doubles(type.dtype, ir::Shape{count}, v));
}

// Gather; known negative indices are wrapped here so kernels only see [0, n).
Status lower_gather(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor data, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(1));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, data.type.shape.rank()));
  if (indices.is_known() && !data.is_known()) {
    std::vector<int64_t> idx = to_int64s(indices);
    const int64_t extent = data.type.shape[static_cast<int>(axis)];
    for (int64_t& i : idx) {
      if (i < -extent || i >= extent) return n.error(ErrorCode::kOutOfBounds, fmt::format("index {} outside [-{}, {})", i, extent, extent));
      if (i < 0) i += extent;
    }
    indices = n.constant_ints(ir::DType::kI64, indices.type.shape, idx);
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGather, {data, indices}, {{"axis", axis}}));
  return n.set_output(0, y);
}

// Pad, constant mode: pads/value are attributes before opset 11, constant inputs after
// (opset 18 adds axes). Negative pads (cropping) are not supported.
Status lower_pad(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "constant"));
  if (mode != "constant") return n.unsupported(fmt::format("mode='{}' (only 'constant')", mode));
  const int64_t rank = x.type.shape.rank();
  std::vector<int64_t> pads;
  double value = 0.0;
  if (n.opset() < 11) {
    CARVE_ASSIGN_OR_RETURN(pads, n.attr_ints("pads"));
    CARVE_ASSIGN_OR_RETURN(value, n.attr_float("value", 0.0));
  } else {
    CARVE_ASSIGN_OR_RETURN(pads, n.const_ints(1, "pads"));
    if (n.has_input(2)) {
      CARVE_ASSIGN_OR_RETURN(value, n.const_scalar(2, "constant_value"));
    }
  }
  if (n.has_input(3)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, n.const_ints(3, "axes"));
    if (pads.size() != 2 * axes.size()) return n.invalid("pads must have 2 values per axis");
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      CARVE_ASSIGN_OR_RETURN(int64_t a, normalize_axis(n, axes[i], rank));
      full[static_cast<size_t>(a)] = pads[i];
      full[static_cast<size_t>(a + rank)] = pads[i + axes.size()];
    }
    pads = std::move(full);
  }
  for (int64_t p : pads)
    if (p < 0) return n.unsupported("negative pads");
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kPad, {x}, {{"pads", pads}, {"value", value}}));
  return n.set_output(0, y);
}

// Trilu keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two
// dims: where(constant mask, x, 0).
Status lower_trilu(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t upper, n.attr_int("upper", 1));
  int64_t k = 0;
  if (n.has_input(1)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> kv, n.const_ints(1, "k"));
    if (kv.size() != 1) return n.invalid("k must hold one element");
    k = kv[0];
  }
  const ir::Shape& s = x.type.shape;
  if (s.rank() < 2) return n.invalid(fmt::format("input of rank {} (needs >= 2)", s.rank()));
  const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  // The mask is built at import whatever x is (8 bytes per element on the way).
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{ir::DType::kBool, ir::Shape{rows, cols}}, sizeof(int64_t)));
  std::vector<int64_t> mask(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask[static_cast<size_t>(i * cols + j)] = upper ? (j - i >= k) : (j - i <= k);
  Tensor m = n.constant_ints(ir::DType::kBool, ir::Shape{rows, cols}, mask);
  Tensor zero = n.constant_doubles(x.type.dtype, {}, {0.0});
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {m, x, zero}));
  return n.set_output(0, y);
}

}  // namespace

void register_tensor_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Constant"] = {lower_constant, {"value", "value_float", "value_floats", "value_int", "value_ints"}};
  t["ConstantOfShape"] = {lower_constant_of_shape, {"value"}};
  t["Range"] = {lower_range, {}};
  t["Gather"] = {lower_gather, {"axis"}};
  t["Pad"] = {lower_pad, {"mode", "pads", "value"}};
  t["Trilu"] = {lower_trilu, {"upper"}};
}

}  // namespace carve::onnx::detail
