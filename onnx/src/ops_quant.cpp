// Quantized ONNX operators, lowered onto carve's integer and float ops (the IR has no
// quantized ops; these few steps express every form):
//  - QuantizeLinear: y = saturate(round(x / scale) + zero_point), round half to even, in f32;
//  - DequantizeLinear: y = (x - zero_point) * scale, the difference taken in integers;
//  - MatMulInteger, ConvInteger: the 8-bit operands widened to i32 minus their zero points,
//    multiplied and accumulated by an i32 matmul / conv2d (padding then reads zero, which
//    is the zero point, as ONNX pads; sums past the i32 range wrap);
//  - QLinearMatMul, QLinearConv: that i32 accumulator (plus QLinearConv's i32 bias)
//    requantized: saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zero_point), in
//    f32 as ONNX Runtime does.
// A scale or zero point is per tensor (one element) or per axis (1-D, one per index of
// the axis); it is reshaped to broadcast against its data.
#include <onnx/onnx_pb.h>

#include <optional>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::DType;
using ir::OpKind;

Result<Tensor> cast_to(NodeContext& n, const Tensor& t, DType dtype) {
  if (t.type.dtype == dtype) return t;
  return n.op(OpKind::kCast, {t}, {{"to", std::string(ir::dtype_name(dtype))}});
}

// The values a quantized dtype holds (the saturation bounds).
struct IntRange {
  double lo, hi;
};
Result<IntRange> quantized_range(const NodeContext& n, DType dtype, std::string_view what) {
  switch (dtype) {
    case DType::kU8: return IntRange{0, 255};
    case DType::kI8: return IntRange{-128, 127};
    case DType::kU16: return IntRange{0, 65535};
    case DType::kI16: return IntRange{-32768, 32767};
    default: break;
  }
  return n.unsupported(fmt::format("{} of dtype {}: carve quantizes to u8, i8, u16 and i16 only", what,
                                   ir::dtype_name(dtype)));
}

// A per-tensor scale or zero point: a scalar or a 1-D tensor of one element.
bool is_one_element(const ir::Shape& s) {
  const Result<int64_t> count = s.num_elements();
  return s.rank() <= 1 && count.ok() && *count == 1;
}

// `param` (a scale or zero point, input `index`) shaped to broadcast against data of rank
// `rank`: one element -> a scalar; 1-D with `dim` elements -> [dim, 1, ...] from `axis`
// on. axis < 0: the data has no such axis (per tensor only).
Result<Tensor> along_axis(NodeContext& n, const Tensor& param, int index, int64_t axis, int64_t rank, int64_t dim) {
  const ir::Shape& s = param.type.shape;
  if (is_one_element(s)) {
    if (s.rank() == 0) return param;
    return n.op(OpKind::kReshape, {param}, {{"shape", std::vector<int64_t>{}}});
  }
  if (axis >= 0 && s.rank() == 1 && s[0] == dim) {
    std::vector<int64_t> dims(static_cast<size_t>(rank - axis), 1);
    dims[0] = dim;
    return n.op(OpKind::kReshape, {param}, {{"shape", dims}});
  }
  if (axis < 0) return n.invalid(fmt::format("input {} of shape {} must have one element", index, s.to_string()));
  return n.invalid(fmt::format("input {} of shape {} is neither one element nor 1-D with the {} elements of axis {}",
                               index, s.to_string(), dim, axis));
}

// Input `index` (a scale: any float dtype) as f32, shaped by along_axis.
Result<Tensor> scale_input(NodeContext& n, int index, int64_t axis, int64_t rank, int64_t dim) {
  CARVE_ASSIGN_OR_RETURN(Tensor scale, n.input(index));
  if (!ir::is_float(scale.type.dtype))
    return n.invalid(fmt::format("input {} (a scale) is {}, not floating point", index, ir::dtype_name(scale.type.dtype)));
  CARVE_ASSIGN_OR_RETURN(scale, cast_to(n, scale, DType::kF32));
  return along_axis(n, scale, index, axis, rank, dim);
}

