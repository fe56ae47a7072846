// Inference for data-movement ops (concat, split, slice, transpose, pad, gather), views
// (reshape, flatten, squeeze, unsqueeze, identity) and state ops on handles.
#include <algorithm>
#include <numeric>

#include "infer_internal.h"

namespace carve::ir::detail {
namespace {

Result<Types> infer_concat(Inputs in, const AttrReader& attrs) {
  const TensorType& first = in[0];
  CARVE_RETURN_IF_ERROR(expect_min_rank(first, 1, "input #0"));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis"));
  CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(raw_axis, first.shape.rank(), "axis"));
  std::vector<int64_t> dims = first.shape.dims();
  for (size_t i = 1; i < in.size(); ++i) {
    CARVE_RETURN_IF_ERROR(expect_same_dtype(first, in[i], fmt::format("inputs #0 and #{}", i)));
    bool fits = in[i].shape.rank() == first.shape.rank();
    for (int d = 0; fits && d < first.shape.rank(); ++d) {
      fits = d == axis || in[i].shape[d] == first.shape[d];
    }
    if (!fits) {
      return shape_error(fmt::format("input #{} {} does not match input #0 {} outside axis {}", i,
                                     in[i].shape.to_string(), first.shape.to_string(), axis));
    }
    int64_t& total = dims[static_cast<size_t>(axis)];
    if (!checked_add(total, in[i].shape[axis], &total)) {
      return shape_error("concatenated dim overflows int64");
    }
  }
  return Types{TensorType{first.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_split(const TensorType& x, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_min_rank(x, 1, "input"));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(raw_axis, x.shape.rank(), "axis"));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, attrs.get_ints("sizes"));
  if (sizes.empty()) return attr_error("attribute 'sizes' must not be empty");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || !checked_add(total, s, &total)) {
      return attr_error(fmt::format("attribute 'sizes' = [{}] has a negative entry or overflows",
                                    fmt::join(sizes, ",")));
    }
  }
  if (total != x.shape[axis]) {
    return shape_error(fmt::format("split sizes [{}] sum to {}, but axis {} of {} has {}",
                                   fmt::join(sizes, ","), total, axis, x.shape.to_string(),
                                   x.shape[axis]));
  }
  Types out;
  for (int64_t s : sizes) {
    std::vector<int64_t> dims = x.shape.dims();
    dims[static_cast<size_t>(axis)] = s;
    out.push_back(TensorType{x.dtype, Shape(std::move(dims))});
  }
  return out;
}

// Number of elements a slice picks from a dim of extent `d` (ONNX Slice clamping).
int64_t slice_length(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  if (d == 0) return 0;
  start = std::clamp<int64_t>(start, 0, d - 1);
  end = std::clamp<int64_t>(end, -1, d - 1);
  if (start <= end) return 0;
  // -step as unsigned: step may be INT64_MIN.
  uint64_t stride = 0 - static_cast<uint64_t>(step);
  return static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride) + 1;
}

Result<Types> infer_slice(const TensorType& x, const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> starts, attrs.get_ints("starts"));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> ends, attrs.get_ints("ends"));
  size_t n = starts.size();
  std::vector<int64_t> default_axes(n);
  std::iota(default_axes.begin(), default_axes.end(), 0);
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> raw_axes, attrs.get_ints("axes", default_axes));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> steps,
                         attrs.get_ints("steps", std::vector<int64_t>(n, 1)));
  if (ends.size() != n || raw_axes.size() != n || steps.size() != n) {
    return attr_error(fmt::format(
        "attributes starts, ends, axes, steps must have equal lengths, got {}, {}, {}, {}", n,
        ends.size(), raw_axes.size(), steps.size()));
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<int> axes, normalize_axes(raw_axes, x.shape.rank(), "axes"));
  std::vector<int64_t> dims = x.shape.dims();
  for (size_t i = 0; i < n; ++i) {
    if (steps[i] == 0) return attr_error("attribute 'steps' must not contain 0");
    auto a = static_cast<size_t>(axes[i]);
    dims[a] = slice_length(dims[a], starts[i], ends[i], steps[i]);
  }
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_transpose(const TensorType& x, const AttrReader& attrs) {
  int rank = x.shape.rank();
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, attrs.get_ints("perm", reversed));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(static_cast<size_t>(rank));
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity) {
    return attr_error(fmt::format("attribute 'perm' = [{}] is not a permutation of 0..{}",
                                  fmt::join(perm, ","), rank - 1));
  }
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(x.shape[static_cast<int>(p)]);
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_pad(const TensorType& x, const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.get_ints("pads"));
  CARVE_RETURN_IF_ERROR(attrs.get_float("value", 0.0).status());
  int rank = x.shape.rank();
  if (pads.size() != static_cast<size_t>(2 * rank)) {
    return attr_error(fmt::format("attribute 'pads' must have 2 * rank = {} entries, got {}",
                                  2 * rank, pads.size()));
  }
  std::vector<int64_t> dims = x.shape.dims();
  for (int i = 0; i < rank; ++i) {
    int64_t b = pads[static_cast<size_t>(i)], e = pads[static_cast<size_t>(i + rank)];
    if (b < 0 || e < 0) {
      return attr_error(fmt::format("attribute 'pads' = [{}] must be >= 0", fmt::join(pads, ",")));
    }
    int64_t& d = dims[static_cast<size_t>(i)];
    if (!checked_add(d, b, &d) || !checked_add(d, e, &d)) {
      return shape_error(fmt::format("padded dim {} overflows int64", i));
    }
  }
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

