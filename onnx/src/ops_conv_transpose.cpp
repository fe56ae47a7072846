// ConvTranspose on 1-D, 2-D and 3-D input.
//
// 2-D as a convolution: the input with stride - 1 zeros between its elements (unsqueeze,
// zero pad, reshape, slice), convolved at stride 1 with the weights flipped in space and
// their in/out channels swapped per group, padded by the window's extent - 1 minus the
// transposed conv's pads (output_padding and a larger output_shape at the end; negative
// conv pads crop). Every output sums the same products, plus zeros. 1-D runs as 2-D of
// height 1.
// 3-D as a sum over the kernel's depth taps kd: each input depth slice (folded into the
// batch) goes through the 2-D form with the weights' slice kd, and lands at output depth
// i * stride + kd * dilation (zeros between and around); the depth pads crop (or, negative,
// extend) the sum. The bias is added once, at the end.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

// The attributes per spatial axis, resolved: pads [begin..., end...] (output_shape and
// auto_pad turned into pads; a negative pad extends the output).
struct TransposeWindow {
  std::vector<int64_t> kernel, strides, dilations, out_pad, pads;
  size_t axes() const { return kernel.size(); }
  int64_t extent(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

Result<TransposeWindow> transpose_window(const NodeContext& n, const ir::Shape& xs, const ir::Shape& ws) {
  const auto spatial = static_cast<size_t>(ws.rank() - 2);
  auto read = [&](std::string_view name, int64_t fallback) -> Result<std::vector<int64_t>> {
    CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attr_ints(name, std::vector<int64_t>(spatial, fallback)));
    if (v.size() != spatial)
      return n.invalid(fmt::format("attribute '{}' has {} values for {} spatial axes", name, v.size(), spatial));
    return v;
  };
  TransposeWindow t;
  for (size_t i = 0; i < spatial; ++i) t.kernel.push_back(ws[static_cast<int>(2 + i)]);
  CARVE_ASSIGN_OR_RETURN(t.strides, read("strides", 1));
  CARVE_ASSIGN_OR_RETURN(t.dilations, read("dilations", 1));
  CARVE_ASSIGN_OR_RETURN(t.out_pad, read("output_padding", 0));
  CARVE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel_attr, read("kernel_shape", 0));
  if (n.has_attr("kernel_shape") && kernel_attr != t.kernel) return n.invalid("kernel_shape differs from the weights'");
  CARVE_ASSIGN_OR_RETURN(t.pads, n.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0)));
  if (t.pads.size() != 2 * spatial) return n.invalid("attribute 'pads' needs 2 values per spatial axis");
  CARVE_ASSIGN_OR_RETURN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
  std::vector<int64_t> natural(spatial);  // output size without pads
  for (size_t i = 0; i < spatial; ++i) {
    if (t.strides[i] < 1 || t.dilations[i] < 1 || t.out_pad[i] < 0 || t.out_pad[i] >= std::max(t.strides[i], t.dilations[i]))
      return n.invalid("strides and dilations must be >= 1, output_padding below the stride or dilation");
    natural[i] = t.strides[i] * (xs[static_cast<int>(2 + i)] - 1) + t.out_pad[i] + t.extent(i);
  }
  // output_shape or SAME_*: the pads that give that size (a negative one extends).
  std::optional<std::vector<int64_t>> target;
  if (n.has_attr("output_shape")) {
    CARVE_ASSIGN_OR_RETURN(target, read("output_shape", 1));
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    target.emplace();
    for (size_t i = 0; i < spatial; ++i) target->push_back(xs[static_cast<int>(2 + i)] * t.strides[i]);
  } else if (auto_pad == "VALID") {
    std::fill(t.pads.begin(), t.pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    return n.unsupported(fmt::format("auto_pad='{}'", auto_pad));
  }
  if (target) {
    for (size_t i = 0; i < spatial; ++i) {
      const int64_t total = natural[i] - (*target)[i];
      const int64_t half = total / 2;
      t.pads[i] = auto_pad == "SAME_LOWER" ? total - half : half;
      t.pads[i + spatial] = total - t.pads[i];
    }
  }
  return t;
}

