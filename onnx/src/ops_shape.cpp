// Shape and layout ONNX operators: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
// Concat, Split, Slice, Expand, Tile, Shape, Size, DepthToSpace, SpaceToDepth. Sizes that
// ONNX passes as tensors (opset 10/13+) must be known at import; older opsets pass them
// as attributes.
#include <onnx/onnx_pb.h>

#include <numeric>

#include "carve/ir/infer.h"
#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// A size list given as input `index` (newer opsets) or as attribute `attr` (older ones).
Result<std::optional<std::vector<int64_t>>> ints_input_or_attr(const NodeContext& n, int index,
                                                               std::string_view attr) {
  if (n.has_input(index)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.const_ints(index, attr));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  if (!n.has_attr(attr)) return std::optional<std::vector<int64_t>>();
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attr_ints(attr));
  return std::optional<std::vector<int64_t>>(std::move(v));
}

Status lower_reshape(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(auto shape, ints_input_or_attr(n, 1, "shape"));
  if (!shape) return n.invalid("the target shape is missing");
  CARVE_ASSIGN_OR_RETURN(int64_t allowzero, n.attr_int("allowzero", 0));
  if (allowzero && std::find(shape->begin(), shape->end(), 0) != shape->end()) {
    // A literal 0 (carve's reshape copies the input's dim for a 0): the output is empty, so
    // it is known at import, a constant of that shape. ONNX forbids -1 beside such a 0.
    if (std::find(shape->begin(), shape->end(), -1) != shape->end())
      return n.invalid(fmt::format("allowzero=1 with both 0 and -1 in the shape [{}]", fmt::join(*shape, ", ")));
    CARVE_ASSIGN_OR_RETURN(int64_t elements, x.type.shape.num_elements());
    if (elements != 0)
      return n.error(ErrorCode::kShapeError, fmt::format("cannot reshape {} ({} elements) to [{}]",
                                                         x.type.shape.to_string(), elements, fmt::join(*shape, ", ")));
    for (int64_t d : *shape)
      if (d < 0) return n.invalid(fmt::format("shape [{}] has a negative dimension", fmt::join(*shape, ", ")));
    return n.set_output(0, n.constant_doubles(x.type.dtype, ir::Shape(*shape), {}));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kReshape, {x}, {{"shape", *shape}}));
  return n.set_output(0, y);
}

Status lower_flatten(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis", 1));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kFlatten, {x}, {{"axis", axis}}));
  return n.set_output(0, y);
}

Status lower_squeeze(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(auto axes, ints_input_or_attr(n, 1, "axes"));
  ir::Attrs attrs;
  if (axes && !axes->empty()) attrs["axes"] = *axes;
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kSqueeze, {x}, std::move(attrs)));
  return n.set_output(0, y);
}

Status lower_unsqueeze(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(auto axes, ints_input_or_attr(n, 1, "axes"));
  if (!axes) return n.invalid("axes are missing");
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kUnsqueeze, {x}, {{"axes", *axes}}));
  return n.set_output(0, y);
}

// Whether `perm` is a permutation of x's axes that keeps the order of every axis longer
// than 1 (so it moves only axes of size 1); false for anything else, valid or not.
bool moves_only_unit_dims(const ir::Shape& shape, const std::vector<int64_t>& perm) {
  const auto rank = static_cast<size_t>(shape.rank());
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  int64_t last = -1;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return false;
    seen[static_cast<size_t>(p)] = true;
    const int64_t dim = shape[static_cast<int>(p)];
    if (dim <= 0) return false;  // 0 means "copy the input dim" to reshape
    if (dim == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

Status lower_transpose(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  std::vector<int64_t> reversed(static_cast<size_t>(x.type.shape.rank()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, n.attr_ints("perm", reversed));
  if (moves_only_unit_dims(x.type.shape, perm)) {
    // The same bytes in the same order: a view (PyTorch's batch_first attention swaps
    // [1, T, D] and [T, 1, D] around every layer).
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(x.type.shape[static_cast<int>(p)]);
    CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kReshape, {x}, {{"shape", dims}}));
    return n.set_output(0, y);
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kTranspose, {x}, {{"perm", perm}}));
  return n.set_output(0, y);
}

Status lower_concat(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(int64_t axis, n.attr_int("axis"));
  std::vector<Tensor> in;
  for (int i = 0; i < n.num_inputs(); ++i) {
    CARVE_ASSIGN_OR_RETURN(Tensor t, n.input(i));
    in.push_back(std::move(t));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kConcat, in, {{"axis", axis}}));
  return n.set_output(0, y);
}