// gather's and gather_elements' axis, after checking data's rank and the indices' dtype.
static Result<int> gather_axis(const TensorType& data, const TensorType& indices, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_min_rank(data, 1, "data"));
  if (indices.dtype != DType::kI32 && indices.dtype != DType::kI64) {
    return type_error(fmt::format("indices must be i32 or i64, got {}", dtype_name(indices.dtype)));
  }
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis", 0));
  return normalize_axis(raw_axis, data.shape.rank(), "axis");
}

Result<Types> infer_gather(const TensorType& data, const TensorType& indices,
                           const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(int axis, gather_axis(data, indices, attrs));
  const auto& d = data.shape.dims();
  std::vector<int64_t> dims(d.begin(), d.begin() + axis);
  dims.insert(dims.end(), indices.shape.dims().begin(), indices.shape.dims().end());
  dims.insert(dims.end(), d.begin() + axis + 1, d.end());
  return Types{TensorType{data.dtype, Shape(std::move(dims))}};
}

// gather_elements: indices have data's rank; the output has indices' shape. Index values
// are data, checked when the op runs.
Result<Types> infer_gather_elements(const TensorType& data, const TensorType& indices,
                                    const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(int axis, gather_axis(data, indices, attrs));
  if (indices.shape.rank() != data.shape.rank()) {
    return shape_error(fmt::format("indices {} must have the rank of data {}", indices.shape.to_string(),
                                   data.shape.to_string()));
  }
  // Off the axis, indices may be smaller than data (ONNX; ORT checks the same) but not larger.
  for (int d = 0; d < data.shape.rank(); ++d) {
    if (d != axis && indices.shape[d] > data.shape[d]) {
      return shape_error(fmt::format("indices {} exceed data {} in dim {} (only axis {} is indexed)",
                                     indices.shape.to_string(), data.shape.to_string(), d, axis));
    }
  }
  return Types{TensorType{data.dtype, indices.shape}};
}

Result<Types> infer_reshape(const TensorType& x, const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> target, attrs.get_ints("shape"));
  CARVE_ASSIGN_OR_RETURN(int64_t count, x.shape.num_elements());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t& t = target[i];
    if (t == -1) {
      if (infer_at >= 0) return attr_error("attribute 'shape' has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (t < -1) return attr_error(fmt::format("attribute 'shape' has invalid dim {}", t));
    if (t == 0) {  // 0 copies the input dim at the same position
      if (static_cast<int>(i) >= x.shape.rank()) {
        return attr_error(fmt::format(
            "attribute 'shape' has 0 at position {}, past the input rank {}", i, x.shape.rank()));
      }
      t = x.shape[static_cast<int>(i)];
    }
    if (!checked_mul(known, t, &known)) return shape_error("reshape target size overflows int64");
  }
  if (infer_at >= 0) {
    if (known == 0 || count % known != 0) {
      return shape_error(fmt::format("cannot infer the -1 dim reshaping {} ({} elements) to [{}]",
                                     x.shape.to_string(), count, fmt::join(target, ",")));
    }
    target[static_cast<size_t>(infer_at)] = count / known;
    known = count;
  }
  if (known != count) {
    return shape_error(fmt::format("cannot reshape {} ({} elements) to [{}] ({} elements)",
                                   x.shape.to_string(), count, fmt::join(target, ","), known));
  }
  return Types{TensorType{x.dtype, Shape(std::move(target))}};
}

