// Neural-network ONNX operators: Conv, pooling, Gemm, MatMul,
// Softmax/LogSoftmax and LayerNormalization.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// Spatial attributes shared by Conv and the pools, resolved to carve's 2-D form.
struct Window {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 2> dilations{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right (ONNX order too)
};

// A per-spatial-axis attribute as carve's 2-D pair. 1-D ops run as 2-D ops of height 1,
// so their single value gets a leading `lead` (1 for kernel, strides, dilations).
Result<std::array<int64_t, 2>> pair_attr(const NodeContext& n, std::string_view name, int64_t fallback, int spatial,
                                         int64_t lead = 1) {
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                         n.attr_ints(name, std::vector<int64_t>(static_cast<size_t>(spatial), fallback)));
  if (static_cast<int>(v.size()) != spatial)
    return n.invalid(fmt::format("attribute '{}' has {} values for {} spatial axes", name, v.size(), spatial));
  if (spatial == 1) return std::array<int64_t, 2>{lead, v[0]};
  return std::array<int64_t, 2>{v[0], v[1]};
}

// Conv and pools on [N, C, L] run on [N, C, 1, L]: lift the input (and a 1-D kernel).
Result<Tensor> lift_1d(NodeContext& n, const Tensor& t) {
  if (t.type.shape.rank() != 3) return t;
  return n.op(OpKind::kUnsqueeze, {t}, {{"axes", std::vector<int64_t>{2}}});
}

Result<Tensor> lower_1d(NodeContext& n, const Tensor& y, bool lifted) {
  if (!lifted) return y;
  return n.op(OpKind::kSqueeze, {y}, {{"axes", std::vector<int64_t>{2}}});
}

// auto_pad SAME_*: pad so that out = ceil(in / stride); the odd element goes at the end
// (SAME_UPPER) or the beginning (SAME_LOWER).
Status resolve_auto_pad(const NodeContext& n, const ir::Shape& x, Window& w) {
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("auto_pad", "NOTSET"));
  if (mode == "NOTSET") return Status();
  if (mode == "VALID") {
    w.pads = {0, 0, 0, 0};
    return Status();
  }
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER") return n.unsupported(fmt::format("auto_pad='{}'", mode));
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x[2 + i], s = w.strides[static_cast<size_t>(i)];
    const int64_t extent = (w.kernel[static_cast<size_t>(i)] - 1) * w.dilations[static_cast<size_t>(i)] + 1;
    const int64_t total = std::max<int64_t>(((in + s - 1) / s - 1) * s + extent - in, 0);
    const int64_t small = total / 2, large = total - small;
    w.pads[static_cast<size_t>(i)] = mode == "SAME_UPPER" ? small : large;
    w.pads[static_cast<size_t>(i + 2)] = mode == "SAME_UPPER" ? large : small;
  }
  return Status();
}

// `x` is the (lifted) 4-D input, `spatial` the ONNX op's spatial rank (1 or 2), `kernel`
// the weights' window ({0, 0} for pools).
Result<Window> read_window(const NodeContext& n, const ir::Shape& x, std::array<int64_t, 2> kernel, int spatial) {
  Window w;
  CARVE_ASSIGN_OR_RETURN(w.kernel, pair_attr(n, "kernel_shape", 0, spatial));
  if (w.kernel[1] == 0) w.kernel = kernel;  // Conv may omit kernel_shape (from the weights)
  if (w.kernel != kernel && kernel[1] != 0)
    return n.invalid(fmt::format("kernel_shape [{},{}] differs from the weights' [{},{}]", w.kernel[0], w.kernel[1],
                                 kernel[0], kernel[1]));
  CARVE_ASSIGN_OR_RETURN(w.strides, pair_attr(n, "strides", 1, spatial));
  CARVE_ASSIGN_OR_RETURN(w.dilations, pair_attr(n, "dilations", 1, spatial));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                         n.attr_ints("pads", std::vector<int64_t>(static_cast<size_t>(2 * spatial), 0)));
  if (static_cast<int>(pads.size()) != 2 * spatial)
    return n.invalid(fmt::format("attribute 'pads' has {} values for {} spatial axes", pads.size(), spatial));
  if (spatial == 1) pads = {0, pads[0], 0, pads[1]};
  std::copy(pads.begin(), pads.end(), w.pads.begin());
  CARVE_RETURN_IF_ERROR(resolve_auto_pad(n, x, w));
  return w;
}