// The window of axes [first, first + 2).
TransposeWindow plane_of(const TransposeWindow& t, size_t first) {
  auto two = [&](const std::vector<int64_t>& v, size_t at) { return std::vector<int64_t>{v[at], v[at + 1]}; };
  return TransposeWindow{two(t.kernel, first), two(t.strides, first), two(t.dilations, first), two(t.out_pad, first),
                         {t.pads[first], t.pads[first + 1], t.pads[t.axes() + first], t.pads[t.axes() + first + 1]}};
}

// A 1-D window as the 2-D one of height 1.
TransposeWindow lifted(const TransposeWindow& t) {
  return TransposeWindow{{1, t.kernel[0]}, {1, t.strides[0]}, {1, t.dilations[0]}, {0, t.out_pad[0]}, {0, t.pads[0], 0, t.pads[1]}};
}

// The 2-D form: x [N, C, H, W], weight [C, M/g, kh, kw].
Result<Tensor> conv_transpose_2d(NodeContext& n, Tensor x, const Tensor& weight, const TransposeWindow& t, int64_t groups,
                                 const std::optional<Tensor>& bias) {
  const ir::Shape xs = x.type.shape, ws = weight.type.shape;
  // 1. Zeros between the input's elements.
  if (t.strides[0] > 1 || t.strides[1] > 1) {
    CARVE_ASSIGN_OR_RETURN(Tensor z, n.op(OpKind::kUnsqueeze, {x}, {{"axes", std::vector<int64_t>{3, 5}}}));
    CARVE_ASSIGN_OR_RETURN(z, n.op(OpKind::kPad, {z}, {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, t.strides[0] - 1, 0, t.strides[1] - 1}}}));
    CARVE_ASSIGN_OR_RETURN(z, n.op(OpKind::kReshape, {z}, {{"shape", std::vector<int64_t>{xs[0], xs[1], xs[2] * t.strides[0], xs[3] * t.strides[1]}}}));
    CARVE_ASSIGN_OR_RETURN(x, n.op(OpKind::kSlice, {z}, {{"starts", std::vector<int64_t>{0, 0}},
                                                           {"ends", std::vector<int64_t>{(xs[2] - 1) * t.strides[0] + 1, (xs[3] - 1) * t.strides[1] + 1}},
                                                           {"axes", std::vector<int64_t>{2, 3}}}));
  }
  // 2. The weights [C, M/g, kh, kw] as a convolution's [M, C/g, kh, kw], flipped.
  const int64_t in_g = xs[1] / groups, out_g = ws[1];
  CARVE_ASSIGN_OR_RETURN(Tensor w, n.op(OpKind::kReshape, {weight}, {{"shape", std::vector<int64_t>{groups, in_g, out_g, ws[2], ws[3]}}}));
  CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kTranspose, {w}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
  CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kReshape, {w}, {{"shape", std::vector<int64_t>{groups * out_g, in_g, ws[2], ws[3]}}}));
  CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kSlice, {w}, {{"starts", std::vector<int64_t>{-1, -1}},
                                                       {"ends", std::vector<int64_t>{-ws[2] - 1, -ws[3] - 1}},
                                                       {"axes", std::vector<int64_t>{2, 3}},
                                                       {"steps", std::vector<int64_t>{-1, -1}}}));
  // 3. The convolution, then the crop of any negative pad.
  std::array<int64_t, 4> conv_pads{}, crop{};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t begin = t.extent(i) - 1 - t.pads[i], end = t.extent(i) - 1 - t.pads[i + 2] + t.out_pad[i];
    conv_pads[i] = std::max<int64_t>(begin, 0);
    conv_pads[i + 2] = std::max<int64_t>(end, 0);
    crop[i] = std::max<int64_t>(-begin, 0);
    crop[i + 2] = std::max<int64_t>(-end, 0);
  }
  std::vector<Tensor> in{x, w};
  if (bias) in.push_back(*bias);
  ir::Attrs attrs{{"groups", groups},
                  {"strides", std::vector<int64_t>{1, 1}},
                  {"pads", std::vector<int64_t>(conv_pads.begin(), conv_pads.end())},
                  {"dilations", t.dilations}};
  CARVE_ASSIGN_OR_RETURN(Tensor y, n.op(OpKind::kConv2d, in, std::move(attrs)));
  if (crop == std::array<int64_t, 4>{}) return y;
  const ir::Shape& ys = y.type.shape;
  return n.op(OpKind::kSlice, {y}, {{"starts", std::vector<int64_t>{crop[0], crop[1]}},
                                    {"ends", std::vector<int64_t>{ys[2] - crop[2], ys[3] - crop[3]}},
                                    {"axes", std::vector<int64_t>{2, 3}}});
}