Result<Types> infer_flatten(const TensorType& x, const AttrReader& attrs) {
  int rank = x.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis", 1));
  // axis may equal rank (everything goes to the outer dim): the range is [-rank, rank].
  if (raw_axis < -rank || raw_axis > rank) {
    return attr_error(
        fmt::format("attribute 'axis' = {} is out of range [{}, {}]", raw_axis, -rank, rank));
  }
  int axis = static_cast<int>(raw_axis < 0 ? raw_axis + rank : raw_axis);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < rank; ++i) (i < axis ? outer : inner) *= x.shape[i];  // fits: validated
  return Types{TensorType{x.dtype, Shape{outer, inner}}};
}

Result<Types> infer_squeeze(const TensorType& x, const AttrReader& attrs) {
  int rank = x.shape.rank();
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> raw, attrs.get_ints("axes", {}));
  if (!raw.empty()) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int> axes, normalize_axes(raw, rank, "axes"));
    for (int a : axes) {
      if (x.shape[a] != 1) {
        return shape_error(fmt::format("cannot squeeze axis {} of {}: dim is {}, not 1", a,
                                       x.shape.to_string(), x.shape[a]));
      }
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (int i = 0; i < rank; ++i) drop[static_cast<size_t>(i)] = x.shape[i] == 1;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i) {
    if (!drop[static_cast<size_t>(i)]) dims.push_back(x.shape[i]);
  }
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_unsqueeze(const TensorType& x, const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> raw, attrs.get_ints("axes"));
  if (raw.empty()) return attr_error("attribute 'axes' must not be empty");
  int out_rank = x.shape.rank() + static_cast<int>(raw.size());
  if (out_rank > kMaxRank) {
    return shape_error(fmt::format("unsqueeze of {} would have rank {} > {}", x.shape.to_string(),
                                   out_rank, kMaxRank));
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<int> axes, normalize_axes(raw, out_rank, "axes"));
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int a : axes) inserted[static_cast<size_t>(a)] = true;
  std::vector<int64_t> dims;
  int next = 0;
  for (int i = 0; i < out_rank; ++i)
    dims.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.shape[next++]);
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

// ---- indexing ops: gather_nd, scatter_nd, top_k ----

Status expect_index_dtype(const TensorType& indices) {
  if (indices.dtype == DType::kI32 || indices.dtype == DType::kI64) return Status();
  return type_error(fmt::format("indices must be i32 or i64, got {}", dtype_name(indices.dtype)));
}

