#include "carve/jit/tiles.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "carve/jit/fusion.h"

namespace carve::jit {
namespace {

using ir::OpKind;

int64_t ceil_div(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < v.size(); ++i) p *= v[i];
  return p;
}

int64_t attr_int(const ir::Node& node, const char* name, int64_t fallback) {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_int() ? it->second.as_int() : fallback;
}

std::vector<int64_t> attr_ints(const ir::Node& node, const char* name,
                               std::vector<int64_t> fallback) {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_ints() ? it->second.as_ints() : fallback;
}

const ir::TensorType& in_type(const ir::Graph& g, const ir::Node& n, size_t i) {
  return g.value(n.inputs[i]).type;
}
const ir::TensorType& out_type(const ir::Graph& g, const ir::Node& n) {
  return g.value(n.outputs[0]).type;
}

int normalize(int64_t axis, int rank) {
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

bool packs(ir::DType d) { return d == ir::DType::kF32 || d == ir::DType::kF64; }

}  // namespace

namespace tiling {

UnitTiles unit_tiles(int64_t units, int64_t elements_per_unit) {
  UnitTiles t;
  t.units = std::max<int64_t>(units, 0);
  constexpr int64_t kMinElements = 16384;
  t.per_tile = std::max<int64_t>(1, ceil_div(kMinElements, std::max<int64_t>(1, elements_per_unit)));
  return t;
}

GemmTiles gemm_tiles(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t elem_bytes,
                     bool packed) {
  GemmTiles t;
  t.batch = std::max<int64_t>(batch, 0);
  t.m = m;
  t.n = n;
  t.k = k;
  constexpr int64_t kCols = 256;    // multiple of every micro-kernel width (<= 64)
  constexpr int64_t kMinRows = 24;  // rows per tile at least (B panel packed per tile)
  constexpr int64_t kRowAlign = 4;  // the smallest tail micro-kernel's height (emit_gemm)
  constexpr int64_t kKc = 256;
  t.cols_per_tile = std::max<int64_t>(1, std::min(n, kCols));
  t.col_tiles = std::max<int64_t>(1, ceil_div(n, t.cols_per_tile));
  // About 8 tiles in all, row tiles of (nearly) equal height: a short last tile would
  // leave a thread idle while another runs a long one.
  const bool split = m * n * std::max<int64_t>(k, 1) >= (int64_t{1} << 20);
  int64_t row_tiles = split ? std::max<int64_t>(1, 8 / t.col_tiles) : 1;
  row_tiles = std::min(row_tiles, std::max<int64_t>(1, m / kMinRows));
  int64_t rpt = round_up(ceil_div(m, row_tiles), kRowAlign);
  t.rows_per_tile = std::max<int64_t>(1, std::min(rpt, m));
  t.row_tiles = std::max<int64_t>(1, ceil_div(m, t.rows_per_tile));
  // Few rows (short sequences): narrower column tiles, for at least 4 tiles. Tiles start
  // at multiples of the widest pre-packed strip (tiling::gemv_strips: 2 vectors of 16
  // lanes above kGemvMaxRows rows, up to 8 vectors at one row).
  if (split && t.row_tiles * t.col_tiles < 4) {
    const int64_t align = m <= kGemvMaxRows ? 128 : 64;
    const int64_t cols = std::max(align, round_up(ceil_div(n, ceil_div(4, t.row_tiles)), align));
    if (cols < t.cols_per_tile) {
      t.cols_per_tile = cols;
      t.col_tiles = ceil_div(n, cols);
    }
  }
  t.kc = std::max<int64_t>(1, std::min(k, kKc));
  t.panel_ld = round_up(t.cols_per_tile, 64) + 16;
  t.panel_bytes = packed ? t.kc * t.panel_ld * elem_bytes : 0;
  return t;
}

MatmulShape matmul_shape(const ir::Graph& graph, const ir::Node& node) {
  MatmulShape s;
  const auto& a = in_type(graph, node, 0).shape.dims();
  const auto& b = in_type(graph, node, 1).shape.dims();
  if (node.op == OpKind::kGemm) {
    bool ta = attr_int(node, "trans_a", 0) != 0, tb = attr_int(node, "trans_b", 0) != 0;
    s.m = ta ? a[1] : a[0];
    s.k = ta ? a[0] : a[1];
    s.n = tb ? b[0] : b[1];
    return s;
  }
  std::vector<int64_t> ad = a, bd = b;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  s.m = ad[ad.size() - 2];
  s.k = ad.back();
  s.n = bd.back();
  size_t ab = ad.size() - 2, bb = bd.size() - 2;
  size_t rank = std::max(ab, bb);
  s.batch_dims.assign(rank, 1);
  s.a_batch_strides.assign(rank, 0);
  s.b_batch_strides.assign(rank, 0);
  int64_t a_stride = s.m * s.k, b_stride = s.k * s.n;
  for (size_t i = 0; i < rank; ++i) {
    size_t oi = rank - 1 - i;  // from the right
    int64_t da = i < ab ? ad[ab - 1 - i] : 1;
    int64_t db = i < bb ? bd[bb - 1 - i] : 1;
    s.batch_dims[oi] = std::max(da, db);
    if (da == 0 || db == 0) s.batch_dims[oi] = 0;
    s.a_batch_strides[oi] = da == 1 ? 0 : a_stride;
    s.b_batch_strides[oi] = db == 1 ? 0 : b_stride;
    a_stride *= da;
    b_stride *= db;
  }
  // B shared by every batch (a weight applied to [batch..., m, k], e.g. the
  // sequence-first projections of PyTorch's MultiheadAttention): A then has every batch
  // dim of its own, densely, so the batch folds into M and the product is one GEMM
  // instead of `batch` GEMMs that each pack the same B. Each output element's
  // summation is unchanged, so are its bytes.
  const int64_t batch = product(s.batch_dims, 0, s.batch_dims.size());
  const bool b_shared = std::all_of(s.b_batch_strides.begin(), s.b_batch_strides.end(),
                                    [](int64_t st) { return st == 0; });
  if (batch > 1 && b_shared) {
    s.m *= batch;
    s.batch_dims.clear();
    s.a_batch_strides.clear();
    s.b_batch_strides.clear();
  }
  return s;
}

GemmTiles matmul_tiles(const ir::Graph& graph, const ir::Node& node) {
  MatmulShape s = matmul_shape(graph, node);
  ir::DType d = in_type(graph, node, 0).dtype;
  int64_t batch = product(s.batch_dims, 0, s.batch_dims.size());
  return gemm_tiles(batch, s.m, s.n, s.k, ir::dtype_size(d), packs(d));
}

GemvStrips gemv_strips(int64_t m, ir::DType dtype, int vector_width_f32) {
  GemvStrips s;
  const int64_t wf = std::max(4, vector_width_f32);
  s.vec = dtype == ir::DType::kF64 ? std::max<int64_t>(2, wf / 2) : wf;
  // GEMV: >= 8 independent accumulators (m rows x vectors per strip) hide the FMA
  // latency. More rows: the MR-row micro-kernel's NR = 2 vectors.
  s.wide = m > kGemvMaxRows ? 2 * s.vec : s.vec * std::max<int64_t>(2, 8 / std::max<int64_t>(1, m));
  return s;
}

int vector_width_f32(std::string_view features) {
  if (features.find("+avx512f") != std::string_view::npos) return 16;
  if (features.find("+avx") != std::string_view::npos) return 8;
  return 4;
}

namespace {

// Columns of the strip of pack_gemv_b's layout that starts at column c of n.
int64_t strip_columns(int64_t c, int64_t n, const GemvStrips& strips) {
  if (c < n / strips.wide * strips.wide) return strips.wide;
  return c < n / strips.vec * strips.vec ? strips.vec : 1;
}

// One strip of a transposed B: w rows of k ([w][k], B's columns) into [k][w], in tiles of
// 64 rows of k so each column's run stays contiguous. Element by element down a column it
// read one element per row of k (vgg16's first classifier layer, k = 25088: 10 % of a warm
// process's time, most of it TLB misses).
template <typename E>
void transpose_strip(const E* rows, E* strip, int64_t k, int64_t w) {
  constexpr int64_t kTile = 64;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    const int64_t k1 = std::min(k, k0 + kTile);
    for (int64_t j = 0; j < w; ++j) {
      const E* column = rows + j * k;
      for (int64_t kk = k0; kk < k1; ++kk) strip[kk * w + j] = column[kk];
    }
  }
}

// pack_gemv_b for one element type E (f32/f64 as same-sized unsigned integers).
template <typename E>
void pack_strips(const E* in, E* out, int64_t k, int64_t n, bool trans_b, const GemvStrips& strips) {
  for (int64_t c = 0; c < n;) {
    const int64_t w = strip_columns(c, n, strips);
    E* strip = out + c * k;  // [k][w]
    if (!trans_b) {
      for (int64_t kk = 0; kk < k; ++kk)
        std::memcpy(strip + kk * w, in + kk * n + c, static_cast<size_t>(w) * sizeof(E));
    } else {
      transpose_strip(in + c * k, strip, k, w);
    }
    c += w;
  }
}

// A transposed B's strip c holds the same elements as its rows c .. c + w (both at c * k):
// each strip is transposed through a copy of those rows alone.
template <typename E>
void pack_strips_in_place(E* data, int64_t k, int64_t n, const GemvStrips& strips) {
  std::vector<E> rows;
  for (int64_t c = 0; c < n;) {
    const int64_t w = strip_columns(c, n, strips);
    rows.assign(data + c * k, data + (c + w) * k);
    transpose_strip(rows.data(), data + c * k, k, w);
    c += w;
  }
}

template <typename F>
void by_element_type(int64_t elem_bytes, F&& f) {
  if (elem_bytes == 8) {
    f(uint64_t{});
  } else if (elem_bytes == 4) {
    f(uint32_t{});
  } else if (elem_bytes == 2) {
    f(uint16_t{});
  } else {
    f(uint8_t{});
  }
}

}  // namespace

void pack_gemv_b(const void* src, void* dst, int64_t k, int64_t n, bool trans_b, int64_t elem_bytes,
                 const GemvStrips& strips) {
  by_element_type(elem_bytes, [&](auto e) {
    using E = decltype(e);
    pack_strips(static_cast<const E*>(src), static_cast<E*>(dst), k, n, trans_b, strips);
  });
}

void pack_transposed_gemv_b_in_place(void* data, int64_t k, int64_t n, int64_t elem_bytes, const GemvStrips& strips) {
  by_element_type(elem_bytes, [&](auto e) {
    using E = decltype(e);
    pack_strips_in_place(static_cast<E*>(data), k, n, strips);
  });
}

void unpack_gemv_b_f32(const float* packed, float* dst, int64_t k, int64_t n, const GemvStrips& strips) {
  for (int64_t c = 0; c < n;) {
    const int64_t w = strip_columns(c, n, strips);
    const float* src = packed + c * k;
    for (int64_t kk = 0; kk < k; ++kk, src += w) std::memcpy(dst + kk * n + c, src, static_cast<size_t>(w) * sizeof(float));
    c += w;
  }
}

ConvShape conv_shape(const ir::Graph& graph, const ir::Node& node) {
  ConvShape c;
  const auto& x = in_type(graph, node, 0).shape;
  const auto& w = in_type(graph, node, 1).shape;
  const auto& y = out_type(graph, node).shape;
  c.n = x[0];
  c.c = x[1];
  c.h = x[2];
  c.w = x[3];
  c.o = w[0];
  c.kh = w[2];
  c.kw = w[3];
  c.oh = y[2];
  c.ow = y[3];
  c.groups = attr_int(node, "groups", 1);
  c.cg = c.c / c.groups;
  c.og = c.o / c.groups;
  auto st = attr_ints(node, "strides", {1, 1});
  auto pd = attr_ints(node, "pads", {0, 0, 0, 0});
  auto dl = attr_ints(node, "dilations", {1, 1});
  c.sh = st[0];
  c.sw = st[1];
  c.pt = pd[0];
  c.pl = pd[1];
  c.pb = pd[2];
  c.pr = pd[3];
  c.dh = dl[0];
  c.dw = dl[1];
  return c;
}

GemmTiles conv_gemm_tiles(const ir::Graph& graph, const ir::Node& node) {
  ConvShape c = conv_shape(graph, node);
  ir::DType d = in_type(graph, node, 0).dtype;
  return gemm_tiles(c.n * c.groups, c.og, c.oh * c.ow, c.cg * c.kh * c.kw, ir::dtype_size(d),
                    packs(d));
}

ReduceShape reduce_shape(const ir::Graph& graph, const ir::Node& node) {
  ReduceShape r;
  const auto& dims = in_type(graph, node, 0).shape.dims();
  int rank = static_cast<int>(dims.size());
  std::vector<bool> red(dims.size(), false);
  std::vector<int64_t> axes = attr_ints(node, "axes", {});
  if (axes.empty()) {
    std::fill(red.begin(), red.end(), true);
  } else {
    for (int64_t a : axes) red[static_cast<size_t>(normalize(a, rank))] = true;
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;  // size-1 dims change nothing
    if (!r.dims.empty() && r.reduced.back() == red[i]) {
      r.dims.back() *= dims[i];
    } else {
      r.dims.push_back(dims[i]);
      r.reduced.push_back(red[i]);
    }
  }
  if (r.dims.empty()) {
    r.dims.push_back(1);
    r.reduced.push_back(true);
  }
  r.out_elements = 1;
  r.reduced_elements = 1;
  for (size_t i = 0; i < r.dims.size(); ++i)
    (r.reduced[i] ? r.reduced_elements : r.out_elements) *= r.dims[i];
  r.inner_reduced = r.reduced.back();
  r.units = r.inner_reduced ? r.out_elements
                            : (r.dims.back() == 0 ? 0 : r.out_elements / r.dims.back());
  return r;
}

AxisShape axis_shape(const ir::Graph& graph, const ir::Node& node) {
  AxisShape s;
  const auto& dims = in_type(graph, node, 0).shape.dims();
  int rank = static_cast<int>(dims.size());
  const bool arg = node.op == OpKind::kArgMax || node.op == OpKind::kArgMin;
  auto axis = static_cast<size_t>(normalize(attr_int(node, "axis", arg ? 0 : -1), rank));
  s.outer = product(dims, 0, axis);
  if (node.op == OpKind::kLayerNorm) {
    s.len = product(dims, axis, dims.size());
    s.inner = 1;
  } else {
    s.len = dims[axis];
    s.inner = product(dims, axis + 1, dims.size());
  }
  return s;
}

UnitTiles unit_tiles_for(const ir::Graph& graph, const ir::Node& node) {
  const auto& x = in_type(graph, node, 0).shape.dims();
  switch (node.op) {
    case OpKind::kConv2d: {
      ConvShape c = conv_shape(graph, node);
      return unit_tiles(c.n * c.o, c.oh * c.ow * c.kh * c.kw);
    }
    case OpKind::kMaxPool:
    case OpKind::kAvgPool: {
      const auto& y = out_type(graph, node).shape.dims();
      auto k = attr_ints(node, "kernel", {1, 1});
      return unit_tiles(y[0] * y[1], y[2] * y[3] * k[0] * k[1]);
    }
    case OpKind::kGlobalAvgPool:
    case OpKind::kBatchNorm:
      return unit_tiles(x[0] * x[1], product(x, 2, x.size()));
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceProd: {
      ReduceShape r = reduce_shape(graph, node);
      return unit_tiles(r.units, r.reduced_elements * (r.inner_reduced ? 1 : r.dims.back()));
    }
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm: {
      AxisShape s = axis_shape(graph, node);
      return unit_tiles(s.outer, s.len * s.inner);
    }
    case OpKind::kArgMax:
    case OpKind::kArgMin: {  // one unit per output element
      AxisShape s = axis_shape(graph, node);
      return unit_tiles(s.outer * s.inner, s.len);
    }
    default: break;
  }
  return UnitTiles{};
}

}  // namespace tiling

