// Resize (opset 11+) as per-axis interpolation, the separable form ONNX's reference
// computes. Along each resized axis, output coordinate o maps to an input coordinate x by
// coordinate_transformation_mode; its n nearest input positions (n = 2 linear, 4 cubic;
// edges repeat the border element, as the reference's edge padding does) get the mode's
// coefficients for the fraction of x (exclude_outside drops the positions outside the
// axis and renormalises).
//  - nearest: every output takes one input element: a gather with constant indices
//    (exact, whatever the values).
//  - linear, cubic: a constant [out, in] matrix applied along the axis by a matmul (the
//    reference's dot product, in another order; like it, an inf or NaN input spreads to
//    the outputs whose weights touch it, and here also through zero weights).
// Scales and sizes must be known at import; tf_crop_and_resize (its extrapolation) and
// opset 18's axes/antialias are not supported.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::OpKind;

struct ResizeMode {
  std::string mode, transform, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// Input coordinate of output index o along an axis of `in` elements resized at `scale`.
// As ONNX's reference, the resized length is in * scale, not rounded (with scales that do
// not divide, align_corners differs from using the output's integer length).
double source_coordinate(const ResizeMode& m, int64_t o, int64_t in, double scale) {
  const double x = static_cast<double>(o), resized = scale * static_cast<double>(in);
  if (m.transform == "align_corners") return resized == 1 ? 0.0 : x * static_cast<double>(in - 1) / (resized - 1);
  if (m.transform == "asymmetric") return x / scale;
  if (m.transform == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m.transform == "pytorch_half_pixel") return resized == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

std::vector<double> coefficients(const ResizeMode& m, double ratio) {
  if (m.mode == "nearest") {
    if (ratio == 1.0) return {0, 1};
    if (m.nearest == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (m.nearest == "floor") return {1, 0};
    if (m.nearest == "ceil") return {0, 1};
    return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};  // round_prefer_floor
  }
  if (m.mode == "linear") return {1 - ratio, ratio};
  const double a = m.cubic_a, r = ratio, s = 1 - ratio;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
          ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

// Row o of the interpolation matrix [out, in] (weights summed per input element).
std::vector<double> weights_row(const ResizeMode& m, int64_t o, int64_t in, double scale) {
  const double x = source_coordinate(m, o, in, scale);
  const double ratio = x == std::floor(x) ? 1.0 : x - std::floor(x);
  const std::vector<double> coeff = coefficients(m, ratio);
  const auto n = static_cast<int64_t>(coeff.size());
  // The n positions closest to x in the edge-padded axis (ties: the lower), ascending.
  const int64_t pad = (n + 1) / 2, limit = in + 2 * pad;
  const double xp = x + static_cast<double>(pad);
  int64_t lo = std::clamp<int64_t>(static_cast<int64_t>(std::floor(xp)) - n, 0, limit);
  std::vector<int64_t> near;
  for (int64_t i = lo; i < std::min(limit, lo + 2 * n + 2); ++i) near.push_back(i);
  std::stable_sort(near.begin(), near.end(), [&](int64_t a, int64_t b) {
    return std::abs(xp - static_cast<double>(a)) < std::abs(xp - static_cast<double>(b));
  });
  near.resize(static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(near.size()))));
  std::sort(near.begin(), near.end());
  std::vector<double> c(coeff.begin(), coeff.begin() + static_cast<int64_t>(near.size()));
  if (m.exclude_outside) {
    double sum = 0;
    for (size_t k = 0; k < near.size(); ++k) {
      const int64_t idx = near[k] - pad;
      if (idx < 0 || idx >= in) c[k] = 0;
      sum += c[k];
    }
    if (sum != 0)
      for (double& v : c) v /= sum;
  }
  std::vector<double> row(static_cast<size_t>(in), 0.0);
  for (size_t k = 0; k < near.size(); ++k) row[static_cast<size_t>(std::clamp<int64_t>(near[k] - pad, 0, in - 1))] += c[k];
  return row;
}

// x resized along `axis` from in to out elements.
Result<Tensor> resize_axis(NodeContext& n, const ResizeMode& m, Tensor x, int64_t axis, int64_t out, double scale) {
  const ir::Shape s = x.type.shape;
  const int64_t in = s[static_cast<int>(axis)];
  if (m.mode == "nearest") {
    std::vector<int64_t> index(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      const std::vector<double> row = weights_row(m, o, in, scale);
      index[static_cast<size_t>(o)] = std::max_element(row.begin(), row.end()) - row.begin();
    }
    Tensor idx = n.constant_ints(ir::DType::kI64, ir::Shape{out}, index);
    return n.op(OpKind::kGather, {x, idx}, {{"axis", axis}});
  }
  std::vector<double> a(static_cast<size_t>(out * in));  // [out, in]
  for (int64_t o = 0; o < out; ++o) {
    const std::vector<double> row = weights_row(m, o, in, scale);
    std::copy(row.begin(), row.end(), a.begin() + o * in);
  }
  const int64_t rank = s.rank();
  int64_t before = 1, after = 1;
  for (int64_t i = 0; i < axis; ++i) before *= s[static_cast<int>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) after *= s[static_cast<int>(i)];
  std::vector<int64_t> out_dims(s.dims().begin(), s.dims().end());
  out_dims[static_cast<size_t>(axis)] = out;
  Tensor y;
  if (after == 1) {  // the last axis: x [before, in] x A^T [in, out]
    std::vector<double> at(static_cast<size_t>(in * out));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) at[static_cast<size_t>(i * out + o)] = a[static_cast<size_t>(o * in + i)];
    CARVE_ASSIGN_OR_RETURN(Tensor x2, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{before, in}}}));
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kMatmul, {x2, n.constant_doubles(x.type.dtype, ir::Shape{in, out}, at)}));
  } else {  // A [out, in] x x [before, in, after]
    CARVE_ASSIGN_OR_RETURN(Tensor x3, n.op(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{before, in, after}}}));
    CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kMatmul, {n.constant_doubles(x.type.dtype, ir::Shape{out, in}, a), x3}));
  }
  return n.op(OpKind::kReshape, {y}, {{"shape", out_dims}});
}

