// Resize as per-axis interpolation, the separable form ONNX's reference
// computes. Along each resized axis, output coordinate o maps to an input coordinate x by
// coordinate_transformation_mode; its n nearest input positions (n = 2 linear, 4 cubic;
// edges repeat the border element, as the reference's edge padding does) get the mode's
// coefficients for the fraction of x (exclude_outside drops the positions outside the
// axis and renormalises).
//  - nearest: every output takes one input element: a gather with constant indices
//    (exact, whatever the values).
//  - linear, cubic: one gather per tap (2 or 4), each times its coefficients, summed in
//    the reference's order (its dot product; like it, an inf or NaN neighbour spreads).
//  - tf_crop_and_resize: the axis's roi [start, end] (fractions of the axis) is what the
//    output spans; output positions whose coordinate falls outside the input take
//    extrapolation_value (a where with a constant mask after the axis's taps).
// Upsample (opsets 7-9) and Resize-10 are the asymmetric nearest (floor) and linear forms.
// Scales, sizes and roi must be known at import; opset 18's axes/antialias are not
// supported.
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
  double roi_start = 0, roi_end = 1;  // tf_crop_and_resize: the axis's span, as fractions
  double extrapolation = 0;           // tf_crop_and_resize: the value outside the input
};

// Input coordinate of output index o along an axis of `in` elements resized at `scale`.
// As ONNX's reference, the resized length is in * scale, not rounded (with scales that do
// not divide, align_corners differs from using the output's integer length).
double source_coordinate(const ResizeMode& m, int64_t o, int64_t in, double scale) {
  const double x = static_cast<double>(o), resized = scale * static_cast<double>(in);
  if (m.transform == "tf_crop_and_resize") {
    const double last = static_cast<double>(in - 1), span = m.roi_end - m.roi_start;
    return m.roi_start * last + (resized == 1 ? span * last / 2 : x * span * last / (resized - 1));
  }
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

// The taps of output index o: the n input positions the mode reads (clamped to the axis:
// the edge repeats) and their coefficients.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> coeff;
  bool outside = false;  // tf_crop_and_resize: the coordinate is outside the input
};
Taps taps_of(const ResizeMode& m, int64_t o, int64_t in, double scale) {
  double x = source_coordinate(m, o, in, scale);
  const bool outside = m.transform == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1));
  if (outside) x = std::clamp(x, 0.0, static_cast<double>(in - 1));  // any taps: the output is replaced
  const double ratio = x == std::floor(x) ? 1.0 : x - std::floor(x);
  Taps t;
  t.outside = outside;
  t.coeff = coefficients(m, ratio);
  const auto n = static_cast<int64_t>(t.coeff.size());
  // The n positions closest to x in the edge-padded axis (ties: the lower), ascending.
  const int64_t pad = (n + 1) / 2, limit = in + 2 * pad;
  const double xp = x + static_cast<double>(pad);
  const int64_t lo = std::clamp<int64_t>(static_cast<int64_t>(std::floor(xp)) - n, 0, limit);
  std::vector<int64_t> near;
  for (int64_t i = lo; i < std::min(limit, lo + 2 * n + 2); ++i) near.push_back(i);
  std::stable_sort(near.begin(), near.end(), [&](int64_t a, int64_t b) {
    return std::abs(xp - static_cast<double>(a)) < std::abs(xp - static_cast<double>(b));
  });
  near.resize(std::min(near.size(), static_cast<size_t>(n)));  // fewer only for an x far outside the axis
  std::sort(near.begin(), near.end());
  t.coeff.resize(near.size());
  double sum = 0;
  for (size_t k = 0; k < near.size(); ++k) {
    const int64_t idx = near[k] - pad;
    if (m.exclude_outside && (idx < 0 || idx >= in)) t.coeff[k] = 0;
    sum += t.coeff[k];
    t.index.push_back(std::clamp<int64_t>(idx, 0, in - 1));
  }
  if (m.exclude_outside && sum != 0)
    for (double& c : t.coeff) c /= sum;
  return t;
}

