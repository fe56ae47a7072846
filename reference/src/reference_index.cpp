// Reference kernels of the indexing ops: gather_nd, scatter_nd (with its reductions) and
// top_k. Every index is checked (a negative one counted from the end) before anything is
// written; one outside its dim is kOutOfBounds naming it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "reference_internal.h"

namespace carve::reference::ref {
namespace {

using ir::OpKind;

// indices [n..., k] as n rows of k coordinates into dims [first, first + k) of `data`,
// each checked and wrapped; returns the row offsets in elements of data (strides of data).
Result<std::vector<int64_t>> index_offsets(const Ctx& ctx, const ir::Shape& data, int first) {
  const ir::TensorType& ti = ctx.in_type(1);
  const int64_t k = ti.shape[ti.shape.rank() - 1];
  const std::vector<int64_t> raw = load_i64(ti.dtype, ctx.in[1], count(ti.shape));
  const std::vector<int64_t> strides = row_major_strides(data);
  const auto rows = k == 0 ? 0 : raw.size() / static_cast<size_t>(k);
  std::vector<int64_t> offsets(rows, 0);
  for (size_t row = 0; row < rows; ++row) {
    for (int64_t j = 0; j < k; ++j) {
      const int d = first + static_cast<int>(j);
      const int64_t extent = data[d];
      const int64_t v = raw[row * static_cast<size_t>(k) + static_cast<size_t>(j)];
      const int64_t idx = v < 0 ? v + extent : v;
      if (idx < 0 || idx >= extent) {
        return ctx.error(ErrorCode::kOutOfBounds,
                         fmt::format("index {} (row {}, coordinate {} of indices {}) is out of range [{}, {}) for "
                                     "dim {} of {}",
                                     v, row, j, ti.shape.to_string(), -extent, extent, d, data.to_string()));
      }
      offsets[row] += idx * strides[static_cast<size_t>(d)];
    }
  }
  return offsets;
}

Status gather_nd(const Ctx& ctx) {
  const ir::TensorType& data = ctx.in_type(0);
  const ir::TensorType& ti = ctx.in_type(1);
  const auto b = static_cast<int>(ctx.attr_int("batch_dims", 0));
  const int64_t k = ti.shape[ti.shape.rank() - 1];
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, index_offsets(ctx, data.shape, b));
  const size_t esize = static_cast<size_t>(ir::dtype_size(data.dtype));
  const int64_t slice = dims_product(data.shape, b + static_cast<int>(k), data.shape.rank());
  const int64_t batch_stride = dims_product(data.shape, b, data.shape.rank());
  const int64_t batches = dims_product(data.shape, 0, b);
  const size_t per_batch = batches == 0 ? 0 : offsets.size() / static_cast<size_t>(batches);
  const size_t slice_bytes = static_cast<size_t>(slice) * esize;
  auto* out = static_cast<uint8_t*>(ctx.out[0]);
  const auto* in = static_cast<const uint8_t*>(ctx.in[0]);
  for (size_t row = 0; row < offsets.size(); ++row) {
    const int64_t batch = static_cast<int64_t>(row / per_batch);
    const auto src = static_cast<size_t>(batch * batch_stride + offsets[row]) * esize;
    copy_bytes(out + row * slice_bytes, in + src, slice_bytes);
  }
  return Status();
}

// The value `dtype` stores for v (rounded or wrapped), so each update sees what the
// previous one left in memory, as the kernels do.
template <typename V>
V stored(ir::DType dtype, V v) {
  uint8_t buf[8];
  store<V>(dtype, std::span<const V>(&v, 1), buf);
  return load<V>(dtype, buf, 1)[0];
}

template <typename V>
V combine(const std::string& reduction, V old, V upd) {
  if (reduction == "add") {
    if constexpr (std::is_same_v<V, double>) return old + upd;
    else return wrap_add(old, upd);
  }
  if (reduction == "mul") {
    if constexpr (std::is_same_v<V, double>) return old * upd;
    else return wrap_mul(old, upd);
  }
  if (is_nan_value(old) || is_nan_value(upd)) return old + upd;  // NaN propagates (np.maximum)
  if (reduction == "max") return std::max(old, upd);
  return std::min(old, upd);
}

template <typename V>
void scatter_reduce(const Ctx& ctx, const std::vector<int64_t>& offsets, int64_t slice, const std::string& reduction) {
  const ir::TensorType& data = ctx.in_type(0);
  std::vector<V> out = load<V>(data.dtype, ctx.in[0], count(data.shape));
  const std::vector<V> upd = load<V>(data.dtype, ctx.in[2], count(ctx.in_type(2).shape));
  for (size_t row = 0; row < offsets.size(); ++row) {
    for (int64_t s = 0; s < slice; ++s) {
      V& o = out[static_cast<size_t>(offsets[row] + s)];
      o = stored(data.dtype, combine(reduction, o, upd[row * static_cast<size_t>(slice) + static_cast<size_t>(s)]));
    }
  }
  store<V>(data.dtype, out, ctx.out[0]);
}

Status scatter_nd(const Ctx& ctx) {
  const ir::TensorType& data = ctx.in_type(0);
  const ir::TensorType& ti = ctx.in_type(1);
  const int64_t k = ti.shape[ti.shape.rank() - 1];
  std::string reduction = ctx.attr_string("reduction");
  if (reduction.empty()) reduction = "none";
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, index_offsets(ctx, data.shape, 0));
  const int64_t slice = dims_product(data.shape, static_cast<int>(k), data.shape.rank());
  if (reduction != "none") {
    if (ir::is_float(data.dtype)) {
      scatter_reduce<double>(ctx, offsets, slice, reduction);
    } else {
      scatter_reduce<int64_t>(ctx, offsets, slice, reduction);
    }
    return Status();
  }
  const size_t esize = static_cast<size_t>(ir::dtype_size(data.dtype));
  const size_t slice_bytes = static_cast<size_t>(slice) * esize;
  auto* out = static_cast<uint8_t*>(ctx.out[0]);
  copy_bytes(out, ctx.in[0], static_cast<size_t>(count(data.shape)) * esize);
  for (size_t row = 0; row < offsets.size(); ++row) {
    copy_bytes(out + static_cast<size_t>(offsets[row]) * esize, static_cast<const uint8_t*>(ctx.in[2]) + row * slice_bytes,
               slice_bytes);
  }
  return Status();
}

