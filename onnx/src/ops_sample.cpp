// GridSample (opset 16; opset 20's mode names too) on 4-D input, decomposed into existing
// ops: the grid is data, so each tap is a gather_nd of per-pixel indices computed at run
// time. The arithmetic follows PyTorch's grid_sampler, which ONNX's expected outputs come
// from:
//  - grid values in [-1, 1] map to pixel coordinates (align_corners: -1 and 1 are the
//    corner pixels' centres; otherwise their outer edges);
//  - border clips the coordinate to [0, size - 1]; reflection folds it back at the edges
//    (the corner centres or the outer edges) and then clips. Bilinear and nearest apply
//    this to the coordinate, bicubic to each of its 4 taps;
//  - a tap outside the image reads 0 (after border/reflection only bilinear's right and
//    lower taps can be outside, with weight 0).
// Coordinates are computed in f32 (f64 for an f64 grid), the taps' weights in X's type.
//
// RoiAlign (opsets 10, 16) the same way, with ONNX Runtime's arithmetic: each output bin
// averages (or takes the max of) sampling_ratio^2 bilinear samples; a sample more than a
// pixel outside the image is 0, one within it reads the border. The rois are data, so the
// sample count must be the attribute's (sampling_ratio 0, adaptive, is per roi and not
// supported). batch_indices out of [0, N) fail the run (the gather's run-time index check).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <optional>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::DType;
using ir::OpKind;

enum class Padding { kZeros, kBorder, kReflection };

// Sampling an H x W image, held as [N, H*W, C], at coordinates of shape [N, Ho, Wo, 1].
class GridSampler {
 public:
  GridSampler(NodeContext& n, Tensor image, int64_t height, int64_t width, DType coord_dtype, Padding padding,
              bool align_corners)
      : n_(n), image_(std::move(image)), height_(height), width_(width), coord_dtype_(coord_dtype), padding_(padding),
        align_corners_(align_corners) {}

  Tensor scalar(double v) { return n_.constant_doubles(coord_dtype_, ir::Shape{}, {v}); }

  Result<Tensor> binary(OpKind op, Tensor a, Tensor b) { return n_.op(op, {std::move(a), std::move(b)}); }

  // Grid value g in [-1, 1] -> pixel coordinate along an axis of `size` pixels.
  Result<Tensor> unnormalize(const Tensor& g, int64_t size) {
    const auto s = static_cast<double>(size);
    CARVE_ASSIGN_OR_RETURN(Tensor t, binary(OpKind::kAdd, g, scalar(1)));
    if (align_corners_) {
      CARVE_ASSIGN_OR_RETURN(t, binary(OpKind::kDiv, t, scalar(2)));
      return binary(OpKind::kMul, t, scalar(s - 1));
    }
    CARVE_ASSIGN_OR_RETURN(t, binary(OpKind::kMul, t, scalar(s)));
    CARVE_ASSIGN_OR_RETURN(t, binary(OpKind::kSub, t, scalar(1)));
    return binary(OpKind::kDiv, t, scalar(2));
  }

  // The padding mode's coordinate: clipped (border), folded back and clipped (reflection),
  // unchanged (zeros: the fetch reads 0 outside).
  Result<Tensor> padded_coordinate(const Tensor& x, int64_t size) {
    if (padding_ == Padding::kZeros) return x;
    Tensor c = x;
    if (padding_ == Padding::kReflection) {
      const double lo = align_corners_ ? 0.0 : -0.5, hi = align_corners_ ? static_cast<double>(size - 1) : size - 0.5;
      CARVE_ASSIGN_OR_RETURN(c, reflect(x, lo, hi));
    }
    return clip(c, size);
  }

  Result<Tensor> clip(const Tensor& x, int64_t size) {
    return n_.op(OpKind::kClip, {x}, {{"min", 0.0}, {"max", static_cast<double>(size - 1)}});
  }