Status lower_resize(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  if (n.opset() < 11) return n.unsupported(fmt::format("opset {} (Resize is imported from opset 11)", n.opset()));
  ResizeMode m;
  CARVE_ASSIGN_OR_RETURN(m.mode, n.attr_string("mode", "nearest"));
  CARVE_ASSIGN_OR_RETURN(m.transform, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  CARVE_ASSIGN_OR_RETURN(m.nearest, n.attr_string("nearest_mode", "round_prefer_floor"));
  CARVE_ASSIGN_OR_RETURN(m.cubic_a, n.attr_float("cubic_coeff_a", -0.75));
  CARVE_ASSIGN_OR_RETURN(int64_t exclude, n.attr_int("exclude_outside", 0));
  m.exclude_outside = exclude != 0;
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") return n.unsupported(fmt::format("mode='{}'", m.mode));
  static const char* kTransforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                      "tf_half_pixel_for_nn"};
  if (std::find(std::begin(kTransforms), std::end(kTransforms), m.transform) == std::end(kTransforms))
    return n.unsupported(fmt::format("coordinate_transformation_mode='{}'", m.transform));
  if (m.nearest != "round_prefer_floor" && m.nearest != "round_prefer_ceil" && m.nearest != "floor" && m.nearest != "ceil")
    return n.unsupported(fmt::format("nearest_mode='{}'", m.nearest));
  if (m.mode != "nearest" && !ir::is_float(x.type.dtype))
    return n.unsupported(fmt::format("{} mode on {} (float inputs only)", m.mode, ir::dtype_name(x.type.dtype)));
  const ir::Shape s = x.type.shape;
  const int64_t rank = s.rank();
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (n.has_input(3)) {
    CARVE_ASSIGN_OR_RETURN(sizes, n.const_ints(3, "sizes"));
  }
  if (sizes.empty() && n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(scales, n.const_doubles(2, "scales"));
  }
  if (sizes.empty() && scales.empty()) return n.invalid("needs scales or sizes");
  if ((!sizes.empty() && static_cast<int64_t>(sizes.size()) != rank) ||
      (!scales.empty() && static_cast<int64_t>(scales.size()) != rank))
    return n.invalid(fmt::format("scales/sizes must have one value per axis ({})", rank));
  for (int64_t axis = 0; axis < rank; ++axis) {
    const int64_t in = s[static_cast<int>(axis)];
    int64_t out = 0;
    double scale = 0;
    if (!sizes.empty()) {
      out = sizes[static_cast<size_t>(axis)];
      scale = in > 0 ? static_cast<double>(out) / static_cast<double>(in) : 1.0;
    } else {
      scale = scales[static_cast<size_t>(axis)];
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * scale));
    }
    if (!(scale > 0) || out <= 0 || in <= 0 || out > (int64_t{1} << 24))
      return n.invalid(fmt::format("axis {} of {} elements resized to {} (scale {})", axis, in, out, scale));
    if (out == in && scale == 1.0) continue;
    CARVE_RETURN_IF_ERROR(n.check_folded(ir::TensorType{x.type.dtype, ir::Shape{out, in}}, sizeof(double)));
    CARVE_ASSIGN_OR_RETURN(x, resize_axis(n, m, x, axis, out, scale));
  }
  return n.set_output(0, x);
}

}  // namespace

void register_resize_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Resize"] = {lower_resize, {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                                "extrapolation_value", "mode", "nearest_mode"}};
}

}  // namespace carve::onnx::detail