// The ONNX op's spatial rank (1 or 2) from its input; 3-D and up are not supported.
Result<int> spatial_rank(const NodeContext& n, const Tensor& x, std::string_view what) {
  const int rank = x.type.shape.rank();
  if (rank != 3 && rank != 4)
    return n.unsupported(fmt::format("{} of rank {}; carve supports 1-D and 2-D (NCL, NCHW) only", what, rank));
  return rank - 2;
}

// Conv's input and weights, both lifted to 2-D, and the spatial rank.
struct ConvOperands {
  Tensor x, weight;
  int spatial = 2;
};
Result<ConvOperands> conv_operands(NodeContext& n, Tensor x, Tensor weight) {
  ConvOperands c;
  CARVE_ASSIGN_OR_RETURN(c.spatial, spatial_rank(n, weight, "weights"));
  if (x.type.shape.rank() != weight.type.shape.rank())
    return n.invalid(fmt::format("input of rank {} with weights of rank {}", x.type.shape.rank(), weight.type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(c.x, lift_1d(n, x));
  CARVE_ASSIGN_OR_RETURN(c.weight, lift_1d(n, weight));
  return c;
}

Status lower_conv(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor weight, n.input(1));
  std::optional<Tensor> bias;
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(bias, n.input(2));
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, conv(n, std::move(x), std::move(weight), std::move(bias)));
  return n.set_output(0, y);
}

// Max pools the kernels lack (3-D, dilations) and MaxPool's Indices, from windows
// gathered out of x by a constant table of plane positions (all spatial dims flattened):
// for each output position and kernel offset (both row-major, the ONNX reference's scan
// order) the position read. A slot outside x reads its window's first valid element, so
// it never changes the maximum and wins arg_max only where that element would: the same
// index.
struct PoolWindows {
  std::vector<int64_t> in, out;  // spatial dims of x and of the output
  std::vector<int64_t> slots;    // out-positions x kk plane positions
  int64_t kk = 1;
  std::vector<double> inside;    // per slot: 1 inside x, else 0
  std::vector<double> valid, padded;  // per window: slots inside x, inside x and its pads
};

Result<PoolWindows> pool_windows(const NodeContext& n, std::vector<int64_t> in, std::vector<int64_t> out,
                                 const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads) {
  PoolWindows pw{std::move(in), std::move(out), {}, 1, {}, {}, {}};
  const size_t d = pw.in.size();
  // The table's size, checked (overflow included) before anything multiplies the dims.
  std::vector<int64_t> table_dims = pw.out;
  table_dims.insert(table_dims.end(), kernel.begin(), kernel.end());
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{ir::DType::kI64, ir::Shape(table_dims)}));
  int64_t windows = 1;
  for (size_t i = 0; i < d; ++i) {
    pw.kk *= kernel[i];
    windows *= pw.out[i];
  }
  std::vector<int64_t> o(d, 0), k(d, 0), window(static_cast<size_t>(pw.kk));
  for (int64_t wi = 0; wi < windows; ++wi) {
    int64_t first = -1, padded = 0;
    for (int64_t ki = 0; ki < pw.kk; ++ki) {
      int64_t pos = 0;
      bool inside = true, in_pads = true;
      int64_t rest = ki;
      for (size_t i = 0; i < d; ++i) {  // ki's coordinates, row-major
        int64_t after = 1;
        for (size_t j = i + 1; j < d; ++j) after *= kernel[j];
        k[i] = rest / after;
        rest %= after;
        const int64_t at = o[i] * strides[i] - pads[i] + k[i] * dilations[i];
        inside = inside && at >= 0 && at < pw.in[i];
        in_pads = in_pads && at >= -pads[i] && at < pw.in[i] + pads[i + d];
        if (inside) pos = pos * pw.in[i] + at;  // only then below x's size
      }
      window[static_cast<size_t>(ki)] = inside ? pos : -1;
      if (inside && first < 0) first = pos;
      padded += in_pads ? 1 : 0;
    }
    if (first < 0) return n.unsupported(fmt::format("output position {} pools a window holding no input element", wi));
    double valid = 0;
    for (int64_t at : window) {
      pw.slots.push_back(at < 0 ? first : at);
      pw.inside.push_back(at < 0 ? 0.0 : 1.0);
      valid += at < 0 ? 0 : 1;
    }
    pw.valid.push_back(valid);
    pw.padded.push_back(static_cast<double>(padded));
    for (size_t i = d; i-- > 0;) {  // next output position
      if (++o[i] < pw.out[i]) break;
      o[i] = 0;
    }
  }
  return pw;
}

