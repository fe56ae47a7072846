// The sampling and geometry operators the importer composes from other carve ops
// (GridSample, Resize's tf_crop_and_resize, Upsample, RoiAlign, Det): one-node models (one_node_model.h) run through the reference interpreter
// and (with the CPU JIT) a Session, against values computed here in double, pixel by pixel.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "carve/reference/reference.h"
#include "one_node_model.h"

using carve::ErrorCode;
using carve::reference::HostTensor;
using carve::onnx_test::check_close;
using carve::onnx_test::check_fails;
using carve::onnx_test::kF32;
constexpr int kI64 = ::onnx::TensorProto::INT64;
using carve::onnx_test::Model;
using carve::onnx_test::Values;

namespace {

// PyTorch's grid_sampler on one [H, W] image, written pixel by pixel: the reflection
// bounces step by step rather than by the importer's closed form.
struct GridSampleCase {
  std::string mode, padding;
  bool align_corners;
  int64_t H, W;
  std::vector<float> image;

  double unnormalize(double g, int64_t size) const {
    return align_corners ? (g + 1) / 2 * static_cast<double>(size - 1) : ((g + 1) * static_cast<double>(size) - 1) / 2;
  }
  double reflect(double x, double lo, double hi) const {
    if (hi <= lo) return 0;
    while (x < lo || x > hi) x = x < lo ? 2 * lo - x : 2 * hi - x;
    return x;
  }
  double pad(double x, int64_t size) const {
    const double last = static_cast<double>(size - 1);
    if (padding == "reflection") x = align_corners ? reflect(x, 0, last) : reflect(x, -0.5, last + 0.5);
    if (padding != "zeros") x = std::min(std::max(x, 0.0), last);
    return x;
  }
  double pixel(double x, double y) const {
    if (x < 0 || y < 0 || x > static_cast<double>(W - 1) || y > static_cast<double>(H - 1)) return 0;
    return image[static_cast<size_t>(static_cast<int64_t>(y) * W + static_cast<int64_t>(x))];
  }
  static double cubic(double d) {
    const double a = -0.75;
    d = std::abs(d);
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  }
  double sample(double gx, double gy) const {
    double x = unnormalize(gx, W), y = unnormalize(gy, H);
    if (mode == "bicubic") {
      const double x0 = std::floor(x), y0 = std::floor(y);
      double sum = 0;
      for (int i = -1; i <= 2; ++i)
        for (int j = -1; j <= 2; ++j)
          sum += pixel(pad(x0 + j, W), pad(y0 + i, H)) * cubic(x - (x0 + j)) * cubic(y - (y0 + i));
      return sum;
    }
    x = pad(x, W);
    y = pad(y, H);
    if (mode == "nearest") return pixel(std::nearbyint(x), std::nearbyint(y));
    const double x0 = std::floor(x), y0 = std::floor(y), fx = x - x0, fy = y - y0;
    return pixel(x0, y0) * (1 - fx) * (1 - fy) + pixel(x0 + 1, y0) * fx * (1 - fy) + pixel(x0, y0 + 1) * (1 - fx) * fy +
           pixel(x0 + 1, y0 + 1) * fx * fy;
  }
};

// ONNX Runtime's RoiAlign on [N, C, H, W] in double, sample by sample.
struct RoiAlignCase {
  std::string mode;
  bool half_pixel;
  int64_t N, C, H, W, out_h, out_w, ratio;
  double spatial_scale;
  std::vector<float> image, rois;
  std::vector<int64_t> batch;