  // x folded into [lo, hi] like a ray between two mirrors: with span = hi - lo and
  // d = |x - lo|, lo + (d mod span) after an even number of bounces, hi - (d mod span)
  // after an odd one.
  Result<Tensor> reflect(const Tensor& x, double lo, double hi) {
    const double span = hi - lo;
    if (span <= 0) return binary(OpKind::kMul, x, scalar(0));  // one pixel: every coordinate is 0
    CARVE_ASSIGN_OR_RETURN(Tensor d, binary(OpKind::kSub, x, scalar(lo)));
    CARVE_ASSIGN_OR_RETURN(d, n_.op(OpKind::kAbs, {d}));
    CARVE_ASSIGN_OR_RETURN(Tensor extra, binary(OpKind::kFmod, d, scalar(span)));
    CARVE_ASSIGN_OR_RETURN(Tensor bounces, binary(OpKind::kDiv, d, scalar(span)));
    CARVE_ASSIGN_OR_RETURN(bounces, n_.op(OpKind::kFloor, {bounces}));
    CARVE_ASSIGN_OR_RETURN(Tensor parity, binary(OpKind::kFmod, bounces, scalar(2)));
    CARVE_ASSIGN_OR_RETURN(Tensor even, binary(OpKind::kEqual, parity, scalar(0)));
    CARVE_ASSIGN_OR_RETURN(Tensor from_lo, binary(OpKind::kAdd, extra, scalar(lo)));
    CARVE_ASSIGN_OR_RETURN(Tensor from_hi, binary(OpKind::kSub, scalar(hi), extra));
    return n_.op(OpKind::kWhere, {even, from_lo, from_hi});
  }

  // The pixels at integral coordinates (x, y) [N, Ho, Wo, 1] as [N, Ho, Wo, C], times
  // `weight` when given; 0 outside, whatever the weight (an infinite coordinate's is NaN).
  Result<Tensor> fetch(const Tensor& x, const Tensor& y, const std::optional<Tensor>& weight = std::nullopt) {
    const ir::Shape& s = image_.type.shape;  // [N, H*W, C]
    CARVE_ASSIGN_OR_RETURN(Tensor cx, clip(x, width_));
    CARVE_ASSIGN_OR_RETURN(Tensor cy, clip(y, height_));
    CARVE_ASSIGN_OR_RETURN(Tensor inside_x, binary(OpKind::kEqual, cx, x));
    CARVE_ASSIGN_OR_RETURN(Tensor inside_y, binary(OpKind::kEqual, cy, y));
    CARVE_ASSIGN_OR_RETURN(cx, n_.op(OpKind::kCast, {cx}, {{"to", ir::dtype_name(DType::kI64)}}));
    CARVE_ASSIGN_OR_RETURN(cy, n_.op(OpKind::kCast, {cy}, {{"to", ir::dtype_name(DType::kI64)}}));
    CARVE_ASSIGN_OR_RETURN(Tensor index, binary(OpKind::kMul, cy, n_.constant_ints(DType::kI64, ir::Shape{}, {width_})));
    CARVE_ASSIGN_OR_RETURN(index, binary(OpKind::kAdd, index, cx));
    const ir::Shape& grid = x.type.shape;  // [N, Ho, Wo, 1]
    CARVE_ASSIGN_OR_RETURN(index, n_.op(OpKind::kReshape, {index}, {{"shape", std::vector<int64_t>{grid[0], grid[1] * grid[2], 1}}}));
    CARVE_ASSIGN_OR_RETURN(Tensor v, n_.op(OpKind::kGatherNd, {image_, index}, {{"batch_dims", int64_t{1}}}));
    CARVE_ASSIGN_OR_RETURN(v, n_.op(OpKind::kReshape, {v}, {{"shape", std::vector<int64_t>{grid[0], grid[1], grid[2], s[2]}}}));
    if (weight) {
      CARVE_ASSIGN_OR_RETURN(v, binary(OpKind::kMul, v, *weight));
    }
    Tensor zero = n_.constant_doubles(image_.type.dtype, ir::Shape{}, {0});
    CARVE_ASSIGN_OR_RETURN(v, n_.op(OpKind::kWhere, {inside_y, v, zero}));
    return n_.op(OpKind::kWhere, {inside_x, v, zero});
  }