// gather_nd: indices [b..., n..., k] pick slices data[b..., i_1..i_k, :] (ONNX GatherND).
Result<Types> infer_gather_nd(const TensorType& data, const TensorType& indices, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_min_rank(data, 1, "data"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(indices, 1, "indices"));
  CARVE_RETURN_IF_ERROR(expect_index_dtype(indices));
  CARVE_ASSIGN_OR_RETURN(int64_t batch_dims, attrs.get_int("batch_dims", 0));
  const int r = data.shape.rank(), q = indices.shape.rank();
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return attr_error(fmt::format("batch_dims {} must be in [0, {})", batch_dims, std::min(r, q)));
  }
  const auto b = static_cast<int>(batch_dims);
  const int64_t k = indices.shape[q - 1];
  if (k < 1 || b + k > r) {
    return shape_error(fmt::format("indices {} index {} dims of data {} after {} batch dims (must be 1..{})",
                                   indices.shape.to_string(), k, data.shape.to_string(), b, r - b));
  }
  for (int d = 0; d < b; ++d) {
    if (indices.shape[d] != data.shape[d]) {
      return shape_error(fmt::format("batch dim {} differs: indices {} vs data {}", d, indices.shape.to_string(),
                                     data.shape.to_string()));
    }
  }
  std::vector<int64_t> dims(indices.shape.dims().begin(), indices.shape.dims().end() - 1);
  for (int d = b + static_cast<int>(k); d < r; ++d) dims.push_back(data.shape[d]);
  return Types{TensorType{data.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_scatter_nd(const TensorType& data, const TensorType& indices, const TensorType& updates,
                               const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_min_rank(data, 1, "data"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(indices, 1, "indices"));
  CARVE_RETURN_IF_ERROR(expect_index_dtype(indices));
  CARVE_RETURN_IF_ERROR(expect_same_dtype(data, updates, "data and updates"));
  std::string reduction = "none";  // the default when absent
  if (attrs.has("reduction")) {
    CARVE_ASSIGN_OR_RETURN(reduction, attrs.get_string("reduction"));
  }
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
    return attr_error(fmt::format("reduction '{}' is not one of none, add, mul, max, min", reduction));
  }
  if (reduction != "none") CARVE_RETURN_IF_ERROR(expect_numeric(data, "data (with a reduction)"));
  const int r = data.shape.rank(), q = indices.shape.rank();
  const int64_t k = indices.shape[q - 1];
  if (k < 1 || k > r) {
    return shape_error(fmt::format("indices {} index {} dims of data {} (must be 1..{})", indices.shape.to_string(), k,
                                   data.shape.to_string(), r));
  }
  std::vector<int64_t> expected(indices.shape.dims().begin(), indices.shape.dims().end() - 1);
  for (int d = static_cast<int>(k); d < r; ++d) expected.push_back(data.shape[d]);
  if (updates.shape != Shape(expected)) {
    return shape_error(fmt::format("updates {} must be {} (indices {} into data {})", updates.shape.to_string(),
                                   Shape(expected).to_string(), indices.shape.to_string(), data.shape.to_string()));
  }
  return Types{data};
}

Result<Types> infer_top_k(const TensorType& x, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_numeric(x, "input"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(x, 1, "input"));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis", -1));
  CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(raw_axis, x.shape.rank(), "axis"));
  CARVE_ASSIGN_OR_RETURN(int64_t k, attrs.get_int("k"));
  CARVE_RETURN_IF_ERROR(attrs.get_flag("largest", true).status());
  if (k < 0 || k > x.shape[axis]) {
    return attr_error(fmt::format("k {} outside [0, {}] (axis {} of {})", k, x.shape[axis], axis, x.shape.to_string()));
  }
  std::vector<int64_t> dims = x.shape.dims();
  dims[static_cast<size_t>(axis)] = k;
  return Types{TensorType{x.dtype, Shape(dims)}, TensorType{DType::kI64, Shape(dims)}};
}

// The data-dependent ops (op.h, extent.h): outputs at their upper bound, then the extent.
const TensorType kExtentType{DType::kI64, Shape()};

Result<Types> infer_non_zero(const TensorType& x) {
  const int64_t rank = std::max(1, x.shape.rank());
  CARVE_ASSIGN_OR_RETURN(int64_t numel, x.shape.num_elements());
  return Types{TensorType{DType::kI64, Shape({rank, numel})}, kExtentType};
}

Result<Types> infer_unique(const TensorType& x, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(attrs.get_flag("sorted", true).status());
  CARVE_ASSIGN_OR_RETURN(int64_t numel, x.shape.num_elements());
  std::vector<int64_t> dims = {numel};
  int axis = 0;
  if (attrs.has("axis")) {
    CARVE_RETURN_IF_ERROR(expect_min_rank(x, 1, "input"));
    CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis"));
    CARVE_ASSIGN_OR_RETURN(axis, normalize_axis(raw_axis, x.shape.rank(), "axis"));
    dims = x.shape.dims();
  }
  const int64_t len = dims[static_cast<size_t>(axis)];
  const TensorType per_slice{DType::kI64, Shape({len})};
  return Types{TensorType{x.dtype, Shape(dims)}, per_slice, per_slice, per_slice, kExtentType};
}

// A scalar or one-element input of `dtype` (ONNX gives these as [] or [1]).
Status expect_scalar(const TensorType& t, DType dtype, std::string_view what) {
  if (t.dtype == dtype && (t.shape.rank() == 0 || (t.shape.rank() == 1 && t.shape[0] == 1))) return Status();
  return type_error(fmt::format("{} must be {}[] or {}[1], got {}", what, dtype_name(dtype), dtype_name(dtype),
                                t.to_string()));
}