// x resized along `axis` to `out` elements: per tap k, gather(x, index_k) scaled by its
// coefficients (broadcast along the other axes), the taps summed in order, as the
// reference's dot product. nearest: the one tap with coefficient 1.
Result<Tensor> interpolate_axis(NodeContext& n, const ResizeMode& m, Tensor x, int64_t axis, int64_t out, double scale) {
  const ir::Shape s = x.type.shape;
  const int64_t in = s[static_cast<int>(axis)];
  std::vector<Taps> taps;
  for (int64_t o = 0; o < out; ++o) taps.push_back(taps_of(m, o, in, scale));
  auto gather = [&](const std::vector<int64_t>& index) {
    return n.op(OpKind::kGather, {x, n.constant_ints(ir::DType::kI64, ir::Shape{out}, index)}, {{"axis", axis}});
  };
  if (m.mode == "nearest") {
    std::vector<int64_t> index;
    for (const Taps& t : taps)
      index.push_back(t.index[static_cast<size_t>(std::max_element(t.coeff.begin(), t.coeff.end()) - t.coeff.begin())]);
    return gather(index);
  }
  std::vector<int64_t> coeff_dims(static_cast<size_t>(s.rank()), 1);
  coeff_dims[static_cast<size_t>(axis)] = out;
  Tensor y;
  for (size_t k = 0; k < taps.front().index.size(); ++k) {
    std::vector<int64_t> index;
    std::vector<double> coeff;
    for (const Taps& t : taps) {
      index.push_back(t.index[k]);
      coeff.push_back(t.coeff[k]);
    }
    CARVE_ASSIGN_OR_RETURN(Tensor g, gather(index));
    CARVE_ASSIGN_OR_RETURN(Tensor term, n.op(OpKind::kMul, {g, n.constant_doubles(x.type.dtype, ir::Shape(coeff_dims), coeff)}));
    if (k == 0) {
      y = term;
    } else {
      CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kAdd, {y, term}));
    }
  }
  return y;
}

// interpolate_axis, with the outputs whose coordinate falls outside the input replaced by
// the extrapolation value (tf_crop_and_resize).
Result<Tensor> resize_axis(NodeContext& n, const ResizeMode& m, Tensor x, int64_t axis, int64_t out, double scale) {
  const int64_t in = x.type.shape[static_cast<int>(axis)];
  std::vector<int64_t> outside;
  for (int64_t o = 0; o < out; ++o) outside.push_back(taps_of(m, o, in, scale).outside ? 1 : 0);
  CARVE_ASSIGN_OR_RETURN(Tensor y, interpolate_axis(n, m, x, axis, out, scale));
  if (std::find(outside.begin(), outside.end(), 1) == outside.end()) return y;
  std::vector<int64_t> mask_dims(static_cast<size_t>(x.type.shape.rank()), 1);
  mask_dims[static_cast<size_t>(axis)] = out;
  return n.op(OpKind::kWhere, {n.constant_ints(ir::DType::kBool, ir::Shape(mask_dims), outside),
                               n.constant_doubles(x.type.dtype, ir::Shape{}, {m.extrapolation}), y});
}

// x resized by `scales` or (when given) `sizes`, one per axis; roi for tf_crop_and_resize.
Status resize(NodeContext& n, ResizeMode m, Tensor x, const std::vector<double>& roi, const std::vector<double>& scales,
              const std::vector<int64_t>& sizes) {
  const ir::Shape s = x.type.shape;
  const int64_t rank = s.rank();
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
    if (!roi.empty()) {
      m.roi_start = roi[static_cast<size_t>(axis)];
      m.roi_end = roi[static_cast<size_t>(axis + rank)];
    }
    if (out == in && scale == 1.0 && m.roi_start == 0 && m.roi_end == 1) continue;
    CARVE_ASSIGN_OR_RETURN(x, resize_axis(n, m, x, axis, out, scale));
  }
  return n.set_output(0, x);
}