  // Sum over the taps (x[j], y[i]) of pixel * wx[j] * wy[i], the weights in the image's type.
  template <size_t kTaps>
  Result<Tensor> weighted_sum(const std::array<Tensor, kTaps>& x, const std::array<Tensor, kTaps>& y,
                              const std::array<Tensor, kTaps>& wx, const std::array<Tensor, kTaps>& wy) {
    std::optional<Tensor> sum;
    for (size_t i = 0; i < kTaps; ++i)
      for (size_t j = 0; j < kTaps; ++j) {
        CARVE_ASSIGN_OR_RETURN(Tensor w, binary(OpKind::kMul, wx[j], wy[i]));
        if (w.type.dtype != image_.type.dtype) {
          CARVE_ASSIGN_OR_RETURN(w, n_.op(OpKind::kCast, {w}, {{"to", ir::dtype_name(image_.type.dtype)}}));
        }
        CARVE_ASSIGN_OR_RETURN(Tensor v, fetch(x[j], y[i], w));
        if (sum) {
          CARVE_ASSIGN_OR_RETURN(v, binary(OpKind::kAdd, *sum, v));
        }
        sum = v;
      }
    return *sum;
  }

  Result<Tensor> nearest(const Tensor& x, const Tensor& y) {
    CARVE_ASSIGN_OR_RETURN(Tensor rx, n_.op(OpKind::kRound, {x}));  // half to even, as nearbyint
    CARVE_ASSIGN_OR_RETURN(Tensor ry, n_.op(OpKind::kRound, {y}));
    return fetch(rx, ry);
  }

  Status linear_taps(const Tensor& c, std::array<Tensor, 2>& taps, std::array<Tensor, 2>& weights) {
    CARVE_ASSIGN_OR_RETURN(taps[0], n_.op(OpKind::kFloor, {c}));
    CARVE_ASSIGN_OR_RETURN(taps[1], binary(OpKind::kAdd, taps[0], scalar(1)));
    CARVE_ASSIGN_OR_RETURN(weights[0], binary(OpKind::kSub, taps[1], c));
    CARVE_ASSIGN_OR_RETURN(weights[1], binary(OpKind::kSub, c, taps[0]));
    return Status();
  }

  Result<Tensor> bilinear(const Tensor& x, const Tensor& y) {
    std::array<Tensor, 2> tx, ty, wx, wy;  // taps floor and floor + 1, and their weights
    CARVE_RETURN_IF_ERROR(linear_taps(x, tx, wx));
    CARVE_RETURN_IF_ERROR(linear_taps(y, ty, wy));
    return weighted_sum(tx, ty, wx, wy);
  }