// Input `index` (a zero point, of `data_dtype` as ONNX requires) as `wide`, shaped by
// along_axis; nullopt when omitted (zero).
Result<std::optional<Tensor>> zero_point_input(NodeContext& n, int index, DType data_dtype, DType wide, int64_t axis,
                                               int64_t rank, int64_t dim) {
  if (!n.has_input(index)) return std::optional<Tensor>();
  CARVE_ASSIGN_OR_RETURN(Tensor zp, n.input(index));
  if (zp.type.dtype != data_dtype)
    return n.invalid(fmt::format("input {} (a zero point) is {} for {} data", index, ir::dtype_name(zp.type.dtype),
                                 ir::dtype_name(data_dtype)));
  CARVE_ASSIGN_OR_RETURN(zp, cast_to(n, zp, wide));
  CARVE_ASSIGN_OR_RETURN(zp, along_axis(n, zp, index, axis, rank, dim));
  return std::optional<Tensor>(std::move(zp));
}

// Integer input `index` (u8 or i8) widened to i32 minus its zero point (input `zp_index`)
// taken per tensor or along `axis` (< 0: per tensor only).
Result<Tensor> shifted_operand(NodeContext& n, int index, int zp_index, int64_t axis) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(index));
  const DType dtype = x.type.dtype;
  if (dtype != DType::kU8 && dtype != DType::kI8)
    return n.unsupported(fmt::format("input {} is {}; ONNX defines u8 and i8", index, ir::dtype_name(dtype)));
  const int64_t rank = x.type.shape.rank();
  if (axis >= rank) axis = -1;  // a malformed rank: the matmul / conv names it
  const int64_t dim = axis >= 0 ? x.type.shape[static_cast<int>(axis)] : 0;
  CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> zp, zero_point_input(n, zp_index, dtype, DType::kI32, axis, rank, dim));
  CARVE_ASSIGN_OR_RETURN(x, cast_to(n, x, DType::kI32));
  if (!zp) return x;
  return n.op(OpKind::kSub, {x, *zp});
}

// The axis of a per-axis QuantizeLinear/DequantizeLinear on data of `rank`; -1 for a
// one-element scale (axis is then ignored, as ONNX does) and before opset 13 (the scale
// must have one element, which along_axis checks).
Result<int64_t> quantize_axis(const NodeContext& n, int64_t rank) {
  CARVE_ASSIGN_OR_RETURN(int64_t block_size, n.attr_int("block_size", 0));
  if (block_size != 0) return n.unsupported("blocked quantization (block_size != 0)");
  CARVE_ASSIGN_OR_RETURN(ir::TensorType scale, n.input_type(1));
  if (n.opset() < 13 || is_one_element(scale.shape)) return int64_t{-1};
  CARVE_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", 1));
  return normalize_axis(n, axis, rank);
}

// QuantizeLinear(x, y_scale[, y_zero_point]): the output dtype is the zero point's, else
// output_dtype (opset 21), else u8.
Status lower_quantize_linear(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const DType x_dtype = x.type.dtype;
  if ((!ir::is_float(x_dtype) && x_dtype != DType::kI32) || x_dtype == DType::kF64)
    return n.invalid(fmt::format("input 0 is {}; ONNX quantizes f32, f16, bf16 and i32", ir::dtype_name(x_dtype)));
  CARVE_ASSIGN_OR_RETURN(int64_t onnx_dtype, n.attr_int("output_dtype", 0));
  DType dtype = DType::kU8;
  if (onnx_dtype != 0) {
    CARVE_ASSIGN_OR_RETURN(dtype, dtype_from_onnx(static_cast<int32_t>(onnx_dtype)));
  }
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(ir::TensorType zp_type, n.input_type(2));
    if (onnx_dtype != 0 && zp_type.dtype != dtype)
      return n.invalid(fmt::format("output_dtype {} differs from the zero point's {}", ir::dtype_name(dtype),
                                   ir::dtype_name(zp_type.dtype)));
    dtype = zp_type.dtype;
  }
  CARVE_RETURN_IF_ERROR(quantized_range(n, dtype, "output").status());
  const int64_t rank = x.type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t axis, quantize_axis(n, rank));
  const int64_t dim = axis >= 0 ? x.type.shape[static_cast<int>(axis)] : 0;
  CARVE_ASSIGN_OR_RETURN(Tensor scale, scale_input(n, 1, axis, rank, dim));
  CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> zp, zero_point_input(n, 2, dtype, DType::kF32, axis, rank, dim));
  CARVE_ASSIGN_OR_RETURN(x, cast_to(n, x, DType::kF32));
  CARVE_ASSIGN_OR_RETURN(Tensor steps, n.op(OpKind::kDiv, {x, scale}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, round_and_saturate(n, steps, zp, dtype));
  return n.set_output(0, y);
}