// x [N, C, spatial...] as [N, C, windows, kk].
Result<Tensor> gather_windows(NodeContext& n, const Tensor& x, const PoolWindows& pw) {
  const ir::Shape& xs = x.type.shape;
  const int64_t plane = static_cast<int64_t>(pw.slots.size()) / std::max<int64_t>(pw.kk, 1);
  int64_t in_plane = 1;
  for (int64_t v : pw.in) in_plane *= v;
  CARVE_ASSIGN_OR_RETURN(Tensor flat, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{xs[0], xs[1], in_plane}}}));
  Tensor table = n.constant_ints(ir::DType::kI64, ir::Shape{static_cast<int64_t>(pw.slots.size())}, pw.slots);
  CARVE_ASSIGN_OR_RETURN(Tensor gathered, n.op(OpKind::kGather, {flat, table}, {{"axis", int64_t{2}}}));
  return n.op(OpKind::kReshape, {gathered}, {{"shape", std::vector<int64_t>{xs[0], xs[1], plane, pw.kk}}});
}

// MaxPool's Indices: the slot arg_max picks in each gathered window, mapped to a flat
// index into x (storage_order 1: column-major within the plane), shaped [N, C, out...].
Result<Tensor> window_indices(NodeContext& n, const Tensor& gathered, const ir::Shape& xs, const PoolWindows& pw,
                              int64_t storage_order) {
  const int64_t windows = static_cast<int64_t>(pw.slots.size()) / std::max<int64_t>(pw.kk, 1);
  int64_t in_plane = 1;
  for (int64_t v : pw.in) in_plane *= v;
  std::vector<int64_t> plane_index = pw.slots;
  if (storage_order != 0) {
    std::vector<int64_t> coord(pw.in.size());
    for (int64_t& p : plane_index) {
      int64_t rest = p, column_major = 0, stride = 1;
      for (size_t i = pw.in.size(); i-- > 0;) {
        coord[i] = rest % pw.in[i];
        rest /= pw.in[i];
      }
      for (size_t i = 0; i < pw.in.size(); ++i) {  // column-major: the first dim varies fastest
        column_major += coord[i] * stride;
        stride *= pw.in[i];
      }
      p = column_major;
    }
  }
  CARVE_ASSIGN_OR_RETURN(Tensor slot, n.op(OpKind::kArgMax, {gathered}, {{"axis", int64_t{3}}, {"keepdims", int64_t{0}}}));
  std::vector<int64_t> window_base(static_cast<size_t>(windows));
  for (int64_t p = 0; p < windows; ++p) window_base[static_cast<size_t>(p)] = p * pw.kk;
  CARVE_ASSIGN_OR_RETURN(slot, n.op(OpKind::kAdd, {slot, n.constant_ints(ir::DType::kI64, ir::Shape{windows}, window_base)}));
  Tensor table = n.constant_ints(ir::DType::kI64, ir::Shape{static_cast<int64_t>(plane_index.size())}, plane_index);
  CARVE_ASSIGN_OR_RETURN(Tensor index, n.op(OpKind::kGather, {table, slot}));
  CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{ir::DType::kI64, ir::Shape{xs[0], xs[1], 1}}));
  std::vector<int64_t> plane_base(static_cast<size_t>(xs[0] * xs[1]));
  for (size_t p = 0; p < plane_base.size(); ++p) plane_base[p] = static_cast<int64_t>(p) * in_plane;
  CARVE_ASSIGN_OR_RETURN(index, n.op(OpKind::kAdd, {index, n.constant_ints(ir::DType::kI64, ir::Shape{xs[0], xs[1], 1}, plane_base)}));
  std::vector<int64_t> dims = {xs[0], xs[1]};
  dims.insert(dims.end(), pw.out.begin(), pw.out.end());
  return n.op(OpKind::kReshape, {index}, {{"shape", dims}});
}