// Split sizes: the 'split' attribute (< 13) or input (>= 13); else equal parts, one per
// output (num_outputs in opset 18, the last part smaller when it does not divide).
Status lower_split(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, x.type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(auto sizes, ints_input_or_attr(n, 1, "split"));
  if (!sizes) {
    CARVE_ASSIGN_OR_RETURN(int64_t parts, n.attr_int("num_outputs", n.num_outputs()));
    const int64_t dim = x.type.shape[static_cast<int>(axis)];
    const int64_t each = (dim + parts - 1) / std::max<int64_t>(parts, 1);
    sizes.emplace();
    for (int64_t i = 0; i < parts; ++i) sizes->push_back(std::clamp<int64_t>(dim - i * each, 0, each));
  }
  if (static_cast<int>(sizes->size()) != n.num_outputs())
    return n.invalid(fmt::format("{} split sizes for {} outputs", sizes->size(), n.num_outputs()));
  CARVE_ASSIGN_OR_RETURN(std::vector<Tensor> parts, n.op_n(OpKind::kSplit, {x}, {{"axis", axis}, {"sizes", *sizes}}));
  for (size_t i = 0; i < parts.size(); ++i) CARVE_RETURN_IF_ERROR(n.set_output(static_cast<int>(i), parts[i]));
  return Status();
}

// Slice: starts/ends/axes as attributes before opset 10, then (with steps) as inputs.
Status lower_slice(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(auto starts, ints_input_or_attr(n, 1, "starts"));
  CARVE_ASSIGN_OR_RETURN(auto ends, ints_input_or_attr(n, 2, "ends"));
  CARVE_ASSIGN_OR_RETURN(auto axes, ints_input_or_attr(n, 3, "axes"));
  CARVE_ASSIGN_OR_RETURN(auto steps, ints_input_or_attr(n, 4, "steps"));
  if (!starts || !ends) return n.invalid("starts and ends are required");
  ir::Attrs attrs{{"starts", *starts}, {"ends", *ends}};
  if (axes) attrs["axes"] = *axes;
  if (steps) attrs["steps"] = *steps;
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kSlice, {x}, std::move(attrs)));
  return n.set_output(0, y);
}

// Expand broadcasts x to broadcast(x.shape, shape). carve has no broadcast op, so it is
// where(all-true mask, x, x): the mask has the output's rank but 1 wherever x already
// has the output's dim, so it stays as small as the expansion.
Status lower_expand(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.const_ints(1, "shape"));
  Result<ir::Shape> out = ir::broadcast_shapes(x.type.shape, ir::Shape(shape));
  if (!out.ok()) return n.error(ErrorCode::kShapeError, out.status().message());
  if (*out == x.type.shape) return n.set_output(0, x);
  std::vector<int64_t> mask_dims = out->dims();
  const int offset = out->rank() - x.type.shape.rank();
  for (int i = 0; i < x.type.shape.rank(); ++i)
    if (x.type.shape[i] == (*out)[offset + i]) mask_dims[static_cast<size_t>(offset + i)] = 1;
  ir::Shape mask_shape(mask_dims);
  // The mask is built here (8 bytes per element on the way); with a known x the where
  // folds to the whole output, which fold() checks.
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{ir::DType::kBool, mask_shape}, sizeof(int64_t)));
  const int64_t count = *mask_shape.num_elements();
  Tensor mask = n.constant_ints(ir::DType::kBool, mask_shape, std::vector<int64_t>(static_cast<size_t>(count), 1));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kWhere, {mask, x, x}));
  return n.set_output(0, y);
}

// Tile: concatenate `repeats[axis]` copies along each axis.
constexpr int64_t kMaxTileCopies = 65536;
Status lower_tile(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, n.const_ints(1, "repeats"));
  if (static_cast<int>(repeats.size()) != x.type.shape.rank())
    return n.invalid(fmt::format("{} repeats for rank {}", repeats.size(), x.type.shape.rank()));
  std::vector<int64_t> out_dims = x.type.shape.dims();
  for (size_t axis = 0; axis < repeats.size(); ++axis) {
    if (repeats[axis] < 1) return n.unsupported(fmt::format("repeats {} (empty tensors)", repeats[axis]));
    if (!ir::checked_mul(out_dims[axis], repeats[axis], &out_dims[axis]))
      return n.error(ErrorCode::kShapeError, fmt::format("repeats {} overflow dim {}", repeats[axis], axis));
    // Each copy is one concat input (a Tensor, and a fold-graph value when x is known):
    // bound their count before building the list.
    if (repeats[axis] > kMaxTileCopies)
      return n.unsupported(fmt::format("repeats {} on axis {} (at most {} copies per axis)", repeats[axis], axis,
                                       kMaxTileCopies));
  }
  if (x.is_known()) CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{x.type.dtype, ir::Shape(out_dims)}));
  for (size_t axis = 0; axis < repeats.size(); ++axis) {
    if (repeats[axis] == 1) continue;
    std::vector<Tensor> copies(static_cast<size_t>(repeats[axis]), x);
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kConcat, copies, {{"axis", static_cast<int64_t>(axis)}}));
  }
  return n.set_output(0, x);
}