// Upsample (opsets 7-9) and Resize-10: nearest (the input element at floor(o / scale)) or
// linear, both asymmetric; scales an attribute (Upsample before opset 9) or input 1.
Status lower_upsample(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  ResizeMode m;
  CARVE_ASSIGN_OR_RETURN(m.mode, n.attr_string("mode", "nearest"));
  if (m.mode != "nearest" && m.mode != "linear") return n.invalid(fmt::format("mode='{}' (nearest or linear)", m.mode));
  if (m.mode == "linear" && !ir::is_float(x.type.dtype))
    return n.unsupported(fmt::format("linear mode on {} (float inputs only)", ir::dtype_name(x.type.dtype)));
  m.transform = "asymmetric";
  m.nearest = "floor";
  std::vector<double> scales;
  if (n.op_type() == "Upsample" && n.opset() < 9) {
    CARVE_ASSIGN_OR_RETURN(scales, n.attr_floats("scales"));
  } else {
    if (!n.has_input(1)) return n.invalid("needs scales (input 1)");
    CARVE_ASSIGN_OR_RETURN(scales, n.const_doubles(1, "scales"));
  }
  return resize(n, m, x, {}, scales, {});
}

Status lower_resize(NodeContext& n) {
  if (n.opset() < 11) return lower_upsample(n);
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  ResizeMode m;
  CARVE_ASSIGN_OR_RETURN(m.mode, n.attr_string("mode", "nearest"));
  CARVE_ASSIGN_OR_RETURN(m.transform, n.attr_string("coordinate_transformation_mode", "half_pixel"));
  CARVE_ASSIGN_OR_RETURN(m.nearest, n.attr_string("nearest_mode", "round_prefer_floor"));
  CARVE_ASSIGN_OR_RETURN(m.cubic_a, n.attr_float("cubic_coeff_a", -0.75));
  CARVE_ASSIGN_OR_RETURN(int64_t exclude, n.attr_int("exclude_outside", 0));
  m.exclude_outside = exclude != 0;
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") return n.unsupported(fmt::format("mode='{}'", m.mode));
  static const char* kTransforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                      "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kTransforms), std::end(kTransforms), m.transform) == std::end(kTransforms))
    return n.unsupported(fmt::format("coordinate_transformation_mode='{}'", m.transform));
  if (m.nearest != "round_prefer_floor" && m.nearest != "round_prefer_ceil" && m.nearest != "floor" && m.nearest != "ceil")
    return n.unsupported(fmt::format("nearest_mode='{}'", m.nearest));
  if (m.mode != "nearest" && !ir::is_float(x.type.dtype))
    return n.unsupported(fmt::format("{} mode on {} (float inputs only)", m.mode, ir::dtype_name(x.type.dtype)));
  const ir::Shape s = x.type.shape;
  const int64_t rank = s.rank();
  std::vector<double> roi;  // tf_crop_and_resize: [starts..., ends...]
  if (m.transform == "tf_crop_and_resize") {
    if (!n.has_input(1)) return n.invalid("coordinate_transformation_mode='tf_crop_and_resize' needs roi (input 1)");
    CARVE_ASSIGN_OR_RETURN(roi, n.const_doubles(1, "roi"));
    for (double r : roi)
      if (!std::isfinite(r) || std::abs(r) > 1e6) return n.invalid(fmt::format("roi value {} (finite, |roi| <= 1e6)", r));
    if (static_cast<int64_t>(roi.size()) != 2 * rank)
      return n.invalid(fmt::format("roi has {} values; tf_crop_and_resize needs 2 per axis ({})", roi.size(), 2 * rank));
    CARVE_ASSIGN_OR_RETURN(m.extrapolation, n.attr_float("extrapolation_value", 0.0));
  }
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (n.has_input(3)) {
    CARVE_ASSIGN_OR_RETURN(sizes, n.const_ints(3, "sizes"));
  }
  if (sizes.empty() && n.has_input(2)) {
    CARVE_ASSIGN_OR_RETURN(scales, n.const_doubles(2, "scales"));
  }
  return resize(n, std::move(m), std::move(x), roi, scales, sizes);
}

}  // namespace

void register_resize_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["Resize"] = {lower_resize, {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                                "extrapolation_value", "mode", "nearest_mode"}};
  t["Upsample"] = {lower_upsample, {"mode", "scales"}};
}

}  // namespace carve::onnx::detail