// MaxPool/AveragePool over any number of spatial dims, with dilations: reduce_max of the
// gathered windows, or the sum of their slots inside x over the count (count_include_pad:
// the slots inside x and its pads). KK times x's size in between, so only where
// max_pool/avg_pool cannot run.
Status lower_pool_gathered(NodeContext& n, const Tensor& x, bool average) {
  const ir::Shape& xs = x.type.shape;
  const int d = xs.rank() - 2;
  const auto ud = static_cast<size_t>(d);
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, n.attr_ints("kernel_shape"));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, n.attr_ints("strides", std::vector<int64_t>(ud, 1)));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, n.attr_ints("dilations", std::vector<int64_t>(ud, 1)));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, n.attr_ints("pads", std::vector<int64_t>(2 * ud, 0)));
  CARVE_ASSIGN_OR_RETURN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
  CARVE_ASSIGN_OR_RETURN(int64_t ceil_mode, n.attr_int("ceil_mode", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t storage_order, n.attr_int("storage_order", 0));
  if (kernel.size() != ud || strides.size() != ud || dilations.size() != ud || pads.size() != 2 * ud)
    return n.invalid(fmt::format("kernel_shape, strides, dilations need {} values, pads {}", d, 2 * d));
  std::vector<int64_t> in(xs.dims().begin() + 2, xs.dims().end()), out(ud);
  for (size_t i = 0; i < ud; ++i) {
    if (in[i] > (int64_t{1} << 61)) return n.unsupported(fmt::format("spatial dim {} of {} is too large", i, xs.to_string()));
    constexpr int64_t kMax = int64_t{1} << 31;  // keeps the size arithmetic below in int64
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[i + ud] < 0 || kernel[i] > kMax ||
        strides[i] > kMax || dilations[i] > kMax || pads[i] > kMax || pads[i + ud] > kMax)
      return n.invalid("kernel_shape, strides and dilations must be in [1, 2^31], pads in [0, 2^31]");
    const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>((out[i] - 1) * strides[i] + extent - in[i], 0);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + ud] = total - pads[i];
      continue;
    }
    if (auto_pad == "VALID") {
      pads[i] = pads[i + ud] = 0;
    } else if (auto_pad != "NOTSET") {
      return n.unsupported(fmt::format("auto_pad='{}'", auto_pad));
    }
    const int64_t span = in[i] + pads[i] + pads[i + ud] - extent;
    if (span < 0) return n.invalid(fmt::format("the window ({}) exceeds the padded input ({}) on spatial axis {}", extent, span + extent, i));
    out[i] = (ceil_mode != 0 ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
    if (ceil_mode != 0 && (out[i] - 1) * strides[i] >= in[i] + pads[i]) --out[i];  // a window starting in the end pad
  }
  CARVE_ASSIGN_OR_RETURN(PoolWindows pw, pool_windows(n, in, out, kernel, strides, dilations, pads));
  CARVE_ASSIGN_OR_RETURN(Tensor gathered, gather_windows(n, x, pw));
  const ir::Attrs last_axis{{"axes", std::vector<int64_t>{3}}, {"keepdims", int64_t{0}}};
  Tensor y;
  if (average) {
    CARVE_ASSIGN_OR_RETURN(int64_t include_pad, n.attr_int("count_include_pad", 0));
    const auto windows = static_cast<int64_t>(pw.valid.size());
    const ir::DType dt = x.type.dtype;
    CARVE_ASSIGN_OR_RETURN(Tensor kept, n.op(OpKind::kMul, {gathered, n.constant_doubles(dt, ir::Shape{windows, pw.kk}, pw.inside)}));
    CARVE_ASSIGN_OR_RETURN(Tensor sum, n.op(OpKind::kReduceSum, {kept}, last_axis));
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kDiv, {sum, n.constant_doubles(dt, ir::Shape{windows}, include_pad != 0 ? pw.padded : pw.valid)}));
  } else {
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReduceMax, {gathered}, last_axis));
  }
  std::vector<int64_t> dims = {xs[0], xs[1]};
  dims.insert(dims.end(), out.begin(), out.end());
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReshape, {y}, {{"shape", dims}}));
  if (!average && n.num_outputs() > 1 && n.output_used(1)) {
    CARVE_ASSIGN_OR_RETURN(Tensor index, window_indices(n, gathered, xs, pw, storage_order));
    CARVE_RETURN_IF_ERROR(n.set_output(1, index));
  }
  return n.set_output(0, y);
}

