// Inference for reductions, softmax, normalisation, matmul/gemm, conv and pooling.
#include <algorithm>

#include "infer_internal.h"

namespace carve::ir::detail {
namespace {

Result<Types> infer_reduce(OpKind op, const TensorType& x, const AttrReader& attrs) {
  if (op == OpKind::kReduceMean) {
    CARVE_RETURN_IF_ERROR(expect_float(x, "input"));
  } else {
    CARVE_RETURN_IF_ERROR(expect_numeric(x, "input"));
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> raw, attrs.get_ints("axes", {}));
  CARVE_ASSIGN_OR_RETURN(bool keepdims, attrs.get_flag("keepdims", true));
  CARVE_ASSIGN_OR_RETURN(std::vector<int> axes, normalize_axes(raw, x.shape.rank(), "axes"));
  std::vector<bool> reduced(static_cast<size_t>(x.shape.rank()), axes.empty());
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  std::vector<int64_t> dims;
  for (int i = 0; i < x.shape.rank(); ++i) {
    if (!reduced[static_cast<size_t>(i)]) {
      dims.push_back(x.shape[i]);
    } else if (keepdims) {
      dims.push_back(1);
    }
  }
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

// arg_max / arg_min: one axis, removed or kept as 1; an empty axis has no index to return.
Result<Types> infer_arg(const TensorType& x, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_numeric(x, "input"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(x, 1, "input"));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis", 0));
  CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(raw_axis, x.shape.rank(), "axis"));
  CARVE_ASSIGN_OR_RETURN(bool keepdims, attrs.get_flag("keepdims", true));
  CARVE_RETURN_IF_ERROR(attrs.get_flag("select_last_index", false).status());
  if (x.shape[axis] == 0) {
    return shape_error(fmt::format("axis {} of {} is empty: no index to select", axis, x.shape.to_string()));
  }
  std::vector<int64_t> dims = x.shape.dims();
  if (keepdims) {
    dims[static_cast<size_t>(axis)] = 1;
  } else {
    dims.erase(dims.begin() + axis);
  }
  return Types{TensorType{DType::kI64, Shape(std::move(dims))}};
}

Result<Types> infer_softmax(const TensorType& x, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_float(x, "input"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(x, 1, "input"));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, attrs.get_int("axis", -1));
  CARVE_RETURN_IF_ERROR(normalize_axis(axis, x.shape.rank(), "axis").status());
  return Types{x};
}

Status check_epsilon(const AttrReader& attrs) {
  CARVE_ASSIGN_OR_RETURN(double eps, attrs.get_float("epsilon", 1e-5));
  if (!(eps >= 0)) return attr_error(fmt::format("attribute 'epsilon' = {} must be >= 0", eps));
  return Status();
}

Result<Types> infer_layer_norm(Inputs in, const AttrReader& attrs) {
  const TensorType& x = in[0];
  CARVE_RETURN_IF_ERROR(expect_float(x, "input"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(x, 1, "input"));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, attrs.get_int("axis", -1));
  CARVE_ASSIGN_OR_RETURN(int axis, normalize_axis(raw_axis, x.shape.rank(), "axis"));
  CARVE_RETURN_IF_ERROR(check_epsilon(attrs));
  Shape norm(std::vector<int64_t>(x.shape.dims().begin() + axis, x.shape.dims().end()));
  const char* names[] = {"x", "scale", "bias"};
  for (size_t i = 1; i < in.size(); ++i) {
    CARVE_RETURN_IF_ERROR(expect_same_dtype(x, in[i], fmt::format("x and {}", names[i])));
    if (in[i].shape != norm) {
      return shape_error(fmt::format("{} must have shape {} (x.shape[{}:]), got {}", names[i],
                                     norm.to_string(), axis, in[i].shape.to_string()));
    }
  }
  return Types{x};
}

Result<Types> infer_matmul(const TensorType& a, const TensorType& b) {
  CARVE_RETURN_IF_ERROR(expect_same_dtype(a, b, "operands"));
  CARVE_RETURN_IF_ERROR(expect_numeric(a, "operands"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(a, 1, "a"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(b, 1, "b"));
  // numpy: a 1-D `a` is a row [1,K] and a 1-D `b` a column [K,1]; the added dim is
  // dropped from the result.
  std::vector<int64_t> ad = a.shape.dims(), bd = b.shape.dims();
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  int64_t m = ad[ad.size() - 2], k = ad.back();
  int64_t kb = bd[bd.size() - 2], n = bd.back();
  if (k != kb) {
    return shape_error(fmt::format("matmul contraction dims differ: {} x {} (K {} vs {})",
                                   a.shape.to_string(), b.shape.to_string(), k, kb));
  }
  Shape a_batch(std::vector<int64_t>(ad.begin(), ad.end() - 2));
  Shape b_batch(std::vector<int64_t>(bd.begin(), bd.end() - 2));
  Result<Shape> batch = broadcast_shapes(a_batch, b_batch);
  if (!batch.ok()) return batch.status().with_context("matmul batch dims");
  std::vector<int64_t> dims = batch->dims();
  if (!a_vec) dims.push_back(m);
  if (!b_vec) dims.push_back(n);
  return Types{TensorType{a.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_gemm(Inputs in, const AttrReader& attrs) {
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  CARVE_RETURN_IF_ERROR(expect_same_dtype(a, b, "a and b"));
  CARVE_RETURN_IF_ERROR(expect_numeric(a, "a"));
  CARVE_RETURN_IF_ERROR(expect_rank(a, 2, "a"));
  CARVE_RETURN_IF_ERROR(expect_rank(b, 2, "b"));
  CARVE_ASSIGN_OR_RETURN(bool ta, attrs.get_flag("trans_a", false));
  CARVE_ASSIGN_OR_RETURN(bool tb, attrs.get_flag("trans_b", false));
  CARVE_RETURN_IF_ERROR(attrs.get_float("alpha", 1.0).status());
  CARVE_RETURN_IF_ERROR(attrs.get_float("beta", 1.0).status());
  int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb) {
    return shape_error(fmt::format("gemm contraction dims differ: K {} vs {} (a {}, b {})", k, kb,
                                   a.shape.to_string(), b.shape.to_string()));
  }
  Shape out{m, n};
  if (in.size() == 3) {
    CARVE_RETURN_IF_ERROR(expect_same_dtype(a, in[2], "a and c"));
    Result<Shape> bc = broadcast_shapes(in[2].shape, out);
    if (!bc.ok() || *bc != out) {
      return shape_error(fmt::format("bias c {} does not broadcast to the output {}",
                                     in[2].shape.to_string(), out.to_string()));
    }
  }
  return Types{TensorType{a.dtype, std::move(out)}};
}

// A list attribute with a fixed length whose entries satisfy `min_value`.
Result<std::vector<int64_t>> fixed_list(const AttrReader& attrs, std::string_view name,
                                        std::vector<int64_t> fallback, size_t length,
                                        int64_t min_value, bool required = false) {
  Result<std::vector<int64_t>> got =
      required ? attrs.get_ints(name) : attrs.get_ints(name, std::move(fallback));
  CARVE_RETURN_IF_ERROR(got.status());
  if (got->size() != length) {
    return attr_error(
        fmt::format("attribute '{}' must have {} entries, got {}", name, length, got->size()));
  }
  for (int64_t v : *got) {
    if (v < min_value) {
      return attr_error(fmt::format("attribute '{}' = [{}] has entry {} < {}", name,
                                    fmt::join(*got, ","), v, min_value));
    }
  }
  return got;
}

// Output length of a sliding window: floor((in + pads - span) / stride) + 1 where span
// is the dilated window; ceil instead of floor when ceil_mode, dropping a last window
// that would start inside the end padding (the PyTorch rule).
Result<int64_t> window_out(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel,
                           int64_t dilation, int64_t stride, bool ceil_mode, int axis) {
  int64_t padded = 0, span = 0;
  if (!checked_add(in, pad_begin, &padded) || !checked_add(padded, pad_end, &padded) ||
      !checked_mul(dilation, kernel - 1, &span) || !checked_add(span, 1, &span)) {
    return shape_error(fmt::format("window arithmetic overflows int64 on spatial axis {}", axis));
  }
  if (padded < span) {
    return shape_error(fmt::format(
        "window of extent {} does not fit the padded input extent {} on spatial axis {}", span,
        padded, axis));
  }
  int64_t room = padded - span;
  int64_t out = room / stride + 1;
  if (ceil_mode && room % stride != 0) {
    ++out;
    int64_t last_start = 0;
    if (!checked_mul(out - 1, stride, &last_start) || last_start >= in + pad_begin) --out;
  }
  return out;
}

Result<Types> infer_conv(Inputs in, const AttrReader& attrs) {
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  CARVE_RETURN_IF_ERROR(expect_rank(x, 4, "input (NCHW)"));
  CARVE_RETURN_IF_ERROR(expect_rank(w, 4, "weight (OIHW)"));
  CARVE_RETURN_IF_ERROR(expect_same_dtype(x, w, "input and weight"));
  CARVE_RETURN_IF_ERROR(expect_numeric(x, "input"));
  CARVE_ASSIGN_OR_RETURN(int64_t groups, attrs.get_int("groups", 1));
  if (groups < 1) return attr_error(fmt::format("attribute 'groups' = {} must be >= 1", groups));
  CARVE_ASSIGN_OR_RETURN(auto strides, fixed_list(attrs, "strides", {1, 1}, 2, 1));
  CARVE_ASSIGN_OR_RETURN(auto pads, fixed_list(attrs, "pads", {0, 0, 0, 0}, 4, 0));
  CARVE_ASSIGN_OR_RETURN(auto dilations, fixed_list(attrs, "dilations", {1, 1}, 2, 1));
  int64_t c = x.shape[1], o = w.shape[0];
  if (c % groups != 0 || o % groups != 0) {
    return shape_error(fmt::format("groups {} must divide input channels {} and output channels {}",
                                   groups, c, o));
  }
  if (w.shape[1] != c / groups) {
    return shape_error(
        fmt::format("weight {} must have {} input channels per group (C {} / groups {})",
                    w.shape.to_string(), c / groups, c, groups));
  }
  if (w.shape[2] < 1 || w.shape[3] < 1) {
    return shape_error(fmt::format("weight {} has an empty kernel", w.shape.to_string()));
  }
  if (in.size() == 3) {
    CARVE_RETURN_IF_ERROR(expect_same_dtype(x, in[2], "input and bias"));
    if (in[2].shape != Shape{o}) {
      return shape_error(
          fmt::format("bias must have shape [{}], got {}", o, in[2].shape.to_string()));
    }
  }
  std::vector<int64_t> dims = {x.shape[0], o, 0, 0};
  for (int i = 0; i < 2; ++i) {
    CARVE_ASSIGN_OR_RETURN(
        dims[static_cast<size_t>(2 + i)],
        window_out(x.shape[2 + i], pads[static_cast<size_t>(i)], pads[static_cast<size_t>(i + 2)],
                   w.shape[2 + i], dilations[static_cast<size_t>(i)],
                   strides[static_cast<size_t>(i)], false, i));
  }
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_pool(OpKind op, const TensorType& x, const AttrReader& attrs) {
  CARVE_RETURN_IF_ERROR(expect_rank(x, 4, "input (NCHW)"));
  if (op == OpKind::kAvgPool) {
    CARVE_RETURN_IF_ERROR(expect_float(x, "input"));
    CARVE_RETURN_IF_ERROR(attrs.get_flag("count_include_pad", false).status());
  } else {
    CARVE_RETURN_IF_ERROR(expect_numeric(x, "input"));
  }
  CARVE_ASSIGN_OR_RETURN(auto kernel, fixed_list(attrs, "kernel", {}, 2, 1, true));
  CARVE_ASSIGN_OR_RETURN(auto strides, fixed_list(attrs, "strides", {1, 1}, 2, 1));
  CARVE_ASSIGN_OR_RETURN(auto pads, fixed_list(attrs, "pads", {0, 0, 0, 0}, 4, 0));
  CARVE_ASSIGN_OR_RETURN(bool ceil_mode, attrs.get_flag("ceil_mode", false));
  // A pad as wide as the window would give windows that see only padding.
  for (size_t i = 0; i < 4; ++i) {
    if (pads[i] >= kernel[i % 2]) {
      return attr_error(fmt::format("attribute 'pads' = [{}]: pad {} must be < kernel {}",
                                    fmt::join(pads, ","), pads[i], kernel[i % 2]));
    }
  }
  std::vector<int64_t> dims = {x.shape[0], x.shape[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    auto u = static_cast<size_t>(i);
    CARVE_ASSIGN_OR_RETURN(dims[u + 2], window_out(x.shape[2 + i], pads[u], pads[u + 2], kernel[u],
                                                   1, strides[u], ceil_mode, i));
  }
  return Types{TensorType{x.dtype, Shape(std::move(dims))}};
}

Result<Types> infer_batch_norm(Inputs in, const AttrReader& attrs) {
  const TensorType& x = in[0];
  CARVE_RETURN_IF_ERROR(expect_float(x, "input"));
  CARVE_RETURN_IF_ERROR(expect_min_rank(x, 2, "input"));
  CARVE_RETURN_IF_ERROR(check_epsilon(attrs));
  const char* names[] = {"x", "scale", "bias", "mean", "var"};
  Shape channel{x.shape[1]};
  for (size_t i = 1; i < 5; ++i) {
    CARVE_RETURN_IF_ERROR(expect_same_dtype(x, in[i], fmt::format("x and {}", names[i])));
    if (in[i].shape != channel) {
      return shape_error(fmt::format("{} must have shape {} (channels), got {}", names[i],
                                     channel.to_string(), in[i].shape.to_string()));
    }
  }
  return Types{x};
}

}  // namespace

Result<Types> infer_nn(OpKind op, Inputs in, const AttrReader& attrs) {
  switch (op) {
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceProd:
      return infer_reduce(op, in[0], attrs);
    case OpKind::kArgMax:
    case OpKind::kArgMin:
      return infer_arg(in[0], attrs);
    case OpKind::kSoftmax:
      return infer_softmax(in[0], attrs);
    case OpKind::kLayerNorm:
      return infer_layer_norm(in, attrs);
    case OpKind::kMatmul:
      return infer_matmul(in[0], in[1]);
    case OpKind::kGemm:
      return infer_gemm(in, attrs);
    case OpKind::kConv2d:
      return infer_conv(in, attrs);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return infer_pool(op, in[0], attrs);
    case OpKind::kGlobalAvgPool: {
      CARVE_RETURN_IF_ERROR(expect_float(in[0], "input"));
      CARVE_RETURN_IF_ERROR(expect_min_rank(in[0], 3, "input (N,C,spatial...)"));
      std::vector<int64_t> dims = in[0].shape.dims();
      std::fill(dims.begin() + 2, dims.end(), 1);
      return Types{TensorType{in[0].dtype, Shape(std::move(dims))}};
    }
    case OpKind::kBatchNorm:
      return infer_batch_norm(in, attrs);
    default:
      break;
  }
  return Status(ErrorCode::kInternal, fmt::format("infer_nn called for {}", op_name(op)));
}

}  // namespace carve::ir::detail