  Values run() const {
    Values y;
    const double offset = half_pixel ? 0.5 : 0.0;
    for (size_t r = 0; r < batch.size(); ++r) {
      const double x1 = rois[4 * r] * spatial_scale - offset, y1 = rois[4 * r + 1] * spatial_scale - offset;
      double w = rois[4 * r + 2] * spatial_scale - offset - x1, h = rois[4 * r + 3] * spatial_scale - offset - y1;
      if (!half_pixel) w = std::max(w, 1.0), h = std::max(h, 1.0);
      const double bin_h = h / static_cast<double>(out_h), bin_w = w / static_cast<double>(out_w);
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ph = 0; ph < out_h; ++ph)
          for (int64_t pw = 0; pw < out_w; ++pw) {
            double acc = 0;
            bool first = true;
            for (int64_t iy = 0; iy < ratio; ++iy)
              for (int64_t ix = 0; ix < ratio; ++ix) {
                const double sy = y1 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(ratio);
                const double sx = x1 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(ratio);
                double v[4] = {0, 0, 0, 0};
                if (sy >= -1 && sy <= static_cast<double>(H) && sx >= -1 && sx <= static_cast<double>(W)) {
                  auto low = [](double t, int64_t size, int64_t& lo, int64_t& hi) {
                    t = std::max(t, 0.0);
                    lo = static_cast<int64_t>(t);
                    if (lo >= size - 1) {
                      lo = hi = size - 1;
                      return 0.0;
                    }
                    hi = lo + 1;
                    return t - static_cast<double>(lo);
                  };
                  int64_t y0, y1i, x0, x1i;
                  const double ly = low(sy, H, y0, y1i), lx = low(sx, W, x0, x1i);
                  auto at = [&](int64_t yy, int64_t xx) {
                    return static_cast<double>(image[static_cast<size_t>(((batch[r] * C + c) * H + yy) * W + xx)]);
                  };
                  v[0] = (1 - ly) * (1 - lx) * at(y0, x0);
                  v[1] = (1 - ly) * lx * at(y0, x1i);
                  v[2] = ly * (1 - lx) * at(y1i, x0);
                  v[3] = ly * lx * at(y1i, x1i);
                }
                if (mode == "avg") {
                  acc += v[0] + v[1] + v[2] + v[3];
                } else {
                  const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                  acc = first ? m : std::max(acc, m);
                  first = false;
                }
              }
            y.push_back(mode == "avg" ? acc / static_cast<double>(ratio * ratio) : acc);
          }
    }
    return y;
  }

  carve::onnx_test::Model model() const {
    Model m(16);
    const auto R = static_cast<int64_t>(batch.size());
    m.input("x", kF32, {N, C, H, W}).input("rois", kF32, {R, 4}).input("batch", kI64, {R});
    m.node("RoiAlign", {"x", "rois", "batch"}).s("mode", mode).i("output_height", out_h).i("output_width", out_w);
    m.i("sampling_ratio", ratio).f("spatial_scale", static_cast<float>(spatial_scale));
    m.s("coordinate_transformation_mode", half_pixel ? "half_pixel" : "output_half_pixel");
    return m;
  }
  std::vector<HostTensor> inputs(const std::vector<int64_t>& batch_values) const {
    const auto R = static_cast<int64_t>(batch.size());
    return {HostTensor::from<float>(carve::ir::Shape{N, C, H, W}, image), HostTensor::from<float>(carve::ir::Shape{R, 4}, rois),
            HostTensor::from<int64_t>(carve::ir::Shape{R}, batch_values)};
  }
};

// The determinant by cofactor expansion along the first row (no pivoting, no division).
double cofactor_det(const std::vector<double>& a, int64_t n) {
  if (n == 1) return a[0];
  double det = 0;
  for (int64_t j = 0; j < n; ++j) {
    std::vector<double> minor;
    for (int64_t r = 1; r < n; ++r)
      for (int64_t c = 0; c < n; ++c)
        if (c != j) minor.push_back(a[static_cast<size_t>(r * n + c)]);
    det += (j % 2 == 0 ? 1 : -1) * a[static_cast<size_t>(j)] * cofactor_det(minor, n - 1);
  }
  return det;
}

}  // namespace