// `t` [N, L, ...] with `begin` and `end` zero slices added along axis 1 (negative: removed).
Result<Tensor> pad_axis1(NodeContext& n, Tensor t, int64_t begin, int64_t end) {
  const int rank = t.type.shape.rank();
  const int64_t length = t.type.shape[1];
  if (begin < 0 || end < 0) {
    CARVE_ASSIGN_OR_RETURN(t, n.op(OpKind::kSlice, {t}, {{"starts", std::vector<int64_t>{std::max<int64_t>(-begin, 0)}},
                                                         {"ends", std::vector<int64_t>{length - std::max<int64_t>(-end, 0)}},
                                                         {"axes", std::vector<int64_t>{1}}}));
  }
  if (begin <= 0 && end <= 0) return t;
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  pads[1] = std::max<int64_t>(begin, 0);
  pads[static_cast<size_t>(rank + 1)] = std::max<int64_t>(end, 0);
  return n.op(OpKind::kPad, {t}, {{"pads", pads}});
}

// The 3-D form: x [N, C, D, H, W], weight [C, M/g, kd, kh, kw].
Result<Tensor> conv_transpose_3d(NodeContext& n, const Tensor& x, const Tensor& weight, const TransposeWindow& t,
                                 int64_t groups, const std::optional<Tensor>& bias) {
  const ir::Shape xs = x.type.shape, ws = weight.type.shape;
  const int64_t N = xs[0], C = xs[1], D = xs[2], M = ws[1] * groups;
  const int64_t stride = t.strides[0], dilation = t.dilations[0];
  const int64_t spread = (D - 1) * stride + 1;  // the input depths with zeros between
  const int64_t natural = spread + t.out_pad[0] + t.extent(0) - 1;
  CARVE_ASSIGN_OR_RETURN(Tensor planes, n.op(OpKind::kTranspose, {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
  CARVE_ASSIGN_OR_RETURN(planes, n.op(OpKind::kReshape, {planes}, {{"shape", std::vector<int64_t>{N * D, C, xs[3], xs[4]}}}));
  const TransposeWindow plane = plane_of(t, 1);
  std::optional<Tensor> sum;
  for (int64_t kd = 0; kd < ws[2]; ++kd) {
    CARVE_ASSIGN_OR_RETURN(Tensor w, n.op(OpKind::kSlice, {weight}, {{"starts", std::vector<int64_t>{kd}}, {"ends", std::vector<int64_t>{kd + 1}},
                                                                     {"axes", std::vector<int64_t>{2}}}));
    CARVE_ASSIGN_OR_RETURN(w, n.op(OpKind::kSqueeze, {w}, {{"axes", std::vector<int64_t>{2}}}));
    CARVE_ASSIGN_OR_RETURN(Tensor y, conv_transpose_2d(n, planes, w, plane, groups, std::nullopt));
    const ir::Shape ys = y.type.shape;  // [N*D, M, OH, OW]
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReshape, {y}, {{"shape", std::vector<int64_t>{N, D, M, ys[2], ys[3]}}}));
    if (stride > 1) {  // depth i at i * stride
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kUnsqueeze, {y}, {{"axes", std::vector<int64_t>{2}}}));
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kPad, {y}, {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, stride - 1, 0, 0, 0}}}));
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kReshape, {y}, {{"shape", std::vector<int64_t>{N, D * stride, M, ys[2], ys[3]}}}));
      CARVE_ASSIGN_OR_RETURN(y, pad_axis1(n, y, 0, spread - D * stride));
    }
    CARVE_ASSIGN_OR_RETURN(y, pad_axis1(n, y, kd * dilation, natural - spread - kd * dilation));
    if (sum) {
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kAdd, {*sum, y}));
    }
    sum = y;
  }
  CARVE_ASSIGN_OR_RETURN(Tensor y, pad_axis1(n, *sum, -t.pads[0], -t.pads[3]));
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kTranspose, {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
  if (!bias) return y;
  CARVE_ASSIGN_OR_RETURN(Tensor b, n.op(OpKind::kReshape, {*bias}, {{"shape", std::vector<int64_t>{1, M, 1, 1, 1}}}));
  return n.op(OpKind::kAdd, {y, b});
}