  // Taps floor(c) - 1 .. floor(c) + 2, each through the padding mode, and their cubic
  // convolution weights (a = -0.75, as PyTorch).
  Status cubic_taps(const Tensor& c, int64_t size, std::array<Tensor, 4>& taps, std::array<Tensor, 4>& weights) {
    constexpr double a = -0.75;
    CARVE_ASSIGN_OR_RETURN(Tensor base, n_.op(OpKind::kFloor, {c}));
    CARVE_ASSIGN_OR_RETURN(Tensor t, binary(OpKind::kSub, c, base));
    for (int k = 0; k < 4; ++k) {
      CARVE_ASSIGN_OR_RETURN(Tensor tap, binary(OpKind::kAdd, base, scalar(k - 1)));
      CARVE_ASSIGN_OR_RETURN(taps[static_cast<size_t>(k)], padded_coordinate(tap, size));
      // Distance from the tap: t + 1, t, 1 - t, 2 - t.
      CARVE_ASSIGN_OR_RETURN(Tensor d, k < 2 ? binary(OpKind::kAdd, t, scalar(1 - k)) : binary(OpKind::kSub, scalar(k - 1), t));
      // |d| <= 1: ((a + 2) d - (a + 3)) d^2 + 1;  1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a.
      const bool near = k == 1 || k == 2;
      CARVE_ASSIGN_OR_RETURN(Tensor p, binary(OpKind::kMul, d, scalar(near ? a + 2 : a)));
      CARVE_ASSIGN_OR_RETURN(p, binary(OpKind::kSub, p, scalar(near ? a + 3 : 5 * a)));
      CARVE_ASSIGN_OR_RETURN(p, binary(OpKind::kMul, p, d));
      if (!near) {
        CARVE_ASSIGN_OR_RETURN(p, binary(OpKind::kAdd, p, scalar(8 * a)));
      }
      CARVE_ASSIGN_OR_RETURN(p, binary(OpKind::kMul, p, d));
      CARVE_ASSIGN_OR_RETURN(weights[static_cast<size_t>(k)], binary(near ? OpKind::kAdd : OpKind::kSub, p, scalar(near ? 1 : 4 * a)));
    }
    return Status();
  }

  Result<Tensor> bicubic(const Tensor& x, const Tensor& y) {
    std::array<Tensor, 4> tx, ty, wx, wy;
    CARVE_RETURN_IF_ERROR(cubic_taps(x, width_, tx, wx));
    CARVE_RETURN_IF_ERROR(cubic_taps(y, height_, ty, wy));
    return weighted_sum(tx, ty, wx, wy);
  }

 private:
  NodeContext& n_;
  Tensor image_;
  int64_t height_, width_;
  DType coord_dtype_;
  Padding padding_;
  bool align_corners_;
};