template <OpKind kind>
Status lower_pool(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const bool indices = kind == OpKind::kMaxPool && n.num_outputs() > 1 && n.output_used(1);
  if (x.type.shape.rank() >= 3) {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, n.attr_ints("dilations", std::vector<int64_t>{}));
    const bool dilated = std::any_of(dilations.begin(), dilations.end(), [](int64_t v) { return v != 1; });
    if (x.type.shape.rank() > 4 || dilated) return lower_pool_gathered(n, x, kind == OpKind::kAvgPool);
  }
  CARVE_ASSIGN_OR_RETURN(int spatial, spatial_rank(n, x, "input"));
  CARVE_ASSIGN_OR_RETURN(x, lift_1d(n, x));
  CARVE_ASSIGN_OR_RETURN(Window w, read_window(n, x.type.shape, {0, 0}, spatial));
  if (w.kernel[0] <= 0 || w.kernel[1] <= 0) return n.invalid("attribute 'kernel_shape' is required");
  if (w.dilations != std::array<int64_t, 2>{1, 1}) return n.unsupported("dilations other than 1");
  CARVE_ASSIGN_OR_RETURN(int64_t storage_order, n.attr_int("storage_order", 0));
  if (storage_order != 0 && storage_order != 1) return n.invalid(fmt::format("storage_order={}", storage_order));
  CARVE_ASSIGN_OR_RETURN(int64_t ceil_mode, n.attr_int("ceil_mode", 0));
  ir::Attrs attrs{{"kernel", std::vector<int64_t>(w.kernel.begin(), w.kernel.end())},
                  {"strides", std::vector<int64_t>(w.strides.begin(), w.strides.end())},
                  {"pads", std::vector<int64_t>(w.pads.begin(), w.pads.end())},
                  {"ceil_mode", ceil_mode}};
  if (kind == OpKind::kAvgPool) {
    CARVE_ASSIGN_OR_RETURN(int64_t include, n.attr_int("count_include_pad", 0));
    attrs["count_include_pad"] = include;
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(kind, {x}, std::move(attrs)));
  if (indices) {
    const ir::Shape& ys = y.type.shape;
    CARVE_ASSIGN_OR_RETURN(PoolWindows pw, pool_windows(n, {x.type.shape[2], x.type.shape[3]}, {ys[2], ys[3]},
                                                        {w.kernel[0], w.kernel[1]}, {w.strides[0], w.strides[1]}, {1, 1},
                                                        {w.pads[0], w.pads[1], w.pads[2], w.pads[3]}));
    CARVE_ASSIGN_OR_RETURN(Tensor gathered, gather_windows(n, x, pw));
    CARVE_ASSIGN_OR_RETURN(Tensor index, window_indices(n, gathered, x.type.shape, pw, storage_order));
    CARVE_ASSIGN_OR_RETURN(index, lower_1d(n, index, spatial == 1));
    CARVE_RETURN_IF_ERROR(n.set_output(1, index));
  }
  CARVE_ASSIGN_OR_RETURN(y, lower_1d(n, y, spatial == 1));
  return n.set_output(0, y);
}

