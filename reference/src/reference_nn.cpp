// Reference kernels: reductions, softmax, layer_norm, matmul, gemm, conv2d, pooling,
// batch_norm. Float sums accumulate in double; integer sums wrap (computed in uint64).
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "reference_internal.h"

namespace carve::reference::ref {
namespace {

using ir::OpKind;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// acc + a * b: plain double or uint64 (wrapping) arithmetic, or int64 wrap-around
// arithmetic without signed overflow.
template <typename V>
V mul_add(V acc, V a, V b) {
  if constexpr (std::is_same_v<V, int64_t>) {
    return wrap_add(acc, wrap_mul(a, b));
  } else {
    return acc + a * b;
  }
}
template <typename V>
V plus(V a, V b) {
  if constexpr (std::is_same_v<V, int64_t>) {
    return wrap_add(a, b);
  } else {
    return a + b;
  }
}
template <typename V>
V times(V a, V b) {
  if constexpr (std::is_same_v<V, int64_t>) {
    return wrap_mul(a, b);
  } else {
    return a * b;
  }
}
// max that propagates NaN.
template <typename V>
V max_nan(V acc, V v) {
  if constexpr (std::is_same_v<V, double>) {
    if (std::isnan(acc) || std::isnan(v)) return kNaN;
  }
  return v > acc ? v : acc;
}
// The smallest value of the dtype: -inf for floats, the minimum for integers.
template <typename V>
V lowest(ir::DType dtype) {
  if constexpr (std::is_same_v<V, double>) {
    return -kInf;
  } else if constexpr (std::is_same_v<V, uint64_t>) {
    return 0;
  } else {
    std::vector<uint8_t> bytes = encode_double(dtype, -kInf);  // saturates to the minimum
    return load_i64(dtype, bytes.data(), 1)[0];
  }
}

// ---- reductions ----

template <typename V>
Status reduce(const Ctx& ctx) {
  const OpKind op = ctx.node.op;
  const ir::TensorType& tx = ctx.in_type(0);
  const ir::TensorType& ty = ctx.out_type(0);
  const int rank = tx.shape.rank();
  std::vector<int64_t> axes = ctx.attr_ints("axes", {});
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
  // The output as if keepdims = 1 (same element order either way); reduced dims stride 0.
  std::vector<int64_t> kept = tx.shape.dims();
  int64_t group = 1;
  for (int i = 0; i < rank; ++i) {
    if (reduced[static_cast<size_t>(i)]) {
      group *= kept[static_cast<size_t>(i)];
      kept[static_cast<size_t>(i)] = 1;
    }
  }
  std::vector<int64_t> out_strides = broadcast_strides(ir::Shape(kept), tx.shape);

  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], count(tx.shape));
  const auto n_out = static_cast<size_t>(count(ty.shape));
  const V identity = op == OpKind::kReduceMax ? lowest<V>(tx.dtype) : op == OpKind::kReduceProd ? V{1} : V{0};
  std::vector<V> acc(n_out, identity);
  IndexWalker walk(tx.shape, {out_strides});
  for (size_t i = 0; i < x.size(); ++i, walk.next()) {
    V& a = acc[static_cast<size_t>(walk.offset(0))];
    switch (op) {
      case OpKind::kReduceMax: a = max_nan(a, x[i]); break;
      case OpKind::kReduceProd: a = times(a, x[i]); break;
      default: a = plus(a, x[i]); break;
    }
  }
  if (op == OpKind::kReduceMean) {
    if constexpr (std::is_same_v<V, double>) {
      for (double& a : acc) a /= static_cast<double>(group);  // 0 / 0 = NaN for an empty group
    }
  }
  store<V>(ty.dtype, acc, ctx.out[0]);
  return Status();
}