Status lower_grid_sample(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor grid, n.input(1));
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", n.opset() >= 20 ? "linear" : "bilinear"));
  CARVE_ASSIGN_OR_RETURN(std::string padding_name, n.attr_string("padding_mode", "zeros"));
  CARVE_ASSIGN_OR_RETURN(int64_t align_corners, n.attr_int("align_corners", 0));
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return n.invalid(fmt::format("mode='{}' (bilinear/linear, nearest or bicubic/cubic)", mode));
  Padding padding = Padding::kZeros;
  if (padding_name == "border") {
    padding = Padding::kBorder;
  } else if (padding_name == "reflection") {
    padding = Padding::kReflection;
  } else if (padding_name != "zeros") {
    return n.invalid(fmt::format("padding_mode='{}' (zeros, border or reflection)", padding_name));
  }
  if (align_corners != 0 && align_corners != 1) return n.invalid(fmt::format("align_corners={} (0 or 1)", align_corners));
  const ir::Shape& xs = x.type.shape;
  const ir::Shape& gs = grid.type.shape;
  if (xs.rank() != 4)
    return n.unsupported(fmt::format("X of rank {}: carve samples 4-D input (N, C, H, W) only", xs.rank()));
  if (gs.rank() != 4 || gs[3] != 2 || gs[0] != xs[0])
    return n.invalid(fmt::format("grid of shape {} for X of shape {} (needs [N, H_out, W_out, 2])", gs.to_string(), xs.to_string()));
  if (!ir::is_float(x.type.dtype) || !ir::is_float(grid.type.dtype))
    return n.unsupported(fmt::format("X of {} and grid of {} (float types only)", ir::dtype_name(x.type.dtype),
                                     ir::dtype_name(grid.type.dtype)));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, x, "X"));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, grid, "grid"));
  // Integral coordinates up to H and W must be exact in the coordinate type.
  const DType coord_dtype = grid.type.dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  if (xs[2] > (int64_t{1} << 24) || xs[3] > (int64_t{1} << 24))
    return n.unsupported(fmt::format("X of shape {}: H and W up to 2^24", xs.to_string()));
  if (grid.type.dtype != coord_dtype) {
    CARVE_ASSIGN_OR_RETURN(grid, n.op(OpKind::kCast, {grid}, {{"to", ir::dtype_name(coord_dtype)}}));
  }

  CARVE_ASSIGN_OR_RETURN(Tensor image, n.op(OpKind::kTranspose, {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}));
  CARVE_ASSIGN_OR_RETURN(image, n.op(OpKind::kReshape, {image}, {{"shape", std::vector<int64_t>{xs[0], xs[2] * xs[3], xs[1]}}}));
  GridSampler sampler(n, image, xs[2], xs[3], coord_dtype, padding, align_corners == 1);
  std::array<Tensor, 2> coord;  // x (along W), y (along H): [N, Ho, Wo, 1]
  for (int64_t k = 0; k < 2; ++k) {
    CARVE_ASSIGN_OR_RETURN(Tensor g, n.op(OpKind::kSlice, {grid}, {{"starts", std::vector<int64_t>{k}}, {"ends", std::vector<int64_t>{k + 1}},
                                                                   {"axes", std::vector<int64_t>{3}}}));
    CARVE_ASSIGN_OR_RETURN(coord[static_cast<size_t>(k)], sampler.unnormalize(g, xs[k == 0 ? 3 : 2]));
  }
  if (mode != "bicubic") {
    CARVE_ASSIGN_OR_RETURN(coord[0], sampler.padded_coordinate(coord[0], xs[3]));
    CARVE_ASSIGN_OR_RETURN(coord[1], sampler.padded_coordinate(coord[1], xs[2]));
  }
  Tensor y;
  if (mode == "nearest") {
    CARVE_ASSIGN_OR_RETURN(y, sampler.nearest(coord[0], coord[1]));
  } else if (mode == "bilinear") {
    CARVE_ASSIGN_OR_RETURN(y, sampler.bilinear(coord[0], coord[1]));
  } else {
    CARVE_ASSIGN_OR_RETURN(y, sampler.bicubic(coord[0], coord[1]));
  }
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kTranspose, {y}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}));
  return n.set_output(0, y);
}

// RoiAlign's sample positions along one axis of `size` pixels: for each roi and sample,
// the two pixels it interpolates ([R, M] i64) and their weights ([R, M], 0 for a sample
// more than a pixel outside the image).
struct AxisSamples {
  std::array<Tensor, 2> pixel, weight;
};

class RoiAligner {
 public:
  RoiAligner(NodeContext& n, DType dtype) : n_(n), dtype_(dtype) {}

  Tensor scalar(double v) { return n_.constant_doubles(dtype_, ir::Shape{}, {v}); }
  Result<Tensor> binary(OpKind op, Tensor a, Tensor b) { return n_.op(op, {std::move(a), std::move(b)}); }
  Result<Tensor> reshape(Tensor t, std::vector<int64_t> dims) { return n_.op(OpKind::kReshape, {std::move(t)}, {{"shape", std::move(dims)}}); }

  // start + p * bin + (i + 0.5) * bin / ratio for bin p < bins and sample i < ratio, as
  // ONNX Runtime orders it: [R, bins * ratio] from start and bin [R, 1].
  Result<Tensor> positions(const Tensor& start, const Tensor& bin, int64_t bins, int64_t ratio) {
    std::vector<double> p, i;
    for (int64_t k = 0; k < bins * ratio; ++k) {
      p.push_back(static_cast<double>(k / ratio));
      i.push_back(static_cast<double>(k % ratio) + 0.5);
    }
    const ir::Shape row{1, bins * ratio};
    CARVE_ASSIGN_OR_RETURN(Tensor offset, binary(OpKind::kMul, n_.constant_doubles(dtype_, row, p), bin));
    CARVE_ASSIGN_OR_RETURN(Tensor inner, binary(OpKind::kMul, n_.constant_doubles(dtype_, row, i), bin));
    CARVE_ASSIGN_OR_RETURN(inner, binary(OpKind::kDiv, inner, scalar(static_cast<double>(ratio))));
    CARVE_ASSIGN_OR_RETURN(offset, binary(OpKind::kAdd, start, offset));
    return binary(OpKind::kAdd, offset, inner);
  }