Status lower_global_avg_pool(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGlobalAvgPool, {x}));
  return n.set_output(0, y);
}

// GlobalMaxPool = reduce_max over the spatial axes, keeping them.
Status lower_global_max_pool(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  std::vector<int64_t> axes(static_cast<size_t>(std::max(x.type.shape.rank() - 2, 0)));
  std::iota(axes.begin(), axes.end(), 2);
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kReduceMax, {x}, {{"axes", axes}, {"keepdims", 1}}));
  return n.set_output(0, y);
}

Status lower_gemm(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor a, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor b, n.input(1));
  CARVE_ASSIGN_OR_RETURN(int64_t trans_a, n.attr_int("transA", 0));
  CARVE_ASSIGN_OR_RETURN(int64_t trans_b, n.attr_int("transB", 0));
  CARVE_ASSIGN_OR_RETURN(double alpha, n.attr_float("alpha", 1.0));
  CARVE_ASSIGN_OR_RETURN(double beta, n.attr_float("beta", 1.0));
  std::vector<Tensor> in{a, b};
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(Tensor c, n.input(2));
    in.push_back(c);
  }
  ir::Attrs attrs{{"trans_a", trans_a}, {"trans_b", trans_b}, {"alpha", alpha}, {"beta", beta}};
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kGemm, in, std::move(attrs)));
  return n.set_output(0, y);
}

Status lower_matmul(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor a, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor b, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kMatmul, {a, b}));
  return n.set_output(0, y);
}

// Softmax over `axis`. Before opset 13 ONNX Softmax flattens to 2-D at `axis` (default 1)
// and normalises over everything from axis on: reshape, softmax the last dim, reshape back.
Result<Tensor> softmax(NodeContext& n, Tensor x) {
  const int64_t rank = x.type.shape.rank();
  CARVE_ASSIGN_OR_RETURN(int64_t raw, n.attr_int("axis", n.opset() < 13 ? 1 : -1));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw, std::max<int64_t>(rank, 1)));
  if (n.opset() >= 13 || axis == rank - 1) return n.op(OpKind::kSoftmax, {x}, {{"axis", axis}});
  const auto& dims = x.type.shape.dims();
  const int64_t outer = std::accumulate(dims.begin(), dims.begin() + axis, int64_t{1}, std::multiplies<>());
  CARVE_ASSIGN_OR_RETURN(Tensor flat, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{outer, -1}}}));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kSoftmax, {flat}, {{"axis", int64_t{1}}}));
  return n.op(OpKind::kReshape, {y}, {{"shape", dims}});
}

Status lower_softmax(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor y, softmax(n, x));
  return n.set_output(0, y);
}

Status lower_log_softmax(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor s, softmax(n, x));
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kLog, {s}));
  return n.set_output(0, y);
}

