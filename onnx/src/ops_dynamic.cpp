// ONNX ops with a data-dependent output size: NonZero, Unique, NonMaxSuppression. Each is
// one carve op whose outputs are planned at their upper bound (ir/extent.h); the runtime
// returns graph outputs at their actual extent and refuses nodes that read them. Known
// inputs fold, and the folded outputs are cut to the actual extent here, so they are
// ordinary constants for whatever reads them.
#include <fmt/format.h>

#include "carve/ir/extent.h"
#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::DType;
using ir::OpKind;

// `kind` on `inputs`; when it folded, each output cut to the extent its last output holds.
// `axes`: per output but the last, the dim that has the data-dependent extent (-1: none).
Result<std::vector<Tensor>> dynamic_op(NodeContext& n, OpKind kind, std::vector<Tensor> inputs, ir::Attrs attrs,
                                       const std::vector<int>& axes) {
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, n.op_n(kind, std::move(inputs), std::move(attrs)));
  if (!outs.back().is_known()) return outs;
  const int64_t extent = to_int64s(outs.back())[0];
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0) continue;
    const ir::TensorType type{outs[i].type.dtype, ir::actual_shape(outs[i].type.shape, {axes[i], ir::kNoValue}, extent)};
    CARVE_ASSIGN_OR_RETURN(int64_t bytes, type.byte_size());
    const std::span<const uint8_t> all = outs[i].bytes();  // packed at the actual extent from the first byte
    outs[i] = known_tensor(fmt::format("{}/{}", n.name(), i), type,
                           std::vector<uint8_t>(all.begin(), all.begin() + bytes));
  }
  return outs;
}

Status lower_non_zero(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, dynamic_op(n, OpKind::kNonZero, {x}, {}, {1}));
  return n.set_output(0, outs[0]);
}

Status lower_unique(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t sorted, n.attr_int("sorted", 1));
  ir::Attrs attrs = {{"sorted", int64_t{sorted != 0}}};
  int axis = 0;
  if (n.has_attr("axis")) {
    CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis"));
    CARVE_ASSIGN_OR_RETURN(int64_t a, normalize_axis(n, raw_axis, x.type.shape.rank()));
    axis = static_cast<int>(a);
    attrs["axis"] = a;
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> outs, dynamic_op(n, OpKind::kUnique, {x}, attrs, {axis, 0, -1, 0}));
  for (int i = 0; i < 4 && i < n.num_outputs(); ++i) {
    if (n.output_used(i)) CARVE_RETURN_IF_ERROR(n.set_output(i, outs[static_cast<size_t>(i)]));
  }
  return Status();
}

// Omitted optional inputs take ONNX's defaults: no boxes per class, IoU threshold 0, no
// score threshold.
Status lower_non_max_suppression(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor boxes, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor scores, n.input(1));
  std::vector<Tensor> inputs = {boxes, scores};
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(Tensor max_per_class, n.input(2));
    inputs.push_back(max_per_class);
  } else {
    inputs.push_back(n.constant_ints(DType::kI64, ir::Shape(), {0}));
  }
  if (n.has_input(3)) {
    CARVE_ASSIGN_OR_RETURN(Tensor iou, n.input(3));
    inputs.push_back(iou);
  } else {
    inputs.push_back(n.constant_doubles(DType::kF32, ir::Shape(), {0.0}));
  }
  if (n.has_input(4)) {
    CARVE_ASSIGN_OR_RETURN(Tensor score, n.input(4));
    inputs.push_back(score);
  }
  CARVE_ASSIGN_OR_RETURN(int64_t center, n.attr_int("center_point_box", 0));
  if (center != 0 && center != 1) return n.invalid(fmt::format("center_point_box must be 0 or 1, got {}", center));
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                         dynamic_op(n, OpKind::kNonMaxSuppression, inputs, {{"center_point_box", center}}, {0}));
  return n.set_output(0, outs[0]);
}

}  // namespace

void register_dynamic_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["NonZero"] = {lower_non_zero, {}};
  t["Unique"] = {lower_unique, {"axis", "sorted"}};
  t["NonMaxSuppression"] = {lower_non_max_suppression, {"center_point_box"}};
}

}  // namespace carve::onnx::detail