// arg_max / arg_min along one axis, numpy's NaN rule: a NaN beats every number and the
// first NaN (the last with select_last_index) wins.
template <typename V>
Status arg_select(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const int rank = tx.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", 0), rank);
  const bool is_max = ctx.node.op == OpKind::kArgMax;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  const int64_t outer = dims_product(tx.shape, 0, axis);
  const int64_t len = tx.shape[axis];
  const int64_t inner = dims_product(tx.shape, axis + 1, rank);
  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], count(tx.shape));
  auto is_nan = [](V v) { return is_nan_value(v); };
  // Whether v replaces the best so far (seen at a lower index).
  auto better = [&](V v, V best) {
    if (is_nan(best)) return last && is_nan(v);
    if (is_nan(v)) return true;
    if (v == best) return last;
    return is_max ? v > best : v < best;
  };
  std::vector<int64_t> y(static_cast<size_t>(outer * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return x[static_cast<size_t>((o * len + k) * inner + in)]; };
      int64_t best = 0;  // inference rejects an empty axis
      for (int64_t k = 1; k < len; ++k) {
        if (better(at(k), at(best))) best = k;
      }
      y[static_cast<size_t>(o * inner + in)] = best;
    }
  }
  store_i64(ir::DType::kI64, y, ctx.out[0]);
  return Status();
}

// ---- softmax, layer_norm, batch_norm (float only) ----

Status softmax(const Ctx& ctx) {
  const ir::TensorType& t = ctx.in_type(0);
  const int rank = t.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", -1), rank);
  const int64_t outer = dims_product(t.shape, 0, axis);
  const int64_t len = t.shape[axis];
  const int64_t inner = dims_product(t.shape, axis + 1, rank);
  std::vector<double> x = load_f64(t.dtype, ctx.in[0], count(t.shape));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) -> double& {
        return x[static_cast<size_t>((o * len + k) * inner + in)];
      };
      double m = -kInf;
      for (int64_t k = 0; k < len; ++k) m = max_nan(m, at(k));
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) {
        at(k) = std::exp(at(k) - m);
        sum += at(k);
      }
      for (int64_t k = 0; k < len; ++k) at(k) /= sum;
    }
  }
  store_f64(ctx.out_type(0).dtype, x, ctx.out[0]);
  return Status();
}

Status layer_norm(const Ctx& ctx) {
  const ir::TensorType& t = ctx.in_type(0);
  const int rank = t.shape.rank();
  const int axis = normalize_axis(ctx.attr_int("axis", -1), rank);
  const double eps = ctx.attr_float("epsilon", 1e-5);
  const int64_t outer = dims_product(t.shape, 0, axis);
  const int64_t inner = dims_product(t.shape, axis, rank);
  std::vector<double> x = load_f64(t.dtype, ctx.in[0], count(t.shape));
  const std::vector<double> scale = load_f64(t.dtype, ctx.in[1], inner);
  const std::vector<double> bias =
      ctx.in.size() > 2 ? load_f64(t.dtype, ctx.in[2], inner) : std::vector<double>(static_cast<size_t>(inner), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    double* row = x.data() + o * inner;
    double mean = 0;
    for (int64_t j = 0; j < inner; ++j) mean += row[j];
    mean /= static_cast<double>(inner);
    double var = 0;
    for (int64_t j = 0; j < inner; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(inner);  // biased
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j) {
      row[j] = (row[j] - mean) * inv * scale[static_cast<size_t>(j)] + bias[static_cast<size_t>(j)];
    }
  }
  store_f64(ctx.out_type(0).dtype, x, ctx.out[0]);
  return Status();
}

Status batch_norm(const Ctx& ctx) {
  const ir::TensorType& t = ctx.in_type(0);
  const double eps = ctx.attr_float("epsilon", 1e-5);
  const int64_t n = t.shape[0];
  const int64_t channels = t.shape[1];
  const int64_t spatial = dims_product(t.shape, 2, t.shape.rank());
  std::vector<double> x = load_f64(t.dtype, ctx.in[0], count(t.shape));
  std::vector<double> p[4];  // scale, bias, mean, var
  for (size_t i = 0; i < 4; ++i) p[i] = load_f64(t.dtype, ctx.in[i + 1], channels);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      const auto u = static_cast<size_t>(c);
      const double inv = 1.0 / std::sqrt(p[3][u] + eps);
      double* plane = x.data() + (b * channels + c) * spatial;
      for (int64_t s = 0; s < spatial; ++s) plane[s] = (plane[s] - p[2][u]) * inv * p[0][u] + p[1][u];
    }
  }
  store_f64(t.dtype, x, ctx.out[0]);
  return Status();
}

// ---- matmul, gemm ----