Result<Types> infer_non_max_suppression(Inputs in, const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(bool center, attrs.get_flag("center_point_box", false));
  (void)center;
  const TensorType& boxes = in[0];
  const TensorType& scores = in[1];
  CARVE_RETURN_IF_ERROR(expect_rank(boxes, 3, "boxes"));
  CARVE_RETURN_IF_ERROR(expect_rank(scores, 3, "scores"));
  if (boxes.dtype != DType::kF32 || scores.dtype != DType::kF32)
    return type_error(fmt::format("boxes and scores must be f32, got {} and {}", boxes.to_string(), scores.to_string()));
  const int64_t batches = boxes.shape[0], n = boxes.shape[1];
  if (boxes.shape[2] != 4 || scores.shape[0] != batches || scores.shape[2] != n)
    return shape_error(fmt::format("boxes {} and scores {} need [B,N,4] and [B,C,N]", boxes.shape.to_string(),
                                   scores.shape.to_string()));
  CARVE_RETURN_IF_ERROR(expect_scalar(in[2], DType::kI64, "max_output_boxes_per_class"));
  CARVE_RETURN_IF_ERROR(expect_scalar(in[3], DType::kF32, "iou_threshold"));
  if (in.size() > 4) CARVE_RETURN_IF_ERROR(expect_scalar(in[4], DType::kF32, "score_threshold"));
  return Types{TensorType{DType::kI64, Shape({batches * scores.shape[1] * n, 3})}, kExtentType};
}

}  // namespace

Result<Types> infer_layout(OpKind op, Inputs in, const AttrReader& attrs) {
  switch (op) {
    case OpKind::kConcat:
      return infer_concat(in, attrs);
    case OpKind::kSplit:
      return infer_split(in[0], attrs);
    case OpKind::kSlice:
      return infer_slice(in[0], attrs);
    case OpKind::kTranspose:
      return infer_transpose(in[0], attrs);
    case OpKind::kPad:
      return infer_pad(in[0], attrs);
    case OpKind::kGather:
      return infer_gather(in[0], in[1], attrs);
    case OpKind::kGatherElements:
      return infer_gather_elements(in[0], in[1], attrs);
    case OpKind::kGatherNd:
      return infer_gather_nd(in[0], in[1], attrs);
    case OpKind::kScatterNd:
      return infer_scatter_nd(in[0], in[1], in[2], attrs);
    case OpKind::kTopK:
      return infer_top_k(in[0], attrs);
    case OpKind::kNonZero:
      return infer_non_zero(in[0]);
    case OpKind::kUnique:
      return infer_unique(in[0], attrs);
    case OpKind::kNonMaxSuppression:
      return infer_non_max_suppression(in, attrs);
    case OpKind::kReshape:
      return infer_reshape(in[0], attrs);
    case OpKind::kFlatten:
      return infer_flatten(in[0], attrs);
    case OpKind::kSqueeze:
      return infer_squeeze(in[0], attrs);
    case OpKind::kUnsqueeze:
      return infer_unsqueeze(in[0], attrs);
    case OpKind::kIdentity:
      return Types{in[0]};
    default:
      break;
  }
  return Status(ErrorCode::kInternal, fmt::format("infer_layout called for {}", op_name(op)));
}

Result<Types> infer_state(OpKind op, Inputs in, const AttrReader& attrs,
                          std::span<const Handle> handles) {
  CARVE_ASSIGN_OR_RETURN(std::string name, attrs.get_string("handle"));
  auto it =
      std::find_if(handles.begin(), handles.end(), [&](const Handle& h) { return h.name == name; });
  if (it == handles.end()) {
    return attr_error(fmt::format("handle '{}' is not declared on the graph", name));
  }
  const TensorType& h = it->type;
  if (op == OpKind::kReadHandle) return Types{h};

  const TensorType& v = in[0];
  if (v.dtype != h.dtype) {
    return type_error(
        fmt::format("value {} does not match handle '{}' {}", v.to_string(), name, h.to_string()));
  }
  if (op == OpKind::kWriteHandle) {
    if (v.shape != h.shape) {
      return shape_error(fmt::format("value {} does not match handle '{}' {}", v.to_string(), name,
                                     h.to_string()));
    }
    return Types{};
  }

  // write_handle_at: value fits in the handle along `axis`, equal elsewhere.
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis"));
  CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(raw_axis, h.shape.rank(), "axis"));
  bool fits = v.shape.rank() == h.shape.rank();
  for (int i = 0; fits && i < h.shape.rank(); ++i) {
    fits = i == axis ? v.shape[i] <= h.shape[i] : v.shape[i] == h.shape[i];
  }
  if (!fits) {
    return shape_error(
        fmt::format("value {} does not fit handle '{}' {} along axis {} (other dims must match)",
                    v.to_string(), name, h.to_string(), axis));
  }
  if (in[1].dtype != DType::kI64 || in[1].shape.rank() != 0) {
    return type_error(fmt::format("pos must be an i64 scalar, got {}", in[1].to_string()));
  }
  return Types{};
}

}  // namespace carve::ir::detail
