// Reference kernels of the ops with a data-dependent extent (ir/extent.h): non_zero,
// unique and non_max_suppression. Each writes its result packed at the actual extent
// from the output's first byte, zeroes the rest of the planned bytes, and writes the
// extent to its last output.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "reference_internal.h"

namespace carve::reference::ref {
namespace {

using ir::OpKind;

void write_extent(const Ctx& ctx, int64_t extent) {
  std::memcpy(ctx.out[ctx.node.outputs.size() - 1], &extent, sizeof extent);
}

// The i64 output `i` laid out packed from its first element, zeros after.
void store_packed_i64(const Ctx& ctx, size_t i, std::vector<int64_t> values) {
  values.resize(static_cast<size_t>(count(ctx.out_type(i).shape)), 0);
  store_i64(ir::DType::kI64, values, ctx.out[i]);
}

template <typename V>
Status non_zero(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const int64_t n = count(tx.shape);
  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], n);
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < n; ++i)
    if (x[static_cast<size_t>(i)] != V{0}) hits.push_back(i);  // NaN is nonzero
  const ir::Shape shape = tx.shape.rank() == 0 ? ir::Shape({1}) : tx.shape;
  const std::vector<int64_t> strides = row_major_strides(shape);
  const auto found = static_cast<int64_t>(hits.size());
  std::vector<int64_t> coords(static_cast<size_t>(shape.rank() * found));
  for (int d = 0; d < shape.rank(); ++d) {
    for (int64_t h = 0; h < found; ++h) {
      const int64_t flat = hits[static_cast<size_t>(h)];
      coords[static_cast<size_t>(d * found + h)] = flat / strides[static_cast<size_t>(d)] % shape[d];
    }
  }
  store_packed_i64(ctx, 0, std::move(coords));
  write_extent(ctx, found);
  return Status();
}

// -1, 0, 1: a before, equal to, after b; NaN equals NaN and follows every number.
template <typename V>
int compare_values(V a, V b) {
  const bool na = is_nan_value(a), nb = is_nan_value(b);
  if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  return a < b ? -1 : (b < a ? 1 : 0);
}

template <typename V>
Status unique(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const ir::Shape& ys = ctx.out_type(0).shape;  // x's shape, or x flattened
  const bool has_axis = ctx.node.attrs.contains("axis");
  const int axis = has_axis ? normalize_axis(ctx.attr_int("axis", 0), ys.rank()) : 0;
  const int64_t outer = dims_product(ys, 0, axis), len = ys[axis], inner = dims_product(ys, axis + 1, ys.rank());
  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], count(tx.shape));
  auto at = [&](int64_t o, int64_t s, int64_t in) { return x[static_cast<size_t>((o * len + s) * inner + in)]; };
  auto compare = [&](int64_t a, int64_t b) {  // slices a and b, lexicographically
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in)
        if (int c = compare_values(at(o, a, in), at(o, b, in)); c != 0) return c;
    return 0;
  };
  std::vector<int64_t> first_of(static_cast<size_t>(len));
  std::vector<int64_t> firsts;
  for (int64_t s = 0; s < len; ++s) {
    int64_t f = 0;
    while (f < s && compare(f, s) != 0) ++f;
    first_of[static_cast<size_t>(s)] = f;
    if (f == s) firsts.push_back(s);
  }
  if (sorted) std::stable_sort(firsts.begin(), firsts.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
  const auto u = static_cast<int64_t>(firsts.size());
  std::vector<int64_t> position_of(static_cast<size_t>(len), 0), counts(static_cast<size_t>(u), 0);
  for (int64_t p = 0; p < u; ++p) position_of[static_cast<size_t>(firsts[static_cast<size_t>(p)])] = p;
  std::vector<int64_t> inverse(static_cast<size_t>(len));
  for (int64_t s = 0; s < len; ++s) {
    const int64_t p = position_of[static_cast<size_t>(first_of[static_cast<size_t>(s)])];
    inverse[static_cast<size_t>(s)] = p;
    ++counts[static_cast<size_t>(p)];
  }
  std::vector<V> y(static_cast<size_t>(count(ys)), V{0});
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < u; ++p)
      for (int64_t in = 0; in < inner; ++in)
        y[static_cast<size_t>((o * u + p) * inner + in)] = at(o, firsts[static_cast<size_t>(p)], in);
  store<V>(tx.dtype, y, ctx.out[0]);
  store_packed_i64(ctx, 1, firsts);
  store_packed_i64(ctx, 2, inverse);
  store_packed_i64(ctx, 3, counts);
  write_extent(ctx, u);
  return Status();
}