TEST_CASE("onnx/ops/grid_sample") {
  // A 3x4 image sampled at grid points inside [-1, 1] and outside it on every side (none
  // lands on a rounding tie or a pixel boundary), for each mode, padding and alignment.
  const int64_t H = 3, W = 4;
  std::vector<float> image;
  for (int64_t i = 0; i < H * W; ++i) image.push_back(static_cast<float>((i * 5) % 7) - 2.5f);
  const std::vector<float> gs{-3.1f, -1.13f, -0.71f, -0.3f, 0.07f, 0.42f, 0.93f, 1.21f, 2.63f};
  std::vector<float> grid;  // [1, 9, 9, 2]: x varies along W_out, y along H_out
  for (float gy : gs)
    for (float gx : gs) grid.insert(grid.end(), {gx, gy});
  const auto n = static_cast<int64_t>(gs.size());
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        CAPTURE(mode);
        CAPTURE(padding);
        CAPTURE(align);
        const GridSampleCase c{mode, padding, align, H, W, image};
        Values expected;
        for (size_t k = 0; k < grid.size(); k += 2) expected.push_back(c.sample(grid[k], grid[k + 1]));
        Model m(16);
        m.input("x", kF32, {1, 1, H, W}).input("grid", kF32, {1, n, n, 2}).node("GridSample", {"x", "grid"});
        m.s("mode", mode).s("padding_mode", padding).i("align_corners", align ? 1 : 0);
        check_close(m, {HostTensor::from<float>(carve::ir::Shape{1, 1, H, W}, image),
                        HostTensor::from<float>(carve::ir::Shape{1, n, n, 2}, grid)},
                    expected, 1e-5, 1e-5);
      }

  SUBCASE("two images of two channels, a single-pixel axis") {
    // Channel c of batch b is its image plus 10c + 100b; an image one pixel wide samples
    // that column wherever x lands (reflection folds everything onto it).
    Model m(16);
    m.input("x", kF32, {2, 2, 2, 1}).input("grid", kF32, {2, 1, 2, 2}).node("GridSample", {"x", "grid"});
    m.s("padding_mode", "reflection").i("align_corners", 1);
    const HostTensor x = HostTensor::from<float>(carve::ir::Shape{2, 2, 2, 1}, {1, 2, 11, 12, 101, 102, 111, 112});
    const HostTensor grid = HostTensor::from<float>(carve::ir::Shape{2, 1, 2, 2}, {5, -1, -7, 0.5f, 0.3f, 1, 0, 0});
    check_close(m, {x, grid}, {1, 1.75, 11, 11.75, 102, 101.5, 112, 111.5});
  }

  SUBCASE("infinite and huge grid values read 0 with zeros padding") {
    const float inf = std::numeric_limits<float>::infinity();
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      CAPTURE(mode);
      Model m(16);
      m.input("x", kF32, {1, 1, H, W}).input("grid", kF32, {1, 1, 3, 2}).node("GridSample", {"x", "grid"}).s("mode", mode);
      check_close(m, {HostTensor::from<float>(carve::ir::Shape{1, 1, H, W}, image),
                      HostTensor::from<float>(carve::ir::Shape{1, 1, 3, 2}, {inf, 0, -inf, 0.2f, 1e30f, -1e30f})},
                  {0, 0, 0}, 0, 0);
    }
  }

  SUBCASE("bad attributes and shapes name the node") {
    auto model = [](const std::vector<int64_t>& x, const std::vector<int64_t>& grid) {
      Model m(16);
      m.input("x", kF32, x).input("grid", kF32, grid).node("GridSample", {"x", "grid"});
      return m;
    };
    Model mode = model({1, 1, 2, 2}, {1, 2, 2, 2});
    mode.s("mode", "area");
    check_fails(mode, ErrorCode::kInvalidArgument, "mode='area'");
    Model padding = model({1, 1, 2, 2}, {1, 2, 2, 2});
    padding.s("padding_mode", "wrap");
    check_fails(padding, ErrorCode::kInvalidArgument, "padding_mode='wrap'");
    Model align = model({1, 1, 2, 2}, {1, 2, 2, 2});
    align.i("align_corners", 2);
    check_fails(align, ErrorCode::kInvalidArgument, "align_corners=2");
    check_fails(model({1, 1, 2, 2}, {1, 2, 2, 3}), ErrorCode::kInvalidArgument, "needs [N, H_out, W_out, 2]");
    check_fails(model({2, 1, 2, 2}, {1, 2, 2, 2}), ErrorCode::kInvalidArgument, "needs [N, H_out, W_out, 2]");
    check_fails(model({1, 1, 2, 2, 2}, {1, 2, 2, 2, 3}), ErrorCode::kUnsupported, "4-D input");
    check_fails(model({1, 0, 2, 2}, {1, 2, 2, 2}), ErrorCode::kUnsupported, "X f32[1,0,2,2] is empty");
    check_fails(model({1, 1, 2, 2}, {1, 0, 2, 2}), ErrorCode::kUnsupported, "grid f32[1,0,2,2] is empty");
  }
}