template <typename V>
Status matmul(const Ctx& ctx) {
  const ir::TensorType& ta = ctx.in_type(0);
  const ir::TensorType& tb = ctx.in_type(1);
  const ir::TensorType& ty = ctx.out_type(0);
  std::vector<int64_t> ad = ta.shape.dims(), bd = tb.shape.dims();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);  // a row [1,K]
  if (b_vec) bd.push_back(1);           // a column [K,1]
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  const ir::Shape a_batch(std::vector<int64_t>(ad.begin(), ad.end() - 2));
  const ir::Shape b_batch(std::vector<int64_t>(bd.begin(), bd.end() - 2));
  const int batch_rank = ty.shape.rank() - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  const ir::Shape batch(std::vector<int64_t>(ty.shape.dims().begin(),
                                             ty.shape.dims().begin() + batch_rank));
  std::vector<int64_t> a_strides = broadcast_strides(a_batch, batch);
  std::vector<int64_t> b_strides = broadcast_strides(b_batch, batch);
  for (int64_t& s : a_strides) s *= m * k;
  for (int64_t& s : b_strides) s *= k * n;

  const std::vector<V> a = load<V>(ta.dtype, ctx.in[0], count(ta.shape));
  const std::vector<V> b = load<V>(tb.dtype, ctx.in[1], count(tb.shape));
  std::vector<V> y(static_cast<size_t>(count(ty.shape)), V{0});
  const int64_t batches = count(batch);
  IndexWalker walk(batch, {a_strides, b_strides});
  for (int64_t bi = 0; bi < batches; ++bi, walk.next()) {
    const V* am = a.data() + walk.offset(0);
    const V* bm = b.data() + walk.offset(1);
    V* ym = y.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t kk = 0; kk < k; ++kk) {
        const V aik = am[i * k + kk];
        const V* brow = bm + kk * n;
        V* yrow = ym + i * n;
        for (int64_t j = 0; j < n; ++j) yrow[j] = mul_add(yrow[j], aik, brow[j]);
      }
    }
  }
  store<V>(ty.dtype, y, ctx.out[0]);
  return Status();
}

template <typename V>
Status gemm(const Ctx& ctx) {
  const ir::TensorType& ta = ctx.in_type(0);
  const ir::TensorType& tb = ctx.in_type(1);
  const ir::TensorType& ty = ctx.out_type(0);
  const bool trans_a = ctx.attr_int("trans_a", 0) != 0;
  const bool trans_b = ctx.attr_int("trans_b", 0) != 0;
  const double alpha = ctx.attr_float("alpha", 1.0);
  const double beta = ctx.attr_float("beta", 1.0);
  const int64_t m = ty.shape[0], n = ty.shape[1];
  const int64_t k = trans_a ? ta.shape[0] : ta.shape[1];
  const std::vector<V> a = load<V>(ta.dtype, ctx.in[0], count(ta.shape));
  const std::vector<V> b = load<V>(tb.dtype, ctx.in[1], count(tb.shape));
  auto a_at = [&](int64_t i, int64_t kk) { return a[static_cast<size_t>(trans_a ? kk * m + i : i * k + kk)]; };
  auto b_at = [&](int64_t kk, int64_t j) { return b[static_cast<size_t>(trans_b ? j * k + kk : kk * n + j)]; };
  std::vector<V> acc(static_cast<size_t>(m * n), V{0});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      V s{0};
      for (int64_t kk = 0; kk < k; ++kk) s = mul_add(s, a_at(i, kk), b_at(kk, j));
      acc[static_cast<size_t>(i * n + j)] = s;
    }
  }
  // c broadcast to [M, N] (zeros when absent).
  std::vector<V> c(static_cast<size_t>(m * n), V{0});
  if (ctx.in.size() > 2) {
    const ir::TensorType& tc = ctx.in_type(2);
    const std::vector<V> craw = load<V>(tc.dtype, ctx.in[2], count(tc.shape));
    IndexWalker walk(ty.shape, {broadcast_strides(tc.shape, ty.shape)});
    for (size_t i = 0; i < c.size(); ++i, walk.next()) c[i] = craw[static_cast<size_t>(walk.offset(0))];
  }
  if constexpr (std::is_same_v<V, double>) {
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = alpha * acc[i] + beta * c[i];
    store_f64(ty.dtype, acc, ctx.out[0]);
  } else {
    if (alpha == 1.0 && beta == 1.0) {
      for (size_t i = 0; i < acc.size(); ++i) acc[i] = plus(acc[i], c[i]);
      store<V>(ty.dtype, acc, ctx.out[0]);
    } else {
      // alpha * acc + beta * c in double, acc first wrapped to the dtype's width.
      store<V>(ty.dtype, acc, ctx.out[0]);
      const std::vector<V> wrapped = load<V>(ty.dtype, ctx.out[0], m * n);
      std::vector<double> y(acc.size());
      for (size_t i = 0; i < y.size(); ++i) {
        y[i] = alpha * static_cast<double>(wrapped[i]) + beta * static_cast<double>(c[i]);
      }
      store_f64(ty.dtype, y, ctx.out[0]);
    }
  }
  return Status();
}