// DequantizeLinear(x, x_scale[, x_zero_point]): f32 out, the scale's dtype from opset 19.
Status lower_dequantize_linear(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const DType x_dtype = x.type.dtype;
  // i32 data (whose zero point ONNX fixes at 0) is shifted in i64: no overflow.
  const DType wide = x_dtype == DType::kI32 ? DType::kI64 : DType::kI32;
  if (x_dtype != DType::kI32) CARVE_RETURN_IF_ERROR(quantized_range(n, x_dtype, "input 0").status());
  const int64_t rank = x.type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t axis, quantize_axis(n, rank));
  const int64_t dim = axis >= 0 ? x.type.shape[static_cast<int>(axis)] : 0;
  CARVE_ASSIGN_OR_RETURN(ir::TensorType scale_type, n.input_type(1));
  CARVE_ASSIGN_OR_RETURN(Tensor scale, scale_input(n, 1, axis, rank, dim));
  CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> zp, zero_point_input(n, 2, x_dtype, wide, axis, rank, dim));
  CARVE_ASSIGN_OR_RETURN(x, cast_to(n, x, wide));
  if (zp) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kSub, {x, *zp}));
  }
  CARVE_ASSIGN_OR_RETURN(x, cast_to(n, x, DType::kF32));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMul, {x, scale}));
  CARVE_ASSIGN_OR_RETURN(y, cast_to(n, y, n.opset() >= 19 ? scale_type.dtype : DType::kF32));
  return n.set_output(0, y);
}

// The per-row axis of a matmul's a (rows: dim -2) and per-column axis of its b (dim -1);
// -1 for a vector (1-D promotion leaves it neither).
int64_t row_axis(const Tensor& a) { return a.type.shape.rank() >= 2 ? a.type.shape.rank() - 2 : -1; }
int64_t column_axis(const Tensor& b) { return b.type.shape.rank() >= 2 ? b.type.shape.rank() - 1 : -1; }

// The i32 product of inputs a_index and b_index minus their zero points.
Result<Tensor> integer_matmul(NodeContext& n, int a_index, int a_zp_index, int b_index, int b_zp_index) {
  CARVE_ASSIGN_OR_RETURN(Tensor a, n.input(a_index));
  CARVE_ASSIGN_OR_RETURN(Tensor b, n.input(b_index));
  CARVE_ASSIGN_OR_RETURN(a, shifted_operand(n, a_index, a_zp_index, row_axis(a)));
  CARVE_ASSIGN_OR_RETURN(b, shifted_operand(n, b_index, b_zp_index, column_axis(b)));
  return n.op(OpKind::kMatmul, {a, b});
}

// MatMulInteger(A, B[, a_zero_point, b_zero_point]) -> i32.
Status lower_matmul_integer(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor y, integer_matmul(n, 0, 2, 1, 3));
  return n.set_output(0, y);
}