TEST_CASE("onnx/ops/resize_tf_crop_and_resize") {
  // [[1 2] [3 4]] cropped to rows 0.25..0.75 and columns -0.5..1.5 (fractions of the last
  // index), 3x3 linear: rows at 0.25, 0.5, 0.75; columns at -0.5 and 1.5 (outside: the
  // extrapolation value) and 0.5.
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  auto crop = [](const std::vector<float>& roi, const std::vector<int64_t>& sizes) {
    Model m(13);
    m.input("x", kF32, {1, 1, 2, 2}).float_init("roi", {static_cast<int64_t>(roi.size())}, roi).int64_init("sizes", sizes);
    m.node("Resize", {"x", "roi", "", "sizes"}).s("mode", "linear").s("coordinate_transformation_mode", "tf_crop_and_resize");
    m.f("extrapolation_value", 9);
    return m;
  };
  check_close(crop({0, 0, 0.25f, -0.5f, 1, 1, 0.75f, 1.5f}, {1, 1, 3, 3}), {x}, {9, 2, 9, 9, 2.5, 9, 9, 3, 9});
  // A roi far outside the input: every output is the extrapolation value.
  check_close(crop({0, 0, 10, 10, 1, 1, 20, 20}, {1, 1, 2, 2}), {x}, {9, 9, 9, 9});
  // One output along an axis samples the roi's middle.
  check_close(crop({0, 0, 0, 0, 1, 1, 1, 1}, {1, 1, 1, 1}), {x}, {2.5});
  check_fails(crop({0, 0, 1, 1}, {1, 1, 2, 2}), ErrorCode::kInvalidArgument, "roi has 4 values");
  Model no_roi(13);
  no_roi.input("x", kF32, {1, 1, 2, 2}).int64_init("sizes", {1, 1, 3, 3});
  no_roi.node("Resize", {"x", "", "", "sizes"}).s("coordinate_transformation_mode", "tf_crop_and_resize");
  check_fails(no_roi, ErrorCode::kInvalidArgument, "needs roi");
}