// ---- conv2d, pooling ----

struct Window {
  int64_t kernel[2];
  int64_t strides[2];
  int64_t pads[4];  // top, left, bottom, right
  int64_t dilations[2];
};

Window read_window(const Ctx& ctx, std::vector<int64_t> kernel) {
  Window w{};
  const std::vector<int64_t> strides = ctx.attr_ints("strides", {1, 1});
  const std::vector<int64_t> pads = ctx.attr_ints("pads", {0, 0, 0, 0});
  const std::vector<int64_t> dilations = ctx.attr_ints("dilations", {1, 1});
  for (size_t i = 0; i < 2; ++i) {
    w.kernel[i] = kernel[i];
    w.strides[i] = strides[i];
    w.dilations[i] = dilations[i];
  }
  for (size_t i = 0; i < 4; ++i) w.pads[i] = pads[i];
  return w;
}

template <typename V>
Status conv2d(const Ctx& ctx) {
  const ir::TensorType& tx = ctx.in_type(0);
  const ir::TensorType& tw = ctx.in_type(1);
  const ir::TensorType& ty = ctx.out_type(0);
  const int64_t batch = tx.shape[0], channels = tx.shape[1], h = tx.shape[2], w = tx.shape[3];
  const int64_t outs = tw.shape[0], cg = tw.shape[1], kh = tw.shape[2], kw = tw.shape[3];
  const int64_t oh = ty.shape[2], ow = ty.shape[3];
  const int64_t groups = ctx.attr_int("groups", 1);
  const int64_t per_group = outs / groups;
  const Window win = read_window(ctx, {kh, kw});
  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], count(tx.shape));
  const std::vector<V> wt = load<V>(tw.dtype, ctx.in[1], count(tw.shape));
  const std::vector<V> bias =
      ctx.in.size() > 2 ? load<V>(tx.dtype, ctx.in[2], outs) : std::vector<V>(static_cast<size_t>(outs), V{0});
  std::vector<V> y(static_cast<size_t>(count(ty.shape)), V{0});
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t o = 0; o < outs; ++o) {
      const int64_t g = o / per_group;
      V* plane = y.data() + (b * outs + o) * oh * ow;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t c = g * cg + ci;
        const V* xplane = x.data() + (b * channels + c) * h * w;
        for (int64_t ky = 0; ky < kh; ++ky) {
          for (int64_t kx = 0; kx < kw; ++kx) {
            const V weight = wt[static_cast<size_t>(((o * cg + ci) * kh + ky) * kw + kx)];
            for (int64_t py = 0; py < oh; ++py) {
              const int64_t iy = py * win.strides[0] - win.pads[0] + ky * win.dilations[0];
              if (iy < 0 || iy >= h) continue;
              for (int64_t px = 0; px < ow; ++px) {
                const int64_t ix = px * win.strides[1] - win.pads[1] + kx * win.dilations[1];
                if (ix < 0 || ix >= w) continue;
                plane[py * ow + px] = mul_add(plane[py * ow + px], weight, xplane[iy * w + ix]);
              }
            }
          }
        }
      }
      for (int64_t p = 0; p < oh * ow; ++p) plane[p] = plus(plane[p], bias[static_cast<size_t>(o)]);
    }
  }
  store<V>(ty.dtype, y, ctx.out[0]);
  return Status();
}

