// infer_types dispatch, attribute access and the checks every op family shares.
#include <algorithm>

#include "infer_internal.h"

namespace carve::ir {
namespace detail {

Status attr_error(std::string message) {
  return Status(ErrorCode::kVerifyError, std::move(message));
}
Status shape_error(std::string message) {
  return Status(ErrorCode::kShapeError, std::move(message));
}
Status type_error(std::string message) {
  return Status(ErrorCode::kTypeMismatch, std::move(message));
}

Result<const Attr*> AttrReader::find(std::string_view name, AttrType type) const {
  auto it = attrs_.find(name);
  if (it == attrs_.end()) return static_cast<const Attr*>(nullptr);
  if (it->second.type() != type) {
    return attr_error(fmt::format("attribute '{}' must be {} {}, got {}", name,
                                  type == AttrType::kInt ? "an" : "a", attr_type_name(type),
                                  attr_type_name(it->second.type())));
  }
  return &it->second;
}

Result<int64_t> AttrReader::get_int(std::string_view name) const {
  CARVE_ASSIGN_OR_RETURN(const Attr* a, find(name, AttrType::kInt));
  if (a == nullptr) return attr_error(fmt::format("missing required attribute '{}'", name));
  return a->as_int();
}

Result<int64_t> AttrReader::get_int(std::string_view name, int64_t fallback) const {
  CARVE_ASSIGN_OR_RETURN(const Attr* a, find(name, AttrType::kInt));
  return a == nullptr ? fallback : a->as_int();
}

Result<bool> AttrReader::get_flag(std::string_view name, bool fallback) const {
  CARVE_ASSIGN_OR_RETURN(int64_t v, get_int(name, fallback ? 1 : 0));
  if (v != 0 && v != 1) {
    return attr_error(fmt::format("attribute '{}' = {} must be 0 or 1", name, v));
  }
  return v == 1;
}

Result<double> AttrReader::get_float(std::string_view name, double fallback) const {
  CARVE_ASSIGN_OR_RETURN(const Attr* a, find(name, AttrType::kFloat));
  return a == nullptr ? fallback : a->as_float();
}

Result<std::string> AttrReader::get_string(std::string_view name) const {
  CARVE_ASSIGN_OR_RETURN(const Attr* a, find(name, AttrType::kString));
  if (a == nullptr) return attr_error(fmt::format("missing required attribute '{}'", name));
  return a->as_string();
}

Result<std::vector<int64_t>> AttrReader::get_ints(std::string_view name) const {
  CARVE_ASSIGN_OR_RETURN(const Attr* a, find(name, AttrType::kInts));
  if (a == nullptr) return attr_error(fmt::format("missing required attribute '{}'", name));
  return a->as_ints();
}

Result<std::vector<int64_t>> AttrReader::get_ints(std::string_view name,
                                                  std::vector<int64_t> fallback) const {
  CARVE_ASSIGN_OR_RETURN(const Attr* a, find(name, AttrType::kInts));
  if (a == nullptr) return fallback;
  return a->as_ints();
}

Result<int> normalize_axis(int64_t axis, int rank, std::string_view attr) {
  if (axis < -rank || axis >= rank) {
    return attr_error(
        fmt::format("attribute '{}' = {} is out of range for rank {}", attr, axis, rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Result<std::vector<int>> normalize_axes(std::span<const int64_t> axes, int rank,
                                        std::string_view attr) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(a, rank, attr));
    if (std::find(out.begin(), out.end(), axis) != out.end()) {
      return attr_error(fmt::format("attribute '{}' repeats axis {}", attr, axis));
    }
    out.push_back(axis);
  }
  return out;
}

Status expect_rank(const TensorType& t, int rank, std::string_view what) {
  if (t.shape.rank() == rank) return Status();
  return shape_error(fmt::format("{} must have rank {}, got {}", what, rank, t.to_string()));
}

Status expect_min_rank(const TensorType& t, int rank, std::string_view what) {
  if (t.shape.rank() >= rank) return Status();
  return shape_error(fmt::format("{} must have rank >= {}, got {}", what, rank, t.to_string()));
}

Status expect_float(const TensorType& t, std::string_view what) {
  if (is_float(t.dtype)) return Status();
  return type_error(fmt::format("{} must be a float type, got {}", what, dtype_name(t.dtype)));
}

Status expect_numeric(const TensorType& t, std::string_view what) {
  if (t.dtype != DType::kBool) return Status();
  return type_error(fmt::format("{} must be numeric, got bool", what));
}

Status expect_same_dtype(const TensorType& a, const TensorType& b, std::string_view what) {
  if (a.dtype == b.dtype) return Status();
  return type_error(fmt::format("{} must have the same dtype, got {} and {}", what,
                                dtype_name(a.dtype), dtype_name(b.dtype)));
}

}  // namespace detail

Result<Shape> broadcast_shapes(std::span<const Shape> shapes) {
  int rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
  for (const Shape& s : shapes) {
    int offset = rank - s.rank();
    for (int i = 0; i < s.rank(); ++i) {
      int64_t& d = dims[static_cast<size_t>(offset + i)];
      int64_t e = s.dim(i);
      if (e == d || e == 1) continue;
      if (d != 1) {
        std::vector<std::string> names;
        for (const Shape& t : shapes) names.push_back(t.to_string());
        return detail::shape_error(
            fmt::format("cannot broadcast shapes {}: dims {} and {} at output axis {}",
                        fmt::join(names, " and "), d, e, offset + i));
      }
      d = e;
    }
  }
  return Shape(std::move(dims));
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const Shape both[] = {a, b};
  return broadcast_shapes(both);
}

Result<std::vector<TensorType>> infer_types(OpKind op, std::span<const TensorType> inputs,
                                            const Attrs& attrs, std::span<const Handle> handles) {
  using namespace detail;
  if (!is_valid_op(op)) {
    return attr_error(fmt::format("unknown op (enum value {})", static_cast<int>(op)));
  }
  const OpTraits& traits = op_traits(op);
  int n = static_cast<int>(inputs.size());
  if (n < traits.min_inputs || n > traits.max_inputs) {
    std::string expected = traits.min_inputs == traits.max_inputs
                               ? fmt::format("{}", traits.min_inputs)
                           : traits.max_inputs == kVariadic
                               ? fmt::format("at least {}", traits.min_inputs)
                               : fmt::format("{} to {}", traits.min_inputs, traits.max_inputs);
    return attr_error(fmt::format("{} takes {} inputs, got {}", traits.name, expected, n));
  }
  for (const auto& [name, value] : attrs) {
    if (!accepts_attr(op, name)) {
      return attr_error(fmt::format("unknown attribute '{}' for {}", name, traits.name));
    }
  }
  for (int i = 0; i < n; ++i) {
    Status s = inputs[static_cast<size_t>(i)].validate();
    if (!s.ok()) return s.with_context(fmt::format("input #{}", i));
  }

  AttrReader reader(attrs);
  Result<Types> out = Status(ErrorCode::kInternal, "no inference rule");
  if (traits.elementwise) {
    out = infer_elementwise(op, inputs, reader);
  } else if (traits.state) {
    out = infer_state(op, inputs, reader, handles);
  } else if (static_cast<int>(op) <= static_cast<int>(OpKind::kBatchNorm)) {
    out = infer_nn(op, inputs, reader);
  } else {
    out = infer_layout(op, inputs, reader);
  }
  if (!out.ok()) return out;
  for (size_t i = 0; i < out->size(); ++i) {
    Status s = (*out)[i].validate();
    if (!s.ok()) return s.with_context(fmt::format("output #{}", i));
  }
  return out;
}

}  // namespace carve::ir