// acc * (a_scale * b_scale / y_scale), rounded, plus y_zero_point, saturated to its dtype.
// The scales are inputs a_scale, a_scale + 3 (b_scale) and a_scale + 5 (y_scale, per tensor)
// as in QLinearMatMul and QLinearConv; a_axis/b_axis place them along `acc`.
Result<Tensor> requantize(NodeContext& n, const Tensor& acc, int a_scale, int64_t a_axis, int64_t a_dim, int64_t b_axis,
                          int64_t b_dim) {
  const int64_t rank = acc.type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(Tensor sa, scale_input(n, a_scale, a_axis, rank, a_dim));
  CARVE_ASSIGN_OR_RETURN(Tensor sb, scale_input(n, a_scale + 3, b_axis, rank, b_dim));
  CARVE_ASSIGN_OR_RETURN(Tensor sy, scale_input(n, a_scale + 5, -1, rank, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor multiplier, n.op(OpKind::kMul, {sa, sb}));
  CARVE_ASSIGN_OR_RETURN(multiplier, n.op(OpKind::kDiv, {multiplier, sy}));
  const int y_zp = a_scale + 6;
  DType dtype = DType::kU8;
  if (n.has_input(y_zp)) {
    CARVE_ASSIGN_OR_RETURN(ir::TensorType zp_type, n.input_type(y_zp));
    dtype = zp_type.dtype;
  }
  CARVE_ASSIGN_OR_RETURN(std::optional<Tensor> zp, zero_point_input(n, y_zp, dtype, DType::kF32, -1, rank, 0));
  CARVE_ASSIGN_OR_RETURN(Tensor v, cast_to(n, acc, DType::kF32));
  CARVE_ASSIGN_OR_RETURN(v, n.op(OpKind::kMul, {v, multiplier}));
  return round_and_saturate(n, v, zp, dtype);
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point).
Status lower_qlinear_matmul(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor acc, integer_matmul(n, 0, 2, 3, 5));
  CARVE_ASSIGN_OR_RETURN(Tensor a, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor b, n.input(3));
  // a's rows and b's columns are the output's last two dims (or its last, for a vector).
  const int64_t rank = acc.type.shape.rank();
  const int64_t a_axis = row_axis(a) >= 0 && column_axis(b) >= 0 ? rank - 2 : row_axis(a) >= 0 ? rank - 1 : -1;
  const int64_t b_axis = column_axis(b) >= 0 ? rank - 1 : -1;
  const int64_t a_dim = row_axis(a) >= 0 ? a.type.shape[static_cast<int>(row_axis(a))] : 0;
  const int64_t b_dim = column_axis(b) >= 0 ? b.type.shape[static_cast<int>(column_axis(b))] : 0;
  CARVE_ASSIGN_OR_RETURN(Tensor y, requantize(n, acc, 1, a_axis, a_dim, b_axis, b_dim));
  return n.set_output(0, y);
}

// The i32 convolution of inputs x_index and w_index minus their zero points (x's per
// tensor, w's per tensor or per output channel), plus an optional i32 bias input.
Result<Tensor> integer_conv(NodeContext& n, int x_index, int x_zp_index, int w_index, int w_zp_index,
                            std::optional<int> bias_index) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, shifted_operand(n, x_index, x_zp_index, -1));
  CARVE_ASSIGN_OR_RETURN(Tensor w, shifted_operand(n, w_index, w_zp_index, 0));
  std::optional<Tensor> bias;
  if (bias_index && n.has_input(*bias_index)) {
    CARVE_ASSIGN_OR_RETURN(bias, n.input(*bias_index));
    if (bias->type.dtype != DType::kI32)
      return n.invalid(fmt::format("input {} (the bias) is {}, not i32", *bias_index, ir::dtype_name(bias->type.dtype)));
  }
  return conv(n, std::move(x), std::move(w), std::move(bias));
}

// ConvInteger(x, w[, x_zero_point, w_zero_point]) -> i32.
Status lower_conv_integer(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor y, integer_conv(n, 0, 2, 1, 3, std::nullopt));
  return n.set_output(0, y);
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point[, B]).
Status lower_qlinear_conv(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor acc, integer_conv(n, 0, 2, 3, 5, 8));
  CARVE_ASSIGN_OR_RETURN(Tensor y, requantize(n, acc, 1, -1, 0, 1, acc.type.shape[1]));
  return n.set_output(0, y);
}

}  // namespace

// Rounding comes first: round(v) + zp differs from round(v + zp) on odd zero points at ties.
Result<Tensor> round_and_saturate(NodeContext& n, const Tensor& v, const std::optional<Tensor>& zp, DType dtype) {
  CARVE_ASSIGN_OR_RETURN(IntRange range, quantized_range(n, dtype, "output"));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kRound, {v}));
  if (zp) {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kAdd, {y, *zp}));
  }
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kClip, {y}, {{"min", range.lo}, {"max", range.hi}}));
  return cast_to(n, y, dtype);
}

void register_quant_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  const std::vector<std::string_view> conv_attrs{"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
  t["QuantizeLinear"] = {lower_quantize_linear, {"axis", "block_size", "output_dtype", "saturate"}};
  t["DequantizeLinear"] = {lower_dequantize_linear, {"axis", "block_size"}};
  t["MatMulInteger"] = {lower_matmul_integer, {}};
  t["QLinearMatMul"] = {lower_qlinear_matmul, {}};
  t["ConvInteger"] = {lower_conv_integer, conv_attrs};
  t["QLinearConv"] = {lower_qlinear_conv, conv_attrs};
}

}  // namespace carve::onnx::detail