template <typename V>
Status pool(const Ctx& ctx) {
  const OpKind op = ctx.node.op;
  const ir::TensorType& tx = ctx.in_type(0);
  const ir::TensorType& ty = ctx.out_type(0);
  const int64_t planes = tx.shape[0] * tx.shape[1], h = tx.shape[2], w = tx.shape[3];
  const int64_t oh = ty.shape[2], ow = ty.shape[3];
  const Window win = read_window(ctx, ctx.attr_ints("kernel", {1, 1}));
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  const std::vector<V> x = load<V>(tx.dtype, ctx.in[0], count(tx.shape));
  std::vector<V> y(static_cast<size_t>(count(ty.shape)), V{0});
  const V low = lowest<V>(tx.dtype);
  for (int64_t p = 0; p < planes; ++p) {
    const V* xp = x.data() + p * h * w;
    for (int64_t py = 0; py < oh; ++py) {
      const int64_t y0 = py * win.strides[0] - win.pads[0], y1 = y0 + win.kernel[0];
      for (int64_t px = 0; px < ow; ++px) {
        const int64_t x0 = px * win.strides[1] - win.pads[1], x1 = x0 + win.kernel[1];
        V acc = op == OpKind::kMaxPool ? low : V{0};
        int64_t valid = 0;
        for (int64_t iy = std::max<int64_t>(y0, 0); iy < std::min(y1, h); ++iy) {
          for (int64_t ix = std::max<int64_t>(x0, 0); ix < std::min(x1, w); ++ix) {
            const V v = xp[iy * w + ix];
            acc = op == OpKind::kMaxPool ? max_nan(acc, v) : plus(acc, v);
            ++valid;
          }
        }
        if constexpr (std::is_same_v<V, double>) {
          if (op == OpKind::kAvgPool) {
            // The window clipped to the padded extent (ceil_mode can reach past it).
            const int64_t padded = (std::min(y1, h + win.pads[2]) - y0) *
                                   (std::min(x1, w + win.pads[3]) - x0);
            acc /= static_cast<double>(include_pad ? padded : valid);
          }
        }
        y[static_cast<size_t>((p * oh + py) * ow + px)] = acc;
      }
    }
  }
  store<V>(ty.dtype, y, ctx.out[0]);
  return Status();
}

Status global_avg_pool(const Ctx& ctx) {
  const ir::TensorType& t = ctx.in_type(0);
  const int64_t planes = t.shape[0] * t.shape[1];
  const int64_t spatial = dims_product(t.shape, 2, t.shape.rank());
  const std::vector<double> x = load_f64(t.dtype, ctx.in[0], count(t.shape));
  std::vector<double> y(static_cast<size_t>(planes), 0.0);
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t s = 0; s < spatial; ++s) sum += x[static_cast<size_t>(p * spatial + s)];
    y[static_cast<size_t>(p)] = sum / static_cast<double>(spatial);
  }
  store_f64(t.dtype, y, ctx.out[0]);
  return Status();
}

}  // namespace

Status run_nn(const Ctx& ctx) {
  const ir::DType dtype = ctx.in_type(0).dtype;
  switch (ctx.node.op) {
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceProd:
      return CARVE_REF_DISPATCH(dtype, reduce, ctx);
    case OpKind::kArgMax:
    case OpKind::kArgMin:
      return CARVE_REF_DISPATCH(dtype, arg_select, ctx);
    case OpKind::kSoftmax: return softmax(ctx);
    case OpKind::kLayerNorm: return layer_norm(ctx);
    case OpKind::kMatmul: return CARVE_REF_DISPATCH(dtype, matmul, ctx);
    case OpKind::kGemm: return CARVE_REF_DISPATCH(dtype, gemm, ctx);
    case OpKind::kConv2d: return CARVE_REF_DISPATCH(dtype, conv2d, ctx);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return CARVE_REF_DISPATCH(dtype, pool, ctx);
    case OpKind::kGlobalAvgPool: return global_avg_pool(ctx);
    case OpKind::kBatchNorm: return batch_norm(ctx);
    default: break;
  }
  return ctx.error(ErrorCode::kInternal, "not an nn op");
}

}  // namespace carve::reference::ref
