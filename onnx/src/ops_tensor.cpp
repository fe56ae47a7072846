// Tensor-producing and indexing ONNX operators: Constant, ConstantOfShape, Range
// (known at import), Gather, Pad, Trilu (a constant mask through Where), EyeLike (known
// at import) and Hardmax.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>
#include <numeric>

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
  int64_t fill_int = 0;
  if (const auto* a = n.attr("value")) {
    if (a->type() != ::onnx::AttributeProto::TENSOR) return n.invalid("attribute 'value' must be a tensor");
    Result<Tensor> t = decode_tensor(a->t(), n.ctx, true);
    if (!t.ok()) return t.status().with_context(n.where());
    if (*t->type.shape.num_elements() != 1) return n.invalid("attribute 'value' must hold one element");
    dtype = t->type.dtype;
    fill = to_doubles(*t)[0];
    fill_int = to_int64s(*t)[0];  // integers exactly (u64 modulo 2^64)
  }
  // The fill goes through an int64/double vector: 8 bytes per element.
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{dtype, shape}, sizeof(int64_t)));
  const auto count = static_cast<size_t>(*shape.num_elements());
  if (ir::is_integer(dtype) || dtype == ir::DType::kBool) {
    // Integers go through int64 so large fill values are exact.
    return n.set_output(0, n.constant_ints(dtype, shape, std::vector<int64_t>(count, fill_int)));
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

// GatherElements. Known indices are checked here, so a bad one names the node at import
// (at run time the reference reports it and the kernels write zeros).
Status lower_gather_elements(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor data, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(1));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, data.type.shape.rank()));
  if (indices.is_known()) {
    const int64_t extent = data.type.shape[static_cast<int>(axis)];
    for (int64_t i : to_int64s(indices)) {
      if (i < -extent || i >= extent) return n.error(ErrorCode::kOutOfBounds, fmt::format("index {} outside [-{}, {})", i, extent, extent));
    }
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGatherElements, {data, indices}, {{"axis", axis}}));
  return n.set_output(0, y);
}

// Pad, constant mode: pads/value are attributes before opset 11, constant inputs after
// (opset 18 adds axes). Negative pads (cropping) are not supported.
// Edge and reflect padding as copies: per padded axis, one-wide slices that repeat the
// edge element (edge) or mirror the elements next to it (reflect, numpy's: the edge itself
// is not repeated), concatenated around x. One slice per padded position: meant for the
// small pads models use (capped).
constexpr int64_t kMaxCopiedPads = 256;
Result<Tensor> pad_by_copies(NodeContext& n, Tensor x, const std::vector<int64_t>& pads, bool reflect) {
  const int64_t rank = x.type.shape.rank();
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t before = pads[static_cast<size_t>(a)], after = pads[static_cast<size_t>(a + rank)];
    const int64_t dim = x.type.shape[static_cast<int>(a)];
    if (before == 0 && after == 0) continue;
    if (before + after > kMaxCopiedPads)
      return n.unsupported(fmt::format("{} pads of {} on axis {} (at most {})", reflect ? "reflect" : "edge",
                                       before + after, a, kMaxCopiedPads));
    if (dim == 0 || (reflect && (before >= dim || after >= dim)))
      return n.invalid(fmt::format("{} pads {} and {} on axis {} of size {}", reflect ? "reflect" : "edge", before,
                                   after, a, dim));
    auto element = [&](int64_t i) {
      return n.op(OpKind::kSlice, {x},
                  {{"starts", std::vector<int64_t>{i}}, {"ends", std::vector<int64_t>{i + 1}}, {"axes", std::vector<int64_t>{a}}});
    };
    std::vector<Tensor> parts;
    for (int64_t p = before; p >= 1; --p) {
      CARVE_ASSIGN_OR_RETURN(Tensor t, element(reflect ? p : 0));
      parts.push_back(std::move(t));
    }
    parts.push_back(x);
    for (int64_t p = 1; p <= after; ++p) {
      CARVE_ASSIGN_OR_RETURN(Tensor t, element(reflect ? dim - 1 - p : dim - 1));
      parts.push_back(std::move(t));
    }
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kConcat, std::move(parts), {{"axis", a}}));
  }
  return x;
}

Status lower_pad(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return n.unsupported(fmt::format("mode='{}' (constant, edge and reflect are)", mode));
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
  if (pads.size() != static_cast<size_t>(2 * rank)) return n.invalid(fmt::format("{} pads for rank {}", pads.size(), rank));
  if (mode != "constant") {
    CARVE_ASSIGN_OR_RETURN(Tensor y, pad_by_copies(n, x, pads, mode == "reflect"));
    return n.set_output(0, y);
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kPad, {x}, {{"pads", pads}, {"value", value}}));
  return n.set_output(0, y);
}