  Result<AxisSamples> samples(const Tensor& c, int64_t size) {
    const auto last = static_cast<double>(size - 1);
    CARVE_ASSIGN_OR_RETURN(Tensor above, binary(OpKind::kGreaterEqual, c, scalar(-1)));
    CARVE_ASSIGN_OR_RETURN(Tensor below, binary(OpKind::kLessEqual, c, scalar(static_cast<double>(size))));
    CARVE_ASSIGN_OR_RETURN(Tensor inside, n_.op(OpKind::kClip, {c}, {{"min", 0.0}, {"max", last}}));
    AxisSamples a;
    std::array<Tensor, 2> pixel;
    CARVE_ASSIGN_OR_RETURN(pixel[0], n_.op(OpKind::kFloor, {inside}));
    CARVE_ASSIGN_OR_RETURN(pixel[1], binary(OpKind::kAdd, pixel[0], scalar(1)));
    CARVE_ASSIGN_OR_RETURN(pixel[1], binary(OpKind::kMin, pixel[1], scalar(last)));
    CARVE_ASSIGN_OR_RETURN(a.weight[1], binary(OpKind::kSub, inside, pixel[0]));
    CARVE_ASSIGN_OR_RETURN(a.weight[0], binary(OpKind::kSub, scalar(1), a.weight[1]));
    for (size_t k = 0; k < 2; ++k) {
      CARVE_ASSIGN_OR_RETURN(a.weight[k], n_.op(OpKind::kWhere, {above, a.weight[k], scalar(0)}));
      CARVE_ASSIGN_OR_RETURN(a.weight[k], n_.op(OpKind::kWhere, {below, a.weight[k], scalar(0)}));
      CARVE_ASSIGN_OR_RETURN(a.pixel[k], n_.op(OpKind::kCast, {pixel[k]}, {{"to", ir::dtype_name(DType::kI64)}}));
    }
    return a;
  }

 private:
  NodeContext& n_;
  DType dtype_;
};