TEST_CASE("onnx/ops/upsample") {
  // Upsample: nearest repeats each element (floor(o / scale)), linear interpolates at
  // o / scale with the edge repeated; scales an input (opset 9, Resize-10) or an
  // attribute (opset 7).
  const HostTensor x = HostTensor::from<float>(carve::ir::Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  const Values nearest{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  for (const char* op : {"Upsample", "Resize"}) {
    CAPTURE(op);
    Model m(std::string(op) == "Upsample" ? 9 : 10);
    m.input("x", kF32, {1, 1, 2, 2}).float_init("scales", {4}, {1, 1, 2, 3}).node(op, {"x", "scales"});
    check_close(m, {x}, nearest);
  }
  Model attr(7);
  attr.input("x", kF32, {1, 1, 2, 2}).node("Upsample", {"x"});
  auto* scales = attr.attr("scales", ::onnx::AttributeProto::FLOATS);
  for (float s : {1.f, 1.f, 2.f, 3.f}) scales->add_floats(s);
  check_close(attr, {x}, nearest);
  Model linear(9);
  linear.input("x", kF32, {1, 1, 2, 2}).float_init("scales", {4}, {1, 1, 1, 2}).node("Upsample", {"x", "scales"});
  linear.s("mode", "linear");
  check_close(linear, {x}, {1, 1.5, 2, 2, 3, 3.5, 4, 4});
  Model bad(9);
  bad.input("x", kF32, {1, 1, 2, 2}).float_init("scales", {4}, {1, 1, 2, 2}).node("Upsample", {"x", "scales"});
  bad.s("mode", "cubic");
  check_fails(bad, ErrorCode::kInvalidArgument, "mode='cubic'");
}

TEST_CASE("onnx/ops/roi_align") {
  // Two 4x5 images of two channels (negative values too, so max differs from avg); rois
  // inside, partly left of and above the image (samples past -1 read 0), past its right and
  // lower edges (samples within a pixel read the border), and one smaller than a pixel.
  RoiAlignCase c{"avg", true, 2, 2, 4, 5, 2, 3, 2, 0.8, {}, {}, {1, 0, 1, 0}};
  for (int64_t i = 0; i < 2 * 2 * 4 * 5; ++i) c.image.push_back(static_cast<float>((i * 7) % 11) - 3.f);
  c.rois = {0.3f, 0.2f, 4.7f, 3.9f, -2.6f, -1.8f, 2.1f, 1.3f, 4.2f, 3.5f, 7.5f, 5.8f, 1.1f, 1.4f, 1.3f, 1.5f};
  for (const char* mode : {"avg", "max"})
    for (bool half_pixel : {true, false})
      for (int64_t ratio : {1, 2, 3}) {
        CAPTURE(mode);
        CAPTURE(half_pixel);
        CAPTURE(ratio);
        c.mode = mode;
        c.half_pixel = half_pixel;
        c.ratio = ratio;
        check_close(c.model(), c.inputs(c.batch), c.run(), 1e-5, 1e-5);
      }

  SUBCASE("batch indices outside [0, N) fail the run") {
    for (int64_t bad : {2, -1}) {
      CAPTURE(bad);
      carve::onnx_test::check_run_fails(c.model(), c.inputs({0, bad, 1, 0}), ErrorCode::kOutOfBounds, "the_node");
    }
  }

  SUBCASE("bad attributes and shapes name the node") {
    RoiAlignCase a = c;
    a.ratio = 0;
    check_fails(a.model(), ErrorCode::kUnsupported, "sampling_ratio=0");
    RoiAlignCase m = c;
    m.mode = "median";
    check_fails(m.model(), ErrorCode::kInvalidArgument, "mode='median'");
    Model rois(16);
    rois.input("x", kF32, {1, 1, 4, 4}).input("rois", kF32, {2, 5}).input("batch", kI64, {2});
    rois.node("RoiAlign", {"x", "rois", "batch"}).i("sampling_ratio", 2);
    check_fails(rois, ErrorCode::kInvalidArgument, "needs [num_rois, 4]");
    Model batch(16);
    batch.input("x", kF32, {1, 1, 4, 4}).input("rois", kF32, {2, 4}).input("batch", kI64, {3});
    batch.node("RoiAlign", {"x", "rois", "batch"}).i("sampling_ratio", 2);
    check_fails(batch, ErrorCode::kInvalidArgument, "needs [num_rois] integers");
    Model none(16);
    none.input("x", kF32, {1, 1, 4, 4}).input("rois", kF32, {0, 4}).input("batch", kI64, {0});
    none.node("RoiAlign", {"x", "rois", "batch"}).i("sampling_ratio", 2);
    check_fails(none, ErrorCode::kUnsupported, "rois f32[0,4] is empty");
  }
}

TEST_CASE("onnx/ops/det") {
  // Batches of n x n matrices against cofactor expansion: dense ones, ones whose first
  // pivot is 0 (a row swap), singular ones (a zero column, equal rows, all zeros), 1x1.
  for (int64_t n : {1, 2, 3, 4, 5}) {
    CAPTURE(n);
    std::vector<float> values;
    Values expected;
    for (int64_t b = 0; b < 6; ++b) {
      std::vector<double> a(static_cast<size_t>(n * n));
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(static_cast<int64_t>(i * 7 + static_cast<size_t>(b) * 5) % 13) * 0.5 - 3;
      if (b == 1) a[0] = 0;                                            // first pivot 0
      if (b == 2) for (int64_t r = 0; r < n; ++r) a[static_cast<size_t>(r * n + n - 1)] = 0;  // a zero column
      if (b == 3 && n > 1) for (int64_t c = 0; c < n; ++c) a[static_cast<size_t>(n + c)] = a[static_cast<size_t>(c)];  // rows 0, 1 equal
      if (b == 4) std::fill(a.begin(), a.end(), 0.0);
      for (double v : a) values.push_back(static_cast<float>(v));
      expected.push_back(cofactor_det(a, n));
    }
    Model m(11);
    m.input("x", kF32, {2, 3, n, n}).node("Det", {"x"});
    check_close(m, {HostTensor::from<float>(carve::ir::Shape{2, 3, n, n}, values)}, expected, 1e-5, 1e-4);
  }

  SUBCASE("one f64 matrix gives a scalar") {
    Model m(11);
    m.input("x", ::onnx::TensorProto::DOUBLE, {3, 3}).node("Det", {"x"});
    const std::vector<double> a{0, 2, 1, 3, 0, 4, 5, 6, 0};  // pivots in rows 2, then 1: two swaps
    check_close(m, {HostTensor::from<double>(carve::ir::Shape{3, 3}, a)}, {cofactor_det(a, 3)}, 1e-12, 0);
  }

  SUBCASE("bad shapes name the node") {
    Model rect(11);
    rect.input("x", kF32, {2, 3}).node("Det", {"x"});
    check_fails(rect, ErrorCode::kInvalidArgument, "needs [..., n, n]");
    Model big(11);
    big.input("x", kF32, {65, 65}).node("Det", {"x"});
    check_fails(big, ErrorCode::kUnsupported, "65 x 65 matrices");
    Model empty(11);
    empty.input("x", kF32, {0, 3, 3}).node("Det", {"x"});
    check_fails(empty, ErrorCode::kUnsupported, "input f32[0,3,3] is empty");
  }
}