// top_k with std::stable_sort (ties keep the lower index first); NaN sorts after every
// number in both directions.
template <typename V>
Status top_k(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const int rank = tx.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", -1), rank);
  const int64_t k = ctx.attr_int("k", 0);
  const bool largest = ctx.attr_int("largest", 1) != 0;
  const int64_t outer = dims_product(tx.shape, 0, axis);
  const int64_t len = tx.shape[axis];
  const int64_t inner = dims_product(tx.shape, axis + 1, rank);
  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], count(tx.shape));
  auto is_nan = [](V v) { return is_nan_value(v); };
  std::vector<V> values(static_cast<size_t>(outer * k * inner));
  std::vector<int64_t> indices(values.size());
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t j) { return x[static_cast<size_t>((o * len + j) * inner + in)]; };
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const V va = at(a), vb = at(b);
        if (is_nan(va) || is_nan(vb)) return !is_nan(va) && is_nan(vb);
        return largest ? va > vb : va < vb;
      });
      for (int64_t j = 0; j < k; ++j) {
        const auto dst = static_cast<size_t>((o * k + j) * inner + in);
        values[dst] = at(order[static_cast<size_t>(j)]);
        indices[dst] = order[static_cast<size_t>(j)];
      }
    }
  }
  store<V>(tx.dtype, values, ctx.out[0]);
  store_i64(ir::DType::kI64, indices, ctx.out[1]);
  return Status();
}

}  // namespace

Status run_index(const Ctx& ctx) {
  switch (ctx.node.op) {
    case OpKind::kGatherNd: return gather_nd(ctx);
    case OpKind::kScatterNd: return scatter_nd(ctx);
    case OpKind::kTopK:
      return ir::is_float(ctx.in_type(0).dtype) ? top_k<double>(ctx) : top_k<int64_t>(ctx);
    default: break;
  }
  return ctx.error(ErrorCode::kInternal, "not an indexing op");
}

}  // namespace carve::reference::ref