Status lower_roi_align(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  CARVE_ASSIGN_OR_RETURN(Tensor rois, n.input(1));
  CARVE_ASSIGN_OR_RETURN(Tensor batch, n.input(2));
  CARVE_ASSIGN_OR_RETURN(std::string mode, n.attr_string("mode", "avg"));
  CARVE_ASSIGN_OR_RETURN(std::string transform, n.attr_string("coordinate_transformation_mode",
                                                              n.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  CARVE_ASSIGN_OR_RETURN(int64_t out_h, n.attr_int("output_height", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t out_w, n.attr_int("output_width", 1));
  CARVE_ASSIGN_OR_RETURN(int64_t ratio, n.attr_int("sampling_ratio", 0));
  CARVE_ASSIGN_OR_RETURN(double spatial_scale, n.attr_float("spatial_scale", 1.0));
  if (mode != "avg" && mode != "max") return n.invalid(fmt::format("mode='{}' (avg or max)", mode));
  if (transform != "half_pixel" && transform != "output_half_pixel")
    return n.invalid(fmt::format("coordinate_transformation_mode='{}' (half_pixel or output_half_pixel)", transform));
  if (out_h < 1 || out_w < 1 || out_h > 4096 || out_w > 4096)
    return n.invalid(fmt::format("output_height={}, output_width={} (1..4096)", out_h, out_w));
  if (ratio < 0 || ratio > 64) return n.invalid(fmt::format("sampling_ratio={} (0..64)", ratio));
  if (ratio == 0)
    return n.unsupported("sampling_ratio=0 (adaptive: each roi's sample count follows its size at run time); "
                         "carve needs a fixed sampling_ratio");
  if (!std::isfinite(spatial_scale)) return n.invalid(fmt::format("spatial_scale={}", spatial_scale));
  const ir::Shape& xs = x.type.shape;
  const ir::Shape& rs = rois.type.shape;
  const ir::Shape& bs = batch.type.shape;
  if (xs.rank() != 4 || !ir::is_float(x.type.dtype))
    return n.invalid(fmt::format("X {} (needs a float [N, C, H, W])", x.type.to_string()));
  if (rs.rank() != 2 || rs[1] != 4 || rois.type.dtype != x.type.dtype)
    return n.invalid(fmt::format("rois {} (needs [num_rois, 4] of X's type)", rois.type.to_string()));
  if (bs.rank() != 1 || bs[0] != rs[0] || (batch.type.dtype != DType::kI64 && batch.type.dtype != DType::kI32))
    return n.invalid(fmt::format("batch_indices {} (needs [num_rois] integers)", batch.type.to_string()));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, x, "X"));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, rois, "rois"));
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], R = rs[0];
  const DType dtype = x.type.dtype;
  RoiAligner align(n, dtype);

  // Each roi's corners in pixels, [R, 1] each: x1, y1, x2, y2.
  std::array<Tensor, 4> corner;
  const double offset = transform == "half_pixel" ? 0.5 : 0.0;
  for (int64_t k = 0; k < 4; ++k) {
    CARVE_ASSIGN_OR_RETURN(Tensor c, n.op(OpKind::kSlice, {rois}, {{"starts", std::vector<int64_t>{k}}, {"ends", std::vector<int64_t>{k + 1}},
                                                                   {"axes", std::vector<int64_t>{1}}}));
    CARVE_ASSIGN_OR_RETURN(c, align.binary(OpKind::kMul, c, align.scalar(spatial_scale)));
    CARVE_ASSIGN_OR_RETURN(corner[static_cast<size_t>(k)], align.binary(OpKind::kSub, c, align.scalar(offset)));
  }
  std::array<AxisSamples, 2> axis;  // y, x
  for (size_t a = 0; a < 2; ++a) {
    CARVE_ASSIGN_OR_RETURN(Tensor extent, align.binary(OpKind::kSub, corner[a == 0 ? 3 : 2], corner[a == 0 ? 1 : 0]));
    if (transform == "output_half_pixel") {  // the legacy form makes every roi at least a pixel
      CARVE_ASSIGN_OR_RETURN(extent, align.binary(OpKind::kMax, extent, align.scalar(1)));
    }
    const int64_t bins = a == 0 ? out_h : out_w;
    CARVE_ASSIGN_OR_RETURN(Tensor bin, align.binary(OpKind::kDiv, extent, align.scalar(static_cast<double>(bins))));
    CARVE_ASSIGN_OR_RETURN(Tensor c, align.positions(corner[a == 0 ? 1 : 0], bin, bins, ratio));
    CARVE_ASSIGN_OR_RETURN(axis[a], align.samples(c, a == 0 ? H : W));
  }

  // The image as [N, H*W, C]; each sample's pixel (batch, y*W + x) by gather_nd. A
  // negative batch index becomes N, out of range like any other bad one.
  const int64_t Mh = out_h * ratio, Mw = out_w * ratio;
  CARVE_ASSIGN_OR_RETURN(Tensor image, n.op(OpKind::kTranspose, {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}));
  CARVE_ASSIGN_OR_RETURN(image, align.reshape(image, {N, H * W, C}));
  if (batch.type.dtype != DType::kI64) {
    CARVE_ASSIGN_OR_RETURN(batch, n.op(OpKind::kCast, {batch}, {{"to", ir::dtype_name(DType::kI64)}}));
  }
  auto i64 = [&](int64_t v) { return n.constant_ints(DType::kI64, ir::Shape{}, {v}); };
  CARVE_ASSIGN_OR_RETURN(Tensor negative, align.binary(OpKind::kLess, batch, i64(0)));
  CARVE_ASSIGN_OR_RETURN(batch, n.op(OpKind::kWhere, {negative, i64(N), batch}));
  CARVE_ASSIGN_OR_RETURN(batch, align.reshape(batch, {R, 1, 1}));
  CARVE_ASSIGN_OR_RETURN(batch, align.binary(OpKind::kAdd, batch, n.constant_ints(DType::kI64, ir::Shape{1, Mh * Mw, 1},
                                                                                  std::vector<int64_t>(static_cast<size_t>(Mh * Mw), 0))));
  std::optional<Tensor> pooled;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 2; ++j) {
      CARVE_ASSIGN_OR_RETURN(Tensor row, align.reshape(axis[0].pixel[i], {R, Mh, 1}));
      CARVE_ASSIGN_OR_RETURN(row, align.binary(OpKind::kMul, row, i64(W)));
      CARVE_ASSIGN_OR_RETURN(Tensor col, align.reshape(axis[1].pixel[j], {R, 1, Mw}));
      CARVE_ASSIGN_OR_RETURN(Tensor pixel, align.binary(OpKind::kAdd, row, col));
      CARVE_ASSIGN_OR_RETURN(pixel, align.reshape(pixel, {R, Mh * Mw, 1}));
      CARVE_ASSIGN_OR_RETURN(Tensor index, n.op(OpKind::kConcat, {batch, pixel}, {{"axis", int64_t{2}}}));
      CARVE_ASSIGN_OR_RETURN(Tensor v, n.op(OpKind::kGatherNd, {image, index}));
      CARVE_ASSIGN_OR_RETURN(v, align.reshape(v, {R, Mh, Mw, C}));
      CARVE_ASSIGN_OR_RETURN(Tensor wy, align.reshape(axis[0].weight[i], {R, Mh, 1, 1}));
      CARVE_ASSIGN_OR_RETURN(Tensor wx, align.reshape(axis[1].weight[j], {R, 1, Mw, 1}));
      CARVE_ASSIGN_OR_RETURN(Tensor w, align.binary(OpKind::kMul, wy, wx));
      CARVE_ASSIGN_OR_RETURN(v, align.binary(OpKind::kMul, v, w));
      if (pooled) {
        CARVE_ASSIGN_OR_RETURN(v, align.binary(mode == "avg" ? OpKind::kAdd : OpKind::kMax, *pooled, v));
      }
      pooled = v;
    }
  // Each bin's ratio x ratio samples: [R, out_h, ratio, out_w, ratio, C] reduced over the
  // sample axes.
  CARVE_ASSIGN_OR_RETURN(Tensor y, align.reshape(*pooled, {R, out_h, ratio, out_w, ratio, C}));
  CARVE_ASSIGN_OR_RETURN(y, n.op(mode == "avg" ? OpKind::kReduceSum : OpKind::kReduceMax, {y},
                                 {{"axes", std::vector<int64_t>{2, 4}}, {"keepdims", int64_t{0}}}));
  if (mode == "avg") {
    CARVE_ASSIGN_OR_RETURN(y, align.binary(OpKind::kDiv, y, align.scalar(static_cast<double>(ratio * ratio))));
  }
  CARVE_ASSIGN_OR_RETURN(y, n.op(OpKind::kTranspose, {y}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}));
  return n.set_output(0, y);
}

}  // namespace

void register_sample_ops(std::map<std::string, OpEntry, std::less<>>& t) {
  t["GridSample"] = {lower_grid_sample, {"align_corners", "mode", "padding_mode"}};
  t["RoiAlign"] = {lower_roi_align, {"coordinate_transformation_mode", "mode", "output_height", "output_width",
                                     "sampling_ratio", "spatial_scale"}};
}

}  // namespace carve::onnx::detail