// Box `i` of `boxes` as x/y min/max, from corners [y1, x1, y2, x2] (either order) or
// [x_center, y_center, width, height]; in f32 as ONNX Runtime computes it.
struct Corners {
  float x_min, y_min, x_max, y_max;
};
Corners corners(const float* box, bool center) {
  if (center) {
    const float half_w = box[2] / 2, half_h = box[3] / 2;
    return {box[0] - half_w, box[1] - half_h, box[0] + half_w, box[1] + half_h};
  }
  return {std::min(box[1], box[3]), std::min(box[0], box[2]), std::max(box[1], box[3]), std::max(box[0], box[2])};
}

bool suppresses(const Corners& a, const Corners& b, float iou_threshold) {
  const float ix_min = std::max(a.x_min, b.x_min), iy_min = std::max(a.y_min, b.y_min);
  const float ix_max = std::min(a.x_max, b.x_max), iy_max = std::min(a.y_max, b.y_max);
  if (ix_max <= ix_min || iy_max <= iy_min) return false;
  const float intersection = (ix_max - ix_min) * (iy_max - iy_min);
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  if (area_a <= 0 || area_b <= 0) return false;
  const float union_area = area_a + area_b - intersection;
  if (union_area <= 0) return false;
  return intersection / union_area > iou_threshold;
}

Status non_max_suppression(const Ctx& ctx) {
  const ir::Shape& bs = ctx.in_type(0).shape;
  const int64_t batches = bs[0], n = bs[1], classes = ctx.in_type(1).shape[1];
  const bool center = ctx.attr_int("center_point_box", 0) != 0;
  const auto* boxes = static_cast<const float*>(ctx.in[0]);
  const auto* scores = static_cast<const float*>(ctx.in[1]);
  int64_t max_per_class = 0;
  float iou_threshold = 0;
  std::memcpy(&max_per_class, ctx.in[2], sizeof max_per_class);
  std::memcpy(&iou_threshold, ctx.in[3], sizeof iou_threshold);
  const bool has_score_threshold = ctx.in.size() > 4;
  float score_threshold = 0;
  if (has_score_threshold) std::memcpy(&score_threshold, ctx.in[4], sizeof score_threshold);
  std::vector<int64_t> rows;
  std::vector<int64_t> candidates, kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores + (b * classes + c) * n;
      candidates.clear();
      for (int64_t i = 0; i < n; ++i) {
        const float v = s[i];
        if (v == v && (!has_score_threshold || v > score_threshold)) candidates.push_back(i);  // never NaN
      }
      std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const Corners box = corners(boxes + (b * n + i) * 4, center);
        const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return suppresses(corners(boxes + (b * n + k) * 4, center), box, iou_threshold);
        });
        if (suppressed) continue;
        kept.push_back(i);
        rows.insert(rows.end(), {b, c, i});
      }
    }
  }
  const auto selected = static_cast<int64_t>(rows.size() / 3);
  store_packed_i64(ctx, 0, std::move(rows));
  write_extent(ctx, selected);
  return Status();
}

}  // namespace

Status run_dynamic(const Ctx& ctx) {
  const ir::DType dtype = ctx.in_type(0).dtype;
  switch (ctx.node.op) {
    case OpKind::kNonZero: return CARVE_REF_DISPATCH(dtype, non_zero, ctx);
    case OpKind::kUnique: return CARVE_REF_DISPATCH(dtype, unique, ctx);
    case OpKind::kNonMaxSuppression: return non_max_suppression(ctx);
    default: break;
  }
  return ctx.error(ErrorCode::kInternal, "not an op with a data-dependent extent");
}

}  // namespace carve::reference::ref