// Shape (with opset 15's start/end) is known at import: shapes are static.
Status lower_shape(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(ir::TensorType type, n.input_type(0));
  const int64_t rank = type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t start, n.attr_int("start", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t end, n.attr_int("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(type.shape.dims().begin() + start, type.shape.dims().begin() + end);
  const auto count = static_cast<int64_t>(dims.size());
  return n.set_output(0, n.constant_ints(ir::DType::kI64, ir::Shape{count}, dims));
}

Status lower_size(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(ir::TensorType type, n.input_type(0));
  CARVE_ASSIGN_OR_RETURN(int64_t count, type.shape.num_elements());
  return n.set_output(0, n.constant_ints(ir::DType::kI64, ir::Shape{}, {count}));
}

// DepthToSpace and SpaceToDepth move blocksize x blocksize channel groups into spatial
// blocks and back: a reshape to 6-D, a transpose, a reshape to 4-D.
Result<int64_t> read_blocksize(const NodeContext& n, const Tensor& x) {
  if (x.type.shape.rank() != 4) return n.invalid(fmt::format("input of rank {} (needs 4, NCHW)", x.type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(int64_t b, n.attr_int("blocksize"));
  if (b < 1) return n.invalid(fmt::format("blocksize {} (must be >= 1)", b));
  return b;
}

Result<Tensor> regroup(NodeContext& n, const Tensor& x, std::vector<int64_t> split, std::vector<int64_t> perm,
                       std::vector<int64_t> out) {
  CARVE_ASSIGN_OR_RETURN(Tensor t, n.op(OpKind::kReshape, {x}, {{"shape", std::move(split)}}));
  CARVE_ASSIGN_OR_RETURN(t, n.op(OpKind::kTranspose, {t}, {{"perm", std::move(perm)}}));
  return n.op(OpKind::kReshape, {t}, {{"shape", std::move(out)}});
}

// DCR (default): channels ordered (block row, block column, output channel);
// CRD: (output channel, block row, block column).
Status lower_depth_to_space(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t b, read_blocksize(n, x));
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "DCR"));
  const ir::Shape& s = x.type.shape;
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  if (C % (b * b) != 0) return n.invalid(fmt::format("{} channels are not a multiple of blocksize^2 = {}", C, b * b));
  const int64_t c = C / (b * b);
  std::vector<int64_t> out{N, c, H * b, W * b};
  // Not an ok Status: a Result made from one asserts (every branch below sets y).
  Result<Tensor> y = Status(ErrorCode::kInternal, "no lowering for the mode");
  if (mode == "DCR") {
    y = regroup(n, x, {N, b, b, c, H, W}, {0, 3, 4, 1, 5, 2}, out);
  } else if (mode == "CRD") {
    y = regroup(n, x, {N, c, b, b, H, W}, {0, 1, 4, 2, 5, 3}, out);
  } else {
    return n.invalid(fmt::format("mode '{}' (DCR or CRD)", mode));
  }
  if (!y.ok()) return y.status();
  return n.set_output(0, *y);
}

Status lower_space_to_depth(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(int64_t b, read_blocksize(n, x));
  const ir::Shape& s = x.type.shape;
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  if (H % b != 0 || W % b != 0)
    return n.invalid(fmt::format("spatial dims {}x{} are not multiples of blocksize {}", H, W, b));
  CARVE_ASSIGN_OR_RETURN(Tensor y, regroup(n, x, {N, C, H / b, b, W / b, b}, {0, 3, 5, 1, 2, 4},
                                           {N, C * b * b, H / b, W / b}));
  return n.set_output(0, y);
}

}  // namespace

void register_shape_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Reshape"] = {lower_reshape, {"allowzero", "shape"}};
  t["Flatten"] = {lower_flatten, {"axis"}};
  t["Squeeze"] = {lower_squeeze, {"axes"}};
  t["Unsqueeze"] = {lower_unsqueeze, {"axes"}};
  t["Transpose"] = {lower_transpose, {"perm"}};
  t["Concat"] = {lower_concat, {"axis"}};
  t["Split"] = {lower_split, {"axis", "split", "num_outputs"}};
  t["Slice"] = {lower_slice, {"starts", "ends", "axes"}};
  t["Expand"] = {lower_expand, {}};
  t["Tile"] = {lower_tile, {}};
  t["Shape"] = {lower_shape, {"start", "end"}};
  t["Size"] = {lower_size, {}};
  t["DepthToSpace"] = {lower_depth_to_space, {"blocksize", "mode"}};
  t["SpaceToDepth"] = {lower_space_to_depth, {"blocksize"}};
}

}  // namespace carve::onnx::detail