// LayerNormalization's optional Mean and InvStdDev outputs (training-style): ONNX's
// reference computes them over x.shape[axis:] in the stash type (float32, the only one
// ONNX defines), kept as dims of 1. The main output stays the fused layer_norm op.
Status layer_norm_stats(NodeContext& n, Tensor x, int64_t axis, double epsilon) {
  CARVE_ASSIGN_OR_RETURN(int64_t stash, n.attr_int("stash_type", 1));
  if (stash != ::onnx::TensorProto::FLOAT) return n.unsupported(fmt::format("stash_type {} (only 1, float32)", stash));
  if (x.type.dtype != ir::DType::kF32) {
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kCast, {x}, {{"to", ir::dtype_name(ir::DType::kF32)}}));
  }
  const int64_t rank = x.type.shape.rank();
  std::vector<int64_t> axes(static_cast<size_t>(rank - axis));
  std::iota(axes.begin(), axes.end(), axis);
  ir::Attrs reduce{{"axes", axes}, {"keepdims", int64_t{1}}};
  CARVE_ASSIGN_OR_RETURN(Tensor mean, n.op(OpKind::kReduceMean, {x}, reduce));
  if (n.output_used(1)) {
    CARVE_RETURN_IF_ERROR(n.set_output(1, mean));
  }
  if (!n.output_used(2)) return Status();
  CARVE_ASSIGN_OR_RETURN(Tensor d, n.op(OpKind::kSub, {x, mean}));
  CARVE_ASSIGN_OR_RETURN(Tensor sq, n.op(OpKind::kMul, {d, d}));
  CARVE_ASSIGN_OR_RETURN(Tensor var, n.op(OpKind::kReduceMean, {sq}, reduce));
  const ir::DType f32 = ir::DType::kF32;
  CARVE_ASSIGN_OR_RETURN(Tensor var_eps, n.op(OpKind::kAdd, {var, n.constant_doubles(f32, {}, {epsilon})}));
  CARVE_ASSIGN_OR_RETURN(Tensor std_dev, n.op(OpKind::kSqrt, {var_eps}));
  CARVE_ASSIGN_OR_RETURN(Tensor inv, n.op(OpKind::kDiv, {n.constant_doubles(f32, {}, {1.0}), std_dev}));
  return n.set_output(2, inv);
}

Status lower_layer_norm(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor scale, n.input(1));
  CARVE_ASSIGN_OR_RETURN(int64_t raw_axis, n.attr_int("axis", -1));
  CARVE_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(n, raw_axis, x.type.shape.rank()));
  CARVE_ASSIGN_OR_RETURN(double epsilon, n.attr_float("epsilon", 1e-5));
  std::vector<Tensor> in{x, scale};
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(Tensor bias, n.input(2));
    in.push_back(bias);
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kLayerNorm, in, {{"axis", axis}, {"epsilon", epsilon}}));
  CARVE_RETURN_IF_ERROR(n.set_output(0, y));
  if (n.output_used(1) || n.output_used(2)) return layer_norm_stats(n, x, axis, epsilon);
  return Status();
}

}  // namespace

Result<Tensor> conv(NodeContext& n, Tensor x_in, Tensor weight_in, std::optional<Tensor> bias) {
  CARVE_ASSIGN_OR_RETURN(ConvOperands ops, conv_operands(n, std::move(x_in), std::move(weight_in)));
  auto& [x, weight, spatial] = ops;
  CARVE_ASSIGN_OR_RETURN(Window w, read_window(n, x.type.shape, {weight.type.shape[2], weight.type.shape[3]}, spatial));
  CARVE_ASSIGN_OR_RETURN(int64_t groups, n.attr_int("group", 1));
  std::vector<Tensor> in{x, weight};
  if (bias) in.push_back(*bias);
  ir::Attrs attrs{{"groups", groups},
                  {"strides", std::vector<int64_t>(w.strides.begin(), w.strides.end())},
                  {"pads", std::vector<int64_t>(w.pads.begin(), w.pads.end())},
                  {"dilations", std::vector<int64_t>(w.dilations.begin(), w.dilations.end())}};
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kConv2d, in, std::move(attrs)));
  return lower_1d(n, y, spatial == 1);
}

void register_nn_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Conv"] = {lower_conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}};
  t["MaxPool"] = {lower_pool<OpKind::kMaxPool>,
                  {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}};
  t["AveragePool"] = {lower_pool<OpKind::kAvgPool>,
                      {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}};
  t["GlobalAveragePool"] = {lower_global_avg_pool, {}};
  t["GlobalMaxPool"] = {lower_global_max_pool, {}};
  t["Gemm"] = {lower_gemm, {"alpha", "beta", "transA", "transB"}};
  t["MatMul"] = {lower_matmul, {}};
  t["Softmax"] = {lower_softmax, {"axis"}};
  t["LogSoftmax"] = {lower_log_softmax, {"axis"}};
  t["LayerNormalization"] = {lower_layer_norm, {"axis", "epsilon", "stash_type"}};
}

}  // namespace carve::onnx::detail