// CumSum as a log-step prefix sum: y += y shifted by 1, 2, 4, ... along the axis (zeros
// shifted in), so each output sums exactly its prefix, in another order than one by one
// (an inf or NaN reaches only the outputs after it). exclusive: x shifted by one first;
// reverse: the axis flipped before and after.
Status lower_cumsum(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const ir::DType dt = x.type.dtype;
  if (!ir::is_float(dt) && dt != ir::DType::kI32 && dt != ir::DType::kI64)
    return n.unsupported(fmt::format("CumSum of {}", ir::dtype_name(dt)));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, n.const_ints(1, "axis"));
  if (axes.size() != 1) return n.invalid("axis must hold one element");
  const int64_t rank = x.type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, axes[0], rank));
  CARVE_ASSIGN_OR_RETURN(int64_t exclusive, n.attr_int("exclusive", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t reverse, n.attr_int("reverse", 0));
  const int64_t len = x.type.shape[static_cast<int>(axis)];
  auto flip = [&](const Tensor& t) {
    return n.op(OpKind::kSlice, {t}, {{"starts", std::vector<int64_t>{-1}}, {"ends", std::vector<int64_t>{-len - 1}},
                                      {"axes", std::vector<int64_t>{axis}}, {"steps", std::vector<int64_t>{-1}}});
  };
  auto shift = [&](const Tensor& t, int64_t by) -> Result<Tensor> {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(axis)] = by;
    CARVE_ASSIGN_OR_RETURN(Tensor padded, n.op(OpKind::kPad, {t}, {{"pads", pads}, {"value", 0.0}}));
    return n.op(OpKind::kSlice, {padded}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{len}},
                                           {"axes", std::vector<int64_t>{axis}}});
  };
  if (reverse != 0) {
    CARVE_ASSIGN_OR_RETURN(x, flip(x));
  }
  if (exclusive != 0) {
    CARVE_ASSIGN_OR_RETURN(x, shift(x, 1));
  }
  for (int64_t by = 1; by < len; by *= 2) {
    CARVE_ASSIGN_OR_RETURN(Tensor shifted, shift(x, by));
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kAdd, {x, shifted}));
  }
  if (reverse != 0) {
    CARVE_ASSIGN_OR_RETURN(x, flip(x));
  }
  return n.set_output(0, x);
}

// OneHot: where(unsqueeze(indices) == range(depth), on, off), the range along the new
// axis; negative indices count from depth, others outside [0, depth) match nothing (all
// off). Float indices are truncated, as ONNX's reference does.
Status lower_one_hot(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor indices, n.input(0));
  CARVE_ASSIGN_OR_RETURN(double depth_value, n.const_scalar(1, "depth"));
  CARVE_ASSIGN_OR_RETURN(Tensor values, n.input(2));
  if (Result<int64_t> count = values.type.shape.num_elements(); !count.ok() || *count != 2)
    return n.invalid("values must hold [off, on]");
  const auto depth = static_cast<int64_t>(depth_value);
  if (!(depth_value >= 1) || depth > (int64_t{1} << 24)) return n.invalid(fmt::format("depth {}", depth_value));
  const int64_t rank = indices.type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", -1));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, rank + 1));
  Tensor k = indices;
  if (indices.type.dtype != ir::DType::kI64) {
    CARVE_ASSIGN_OR_RETURN(k, n.op(OpKind::kCast, {indices}, {{"to", std::string(ir::dtype_name(ir::DType::kI64))}}));
  }
  Tensor zero = n.constant_ints(ir::DType::kI64, ir::Shape{}, {0}), d = n.constant_ints(ir::DType::kI64, ir::Shape{}, {depth});
  CARVE_ASSIGN_OR_RETURN(Tensor negative, n.op(OpKind::kLess, {k, zero}));
  CARVE_ASSIGN_OR_RETURN(Tensor wrapped, n.op(OpKind::kAdd, {k, d}));
  CARVE_ASSIGN_OR_RETURN(k, n.op(OpKind::kWhere, {negative, wrapped, k}));
  CARVE_ASSIGN_OR_RETURN(k, n.op(OpKind::kUnsqueeze, {k}, {{"axes", std::vector<int64_t>{axis}}}));
  std::vector<int64_t> range_dims(static_cast<size_t>(rank + 1), 1), range(static_cast<size_t>(depth));
  range_dims[static_cast<size_t>(axis)] = depth;
  std::iota(range.begin(), range.end(), 0);
  CARVE_ASSIGN_OR_RETURN(Tensor hot, n.op(OpKind::kEqual, {k, n.constant_ints(ir::DType::kI64, ir::Shape(range_dims), range)}));
  auto pick = [&](int64_t i) {
    return n.op(OpKind::kSlice, {values}, {{"starts", std::vector<int64_t>{i}}, {"ends", std::vector<int64_t>{i + 1}}});
  };
  CARVE_ASSIGN_OR_RETURN(Tensor off, pick(0));
  CARVE_ASSIGN_OR_RETURN(Tensor on, pick(1));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {hot, on, off}));
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