bool is_compute_op(ir::OpKind op) {
  switch (op) {
    case OpKind::kMatmul:
    case OpKind::kGemm:
    case OpKind::kConv2d:
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceProd:
    case OpKind::kArgMax:
    case OpKind::kArgMin:
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm:
    case OpKind::kBatchNorm:
      return true;
    default:
      return false;
  }
}

namespace tiling {

AttentionShape attention_shape(const ir::Graph& graph, std::span<const ir::NodeId> nodes) {
  AttentionShape a;
  if (nodes.size() < 3) return a;
  const ir::Node& qk = graph.node(nodes.front());
  const ir::Node& softmax = graph.node(nodes[nodes.size() - 2]);
  const ir::Node& pv = graph.node(nodes.back());
  if (qk.op != OpKind::kMatmul || pv.op != OpKind::kMatmul || softmax.op != OpKind::kSoftmax) return a;
  if (qk.inputs.size() != 2 || pv.inputs.size() != 2 || pv.inputs[0] != softmax.outputs[0]) return a;
  const ir::TensorType& q = graph.value(qk.inputs[0]).type;
  const ir::TensorType& k = graph.value(qk.inputs[1]).type;
  const ir::TensorType& s = graph.value(qk.outputs[0]).type;
  const ir::TensorType& p = graph.value(softmax.outputs[0]).type;
  const ir::TensorType& v = graph.value(pv.inputs[1]).type;
  const ir::TensorType& o = graph.value(pv.outputs[0]).type;
  const int rank = s.shape.rank();
  if (rank < 3 || q.shape.rank() != rank || k.shape.rank() != rank || v.shape.rank() != rank ||
      o.shape.rank() != rank || p.shape != s.shape)
    return a;
  for (const ir::TensorType* t : {&q, &k, &s, &p, &v, &o})
    if (t->dtype != ir::DType::kF32) return a;
  const auto axis = attr_int(softmax, "axis", -1);
  if (axis != -1 && axis != rank - 1) return a;
  for (int i = 0; i + 2 < rank; ++i) {
    const int64_t d = s.shape[i];
    if (q.shape[i] != d || k.shape[i] != d || v.shape[i] != d || o.shape[i] != d) return a;
    a.batch *= d;
  }
  a.rows = s.shape[rank - 2];
  a.keys = s.shape[rank - 1];
  a.depth = q.shape[rank - 1];
  a.value_depth = v.shape[rank - 1];
  a.valid = a.keys % 16 == 0 && a.keys <= kAttentionMaxKeys && a.rows > 0 && a.depth > 0 && a.value_depth > 0 &&
            k.shape[rank - 2] == a.depth && v.shape[rank - 2] == a.keys;
  return a;
}

}  // namespace tiling

int64_t compute_op_tiles(const ir::Graph& graph, const ir::Node& node) {
  if (!is_compute_op(node.op)) return 1;
  if (node.op == OpKind::kMatmul || node.op == OpKind::kGemm)
    return tiling::matmul_tiles(graph, node).tiles();
  if (node.op == OpKind::kConv2d && !tiling::conv_shape(graph, node).direct())
    return tiling::conv_gemm_tiles(graph, node).tiles();
  return tiling::unit_tiles_for(graph, node).tiles();
}

int64_t compute_op_scratch_bytes(const ir::Graph& graph, const ir::Node& node) {
  if (node.op == OpKind::kMatmul || node.op == OpKind::kGemm) {
    if (node.attrs.contains(tiling::kPrepackedAttr)) return 0;  // B read in place, no panel
    tiling::GemmTiles t = tiling::matmul_tiles(graph, node);
    return t.panel_bytes * t.tiles();
  }
  if (node.op == OpKind::kConv2d && !tiling::conv_shape(graph, node).direct()) {
    tiling::GemmTiles t = tiling::conv_gemm_tiles(graph, node);
    return t.panel_bytes * t.tiles();
  }
  return 0;
}

}  // namespace carve::jit