Status lower_conv_transpose(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor weight, n.input(1));
  const ir::Shape xs = x.type.shape, ws = weight.type.shape;
  if (ws.rank() < 3 || ws.rank() > 5)
    return n.unsupported(fmt::format("weights of rank {}; carve supports 1-D, 2-D and 3-D (NCL, NCHW, NCDHW)", ws.rank()));
  if (xs.rank() != ws.rank()) return n.invalid(fmt::format("input of rank {} with weights of rank {}", xs.rank(), ws.rank()));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, x, "input"));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, weight, "weights"));
  CARVE_ASSIGN_OR_RETURN(int64_t groups, n.attr_int("group", 1));
  if (groups < 1 || xs[1] % groups != 0 || ws[0] != xs[1])
    return n.invalid(fmt::format("weights [{}, ...] for {} input channels in {} groups", ws[0], xs[1], groups));
  CARVE_ASSIGN_OR_RETURN(TransposeWindow t, transpose_window(n, xs, ws));
  std::optional<Tensor> bias;
  if (n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(bias, n.input(2));
    if (bias->type.shape.rank() != 1 || bias->type.shape[0] != ws[1] * groups)
      return n.invalid(fmt::format("bias {} for {} output channels", bias->type.to_string(), ws[1] * groups));
  }
  if (t.axes() == 3) {
    CARVE_ASSIGN_OR_RETURN(Tensor y, conv_transpose_3d(n, x, weight, t, groups, bias));
    return n.set_output(0, y);
  }
  if (t.axes() == 2) {
    CARVE_ASSIGN_OR_RETURN(Tensor y, conv_transpose_2d(n, x, weight, t, groups, bias));
    return n.set_output(0, y);
  }
  auto lift = [&](const Tensor& v) { return n.op(OpKind::kUnsqueeze, {v}, {{"axes", std::vector<int64_t>{2}}}); };
  CARVE_ASSIGN_OR_RETURN(x, lift(x));
  CARVE_ASSIGN_OR_RETURN(weight, lift(weight));
  CARVE_ASSIGN_OR_RETURN(Tensor y, conv_transpose_2d(n, x, weight, lifted(t), groups, bias));
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kSqueeze, {y}, {{"axes", std::vector<int64_t>{2}}}));
  return n.set_output(0, y);
}

}  // namespace

void register_conv_transpose_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["ConvTranspose"] = {lower_conv_transpose, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                               "output_shape", "pads", "strides"}};
}

}  // namespace carve::onnx::detail