// EyeLike: a constant of the input's shape (2-D) with ones on diagonal k; its values
// never depend on the input's contents.
Status lower_eye_like(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(ir::TensorType type, n.input_type(0));
  if (type.shape.rank() != 2) return n.invalid(fmt::format("input of rank {} (needs 2)", type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(int64_t k, n.attr_int("k", 0));
  ir::DType dtype = type.dtype;
  if (n.has_attr("dtype")) {
    CARVE_ASSIGN_OR_RETURN(int64_t onnx_dtype, n.attr_int("dtype"));
    Result<ir::DType> d = dtype_from_onnx(static_cast<int32_t>(onnx_dtype));
    if (!d.ok()) return n.unsupported(d.status().message());
    dtype = *d;
  }
  const int64_t rows = type.shape[0], cols = type.shape[1];
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{dtype, type.shape}, sizeof(int64_t)));
  std::vector<int64_t> eye(static_cast<size_t>(rows * cols), 0);
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols) eye[static_cast<size_t>(i * cols + i + k)] = 1;
  return n.set_output(0, n.constant_ints(dtype, type.shape, eye));
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere. The first maximum's
// index is the smallest index whose element equals the axis maximum: a min over
// where(x == max, index, extent), taken as -1 - max(-1 - .) in i32. Before opset 13 the
// input is flattened to 2-D at the axis (default 1) and the last dim is used.
Status lower_hardmax(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  if (!ir::is_float(x.type.dtype))
    return n.unsupported(fmt::format("{} input (ONNX defines Hardmax on floats)", ir::dtype_name(x.type.dtype)));
  const ir::Shape shape = x.type.shape;
  const int64_t rank = shape.rank();
  if (rank == 0) return n.invalid("scalar input (needs rank >= 1)");
  CARVE_ASSIGN_OR_RETURN(int64_t raw, n.attr_int("axis", n.opset() < 13 ? 1 : -1));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw, rank));
  if (n.opset() < 13 && axis != rank - 1) {
    const int64_t outer = std::accumulate(shape.dims().begin(), shape.dims().begin() + axis, int64_t{1}, std::multiplies<>());
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{outer, -1}}}));
    axis = 1;
  }
  const int64_t extent = x.type.shape[static_cast<int>(axis)];
  if (extent > std::numeric_limits<int32_t>::max() - 1) return n.unsupported(fmt::format("axis of {} elements", extent));
  std::vector<int64_t> index_dims(static_cast<size_t>(x.type.shape.rank() - axis), 1);
  index_dims[0] = extent;
  std::vector<int64_t> indices(static_cast<size_t>(extent));
  std::iota(indices.begin(), indices.end(), 0);
  Tensor index = n.constant_ints(ir::DType::kI32, ir::Shape(index_dims), indices);
  ir::Attrs reduce{{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}};
  CARVE_ASSIGN_OR_RETURN(Tensor m, n.op(OpKind::kReduceMax, {x}, reduce));
  CARVE_ASSIGN_OR_RETURN(Tensor is_max, n.op(OpKind::kEqual, {x, m}));
  Tensor minus_one = n.constant_ints(ir::DType::kI32, {}, {-1});
  CARVE_ASSIGN_OR_RETURN(Tensor flipped, n.op(OpKind::kSub, {minus_one, index}));
  CARVE_ASSIGN_OR_RETURN(Tensor candidates,
                         n.op(OpKind::kWhere, {is_max, flipped, n.constant_ints(ir::DType::kI32, {}, {-1 - extent})}));
  CARVE_ASSIGN_OR_RETURN(Tensor first_flipped, n.op(OpKind::kReduceMax, {candidates}, reduce));
  CARVE_ASSIGN_OR_RETURN(Tensor hot, n.op(OpKind::kEqual, {flipped, first_flipped}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kCast, {hot}, {{"to", ir::dtype_name(x.type.dtype)}}));
  if (y.type.shape != shape) {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReshape, {y}, {{"shape", shape.dims()}}));
  }
  return n.set_output(0, y);
}

}  // namespace

void register_tensor_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Constant"] = {lower_constant, {"value", "value_float", "value_floats", "value_int", "value_ints"}};
  t["ConstantOfShape"] = {lower_constant_of_shape, {"value"}};
  t["Range"] = {lower_range, {}};
  t["Gather"] = {lower_gather, {"axis"}};
  t["CumSum"] = {lower_cumsum, {"exclusive", "reverse"}};
  t["OneHot"] = {lower_one_hot, {"axis"}};
  t["GatherElements"] = {lower_gather_elements, {"axis"}};
  t["Pad"] = {lower_pad, {"mode", "pads", "value"}};
  t["Trilu"] = {lower_trilu, {"upper"}};
  t["EyeLike"] = {lower_eye_like, {"dtype", "k"}};
  t["Hardmax"] = {lower_hardmax, {"axis"}};
}

}  // namespace carve::onnx::detail
