// Reference interpreter: reductions, softmax, layer_norm, batch_norm, matmul, gemm, conv2d,
// pooling.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "reference_test_util.h"

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<float> iota_f(int64_t n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_CASE("reference/reductions with axes and keepdims") {
  const HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor s = run1(OpKind::kReduceSum, {x}, {{"axes", std::vector<int64_t>{1}}});
  CHECK(s.type.shape == Shape{2, 1});
  check_close(s, {6, 15});
  HostTensor s0 = run1(OpKind::kReduceSum, {x}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", 0}});
  CHECK(s0.type.shape == Shape{3});
  check_close(s0, {5, 7, 9});
  HostTensor all = run1(OpKind::kReduceSum, {x}, {{"keepdims", 0}});
  CHECK(all.type.shape == Shape{});
  check_close(all, {21});
  check_close(run1(OpKind::kReduceMean, {x}, {{"axes", std::vector<int64_t>{-1}}}), {2, 5});
  check_close(run1(OpKind::kReduceMean, {x}), {3.5});
  check_close(run1(OpKind::kReduceMax, {x}, {{"axes", std::vector<int64_t>{0}}}), {4, 5, 6});
  // Middle axis of a rank-3 tensor.
  HostTensor r3 = run1(OpKind::kReduceSum, {f32({2, 2, 2}, iota_f(8))},
                       {{"axes", std::vector<int64_t>{1}}, {"keepdims", 0}});
  CHECK(r3.type.shape == Shape{2, 2});
  check_close(r3, {2, 4, 10, 12});
  // Two axes at once.
  check_close(run1(OpKind::kReduceMax, {f32({2, 2, 2}, iota_f(8))}, {{"axes", std::vector<int64_t>{0, 2}}}), {5, 7});
}

TEST_CASE("reference/reductions on integers NaN and empty axes") {
  CHECK(run1(OpKind::kReduceSum, {i8({3}, {100, 100, 1})}).as<int8_t>() == std::vector<int8_t>{-55});
  CHECK(run1(OpKind::kReduceMax, {i32({2, 2}, {-5, -7, 3, -1})}, {{"axes", std::vector<int64_t>{1}}}).as<int32_t>() ==
        std::vector<int32_t>{-5, 3});
  CHECK(run1(OpKind::kReduceMax, {u8({2}, {200, 100})}).as<uint8_t>() == std::vector<uint8_t>{200});
  check_close(run1(OpKind::kReduceMax, {f32({3}, {1, NAN, 2})}), {kNaN});
  // Reducing an empty axis: sum 0, mean NaN, max -inf / the integer minimum.
  const HostTensor empty = f32({2, 0}, {});
  const ir::Attrs ax1 = {{"axes", std::vector<int64_t>{1}}};
  check_close(run1(OpKind::kReduceSum, {empty}, ax1), {0, 0});
  check_close(run1(OpKind::kReduceMean, {empty}, ax1), {kNaN, kNaN});
  check_close(run1(OpKind::kReduceMax, {empty}, ax1), {-kInf, -kInf});
  CHECK(run1(OpKind::kReduceMax, {i8({1, 0}, {})}, ax1).as<int8_t>() == std::vector<int8_t>{-128});
}

TEST_CASE("reference/softmax rows sum to one and is max-stable") {
  check_close(run1(OpKind::kSoftmax, {f64({3}, {1, 2, 3})}),
              {0.09003057317038046, 0.24472847105479764, 0.6652409557748218}, 1e-12, 1e-12);
  // Huge logits would overflow exp without subtracting the max.
  check_close(run1(OpKind::kSoftmax, {f32({2, 2}, {1000, 1000, -1000, 0})}), {0.5, 0.5, 0, 1});
  // axis 0 of a [2,3]: columns sum to 1.
  HostTensor cols = run1(OpKind::kSoftmax, {f32({2, 3}, {0, 1, 2, 0, 3, 2})}, {{"axis", 0}});
  check_close(cols, {0.5, 0.11920292202211755, 0.5, 0.5, 0.8807970779778823, 0.5});
  CHECK(rc::check("softmax rows sum to 1", [](const std::vector<int8_t>& raw) {
    RC_PRE(!raw.empty());
    std::vector<float> v(raw.begin(), raw.end());
    const auto n = static_cast<int64_t>(v.size());
    const HostTensor out = run1(OpKind::kSoftmax, {f32({1, n}, v)});
    double sum = 0;
    for (double p : out.to_doubles()) {
      RC_ASSERT(p >= 0.0);
      sum += p;
    }
    RC_ASSERT(std::fabs(sum - 1.0) < 1e-5);
  }));
}

TEST_CASE("reference/layer_norm normalises over the trailing dims") {
  // eps 0 for exact values: row [1,2,3,4] has mean 2.5, biased variance 1.25.
  const double a = 1.5 / std::sqrt(1.25), b = 0.5 / std::sqrt(1.25);
  HostTensor y = run1(OpKind::kLayerNorm, {f64({2, 4}, {1, 2, 3, 4, 2, 4, 6, 8}), f64({4}, {1, 1, 1, 1})},
                      {{"epsilon", 0.0}});
  check_close(y, {-a, -b, b, a, -a, -b, b, a}, 1e-12, 1e-12);
  // Scale and bias apply per normalised position.
  HostTensor z = run1(OpKind::kLayerNorm,
                      {f64({1, 4}, {1, 2, 3, 4}), f64({4}, {1, 1, 2, 2}), f64({4}, {0, 0, 0, 1})},
                      {{"epsilon", 0.0}});
  check_close(z, {-a, -b, 2 * b, 2 * a + 1}, 1e-12, 1e-12);
  // axis 1 of [2,2,2]: each sample normalised over 4 values; mean 0 and variance 1 after.
  HostTensor w = run1(OpKind::kLayerNorm, {f32({2, 2, 2}, {1, 5, 2, 9, -3, 0, 4, 4}), f32({2, 2}, {1, 1, 1, 1})},
                      {{"axis", 1}});
  std::vector<double> v = w.to_doubles();
  for (int s = 0; s < 2; ++s) {
    double mean = 0, var = 0;
    for (int j = 0; j < 4; ++j) mean += v[static_cast<size_t>(s * 4 + j)] / 4;
    for (int j = 0; j < 4; ++j) var += std::pow(v[static_cast<size_t>(s * 4 + j)] - mean, 2) / 4;
    CHECK(std::fabs(mean) < 1e-6);
    CHECK(std::fabs(var - 1) < 1e-4);  // epsilon 1e-5 shrinks it a little
  }
}

TEST_CASE("reference/batch_norm per channel") {
  HostTensor y = run1(OpKind::kBatchNorm,
                      {f32({1, 2, 1, 2}, {1, 2, 3, 4}), f32({2}, {1, 2}), f32({2}, {0, 1}),
                       f32({2}, {1, 3}), f32({2}, {4, 1})},
                      {{"epsilon", 0.0}});
  check_close(y, {0, 0.5, 1, 3});
  // Rank 2 (no spatial dims).
  check_close(run1(OpKind::kBatchNorm,
                   {f32({2, 1}, {2, 4}), f32({1}, {3}), f32({1}, {1}), f32({1}, {2}), f32({1}, {1})},
                   {{"epsilon", 0.0}}),
              {1, 7});
}

TEST_CASE("reference/matmul 2-D 1-D and batched") {
  // [2,3] x [3,2]
  HostTensor y = run1(OpKind::kMatmul, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})});
  CHECK(y.type.shape == Shape{2, 2});
  check_close(y, {58, 64, 139, 154});
  // 1-D x 2-D: a row vector, the leading 1 dropped.
  HostTensor v = run1(OpKind::kMatmul, {f32({3}, {1, 0, -1}), f32({3, 2}, {7, 8, 9, 10, 11, 12})});
  CHECK(v.type.shape == Shape{2});
  check_close(v, {-4, -4});
  // 2-D x 1-D: a column vector.
  HostTensor c = run1(OpKind::kMatmul, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {1, 1, 1})});
  CHECK(c.type.shape == Shape{2});
  check_close(c, {6, 15});
  // 1-D x 1-D: a scalar dot product.
  HostTensor d = run1(OpKind::kMatmul, {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})});
  CHECK(d.type.shape == Shape{});
  check_close(d, {32});
  // Batch broadcast: [2,1,2] x [3,2,1] -> [2,3,1,1]... a [2,1,1,2] x b [3,2,1].
  HostTensor bb = run1(OpKind::kMatmul, {f32({2, 1, 1, 2}, {1, 2, 3, 4}), f32({3, 2, 1}, {1, 0, 0, 1, 1, 1})});
  CHECK(bb.type.shape == Shape{2, 3, 1, 1});
  check_close(bb, {1, 2, 3, 3, 4, 7});
  // Batched 1-D promotion: [2,2,3] x [3] -> [2,2].
  HostTensor bv = run1(OpKind::kMatmul, {f32({2, 2, 3}, iota_f(12)), f32({3}, {1, 0, 0})});
  CHECK(bv.type.shape == Shape{2, 2});
  check_close(bv, {0, 3, 6, 9});
  // Integers wrap.
  CHECK(run1(OpKind::kMatmul, {i8({1, 2}, {100, 100}), i8({2, 1}, {2, 1})}).as<int8_t>() ==
        std::vector<int8_t>{44});
}

TEST_CASE("reference/matmul 256x256 runs quickly") {
  const int64_t n = 256;
  std::vector<float> a(static_cast<size_t>(n * n)), b(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      a[static_cast<size_t>(i * n + j)] = static_cast<float>(i == j ? 2 : 0);  // 2 * identity
      b[static_cast<size_t>(i * n + j)] = static_cast<float>((i + j) % 7);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  HostTensor y = run1(OpKind::kMatmul, {f32({n, n}, a), f32({n, n}, b)});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("256x256 matmul took " << seconds << " s");
  std::vector<float> got = y.as<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != 2 * b[i]) {
      FAIL_CHECK("element " << i);
      break;
    }
  }
  CHECK(seconds < 10.0);  // generous: sanitizer builds are slow
}

TEST_CASE("reference/gemm transposes alpha beta and broadcast c") {
  const HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const HostTensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  check_close(run1(OpKind::kGemm, {a, b}), {58, 64, 139, 154});
  // c as a row [N], alpha 2, beta 0.5.
  check_close(run1(OpKind::kGemm, {a, b, f32({2}, {10, 20})}, {{"alpha", 2.0}, {"beta", 0.5}}),
              {121, 138, 283, 318});
  // c as a column [M,1] and as a scalar.
  check_close(run1(OpKind::kGemm, {a, b, f32({2, 1}, {1, 2})}), {59, 65, 141, 156});
  check_close(run1(OpKind::kGemm, {a, b, f32({}, {-58})}), {0, 6, 81, 96});
  // trans_a and trans_b: A^T is [2,3] when A is [3,2]; B^T is [3,2] when B is [2,3].
  const HostTensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  const HostTensor bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  check_close(run1(OpKind::kGemm, {at, bt}, {{"trans_a", 1}, {"trans_b", 1}}), {58, 64, 139, 154});
  check_close(run1(OpKind::kGemm, {at, b}, {{"trans_a", 1}}), {58, 64, 139, 154});
  check_close(run1(OpKind::kGemm, {a, bt}, {{"trans_b", 1}}), {58, 64, 139, 154});
  // Integers: alpha = beta = 1 wraps exactly; other alpha uses the cast rules.
  CHECK(run1(OpKind::kGemm, {i8({1, 1}, {100}), i8({1, 1}, {2}), i8({1}, {1})}).as<int8_t>() ==
        std::vector<int8_t>{-55});
  CHECK(run1(OpKind::kGemm, {i32({1, 1}, {3}), i32({1, 1}, {5}), i32({1}, {1})},
             {{"alpha", 0.5}, {"beta", 2.0}})
            .as<int32_t>() == std::vector<int32_t>{9});  // 7.5 + 2 = 9.5 -> 9
}

TEST_CASE("reference/conv2d padding stride dilation groups and bias") {
  const ir::Attrs pad1_stride2 = {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                  {"strides", std::vector<int64_t>{2, 2}}};
  // 3x3 input 1..9, 2x2 ones kernel, pad 1, stride 2 -> 2x2 windows at -1 and 1.
  HostTensor y = run1(OpKind::kConv2d, {f32({1, 1, 3, 3}, iota_f(9, 1)), f32({1, 1, 2, 2}, {1, 1, 1, 1})},
                      pad1_stride2);
  CHECK(y.type.shape == Shape{1, 1, 2, 2});
  check_close(y, {1, 5, 11, 28});
  // Asymmetric pads (top 1 only, right 1 only) and a non-symmetric kernel.
  HostTensor asym = run1(OpKind::kConv2d, {f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1, 1, 1, 2}, {1, 10})},
                         {{"pads", std::vector<int64_t>{1, 0, 0, 1}}});
  CHECK(asym.type.shape == Shape{1, 1, 3, 2});
  check_close(asym, {0, 0, 21, 2, 43, 4});
  // Dilation 2: each output sums the corners of a 3x3 patch of a 4x4 input 0..15.
  HostTensor dil = run1(OpKind::kConv2d, {f32({1, 1, 4, 4}, iota_f(16)), f32({1, 1, 2, 2}, {1, 1, 1, 1})},
                        {{"dilations", std::vector<int64_t>{2, 2}}});
  CHECK(dil.type.shape == Shape{1, 1, 2, 2});
  check_close(dil, {20, 24, 36, 40});
  // Depthwise groups = 2 with bias.
  HostTensor dw = run1(OpKind::kConv2d,
                       {f32({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40}), f32({2, 1, 1, 1}, {2, 3}), f32({2}, {1, -1})},
                       {{"groups", 2}});
  check_close(dw, {3, 5, 7, 9, 29, 59, 89, 119});
  // Two input channels per group: out0 = x0 + x1, out1 = x2 - x3.
  HostTensor g2 = run1(OpKind::kConv2d, {f32({1, 4, 1, 1}, {1, 2, 3, 4}), f32({2, 2, 1, 1}, {1, 1, 1, -1})},
                       {{"groups", 2}});
  check_close(g2, {3, -1});
  // Everything at once: batch 2, groups 2, 4 outputs, pad, stride and dilation on 4x4
  // planes x[r][c] = 4r + c (+16 per channel, +32 per batch). Out extent: (4+2-3)/2+1 = 2;
  // output (oy, ox) taps rows {2oy-1, 2oy+1} and cols {2ox-1, 2ox+1}.
  //  out0 = top-left tap of ch0, out1 = bottom-right tap of ch0,
  //  out2 = all four taps of ch1 + 100, out3 = -(top-left tap of ch1).
  HostTensor all = run1(OpKind::kConv2d,
                        {f32({2, 2, 4, 4}, iota_f(64)),
                         f32({4, 1, 2, 2}, {1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, 0, 0, 0}),
                         f32({4}, {0, 0, 100, 0})},
                        {{"groups", 2}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                         {"strides", std::vector<int64_t>{2, 2}}, {"dilations", std::vector<int64_t>{2, 2}}});
  CHECK(all.type.shape == Shape{2, 4, 2, 2});
  check_close(all, {0, 0, 0, 5, 5, 7, 13, 15, 121, 144, 150, 204, 0, 0, 0, -21,
                    0, 0, 0, 37, 37, 39, 45, 47, 153, 208, 214, 332, 0, 0, 0, -53});
  // Integer conv wraps.
  CHECK(run1(OpKind::kConv2d, {i8({1, 1, 1, 2}, {100, 100}), i8({1, 1, 1, 2}, {1, 1})}).as<int8_t>() ==
        std::vector<int8_t>{-56});
}

TEST_CASE("reference/conv2d 1x3x64x64 runs quickly") {
  const auto start = std::chrono::steady_clock::now();
  HostTensor y = run1(OpKind::kConv2d,
                      {f32({1, 3, 64, 64}, std::vector<float>(3 * 64 * 64, 1.0f)),
                       f32({8, 3, 3, 3}, std::vector<float>(8 * 27, 1.0f))},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("1x3x64x64 conv took " << seconds << " s");
  CHECK(y.type.shape == Shape{1, 8, 64, 64});
  std::vector<float> v = y.as<float>();
  CHECK(v[0] == 12);            // corner: 2x2 taps x 3 channels
  CHECK(v[1] == 18);            // edge: 2x3 taps x 3 channels
  CHECK(v[64 + 1] == 27);       // interior
  CHECK(v[7 * 4096 + 4095] == 12);
  CHECK(seconds < 10.0);
}

TEST_CASE("reference/max_pool strides padding and ceil_mode") {
  HostTensor y = run1(OpKind::kMaxPool, {f32({1, 1, 4, 4}, iota_f(16))},
                      {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  check_close(y, {5, 7, 13, 15});
  // ceil_mode keeps the partial last window: 5x5 -> 3x3.
  HostTensor c = run1(OpKind::kMaxPool, {f32({1, 1, 5, 5}, iota_f(25))},
                      {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", 1}});
  CHECK(c.type.shape == Shape{1, 1, 3, 3});
  check_close(c, {6, 8, 9, 16, 18, 19, 21, 23, 24});
  // Padding is ignored (negative inputs would lose to a zero pad otherwise).
  HostTensor p = run1(OpKind::kMaxPool, {f32({1, 1, 2, 2}, {-1, -2, -3, -4})},
                      {{"kernel", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  check_close(p, {-1, -1, -2, -1, -1, -2, -3, -3, -4});
  CHECK(run1(OpKind::kMaxPool, {i32({1, 1, 1, 3}, {-7, 9, 2})}, {{"kernel", std::vector<int64_t>{1, 2}}})
            .as<int32_t>() == std::vector<int32_t>{9, 9});
  check_close(run1(OpKind::kMaxPool, {f32({1, 1, 1, 2}, {NAN, 1})}, {{"kernel", std::vector<int64_t>{1, 2}}}), {kNaN});
}

TEST_CASE("reference/avg_pool count_include_pad and ceil_mode") {
  const HostTensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const ir::Attrs base = {{"kernel", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  check_close(run1(OpKind::kAvgPool, {x}, base), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  ir::Attrs incl = base;
  incl["count_include_pad"] = 1;
  check_close(run1(OpKind::kAvgPool, {x}, incl), {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  // ceil_mode: the part of a window past the (zero) end padding is never counted.
  for (int include : {0, 1}) {
    HostTensor c = run1(OpKind::kAvgPool, {f32({1, 1, 3, 3}, iota_f(9, 1))},
                        {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                         {"ceil_mode", 1}, {"count_include_pad", include}});
    CHECK(c.type.shape == Shape{1, 1, 2, 2});
    check_close(c, {3, 4.5, 7.5, 9});
  }
  // ceil_mode with end padding: width 4, kernel 3, stride 2, pads 1/1 -> 3 windows starting
  // at -1, 1 and 3; the last reaches past the end padding (cols 3, 4, 5 with only col 4
  // padding), so counting the pad divides by 2, not 3.
  const ir::Attrs ceil_pad = {{"kernel", std::vector<int64_t>{1, 3}}, {"strides", std::vector<int64_t>{1, 2}},
                              {"pads", std::vector<int64_t>{0, 1, 0, 1}}, {"ceil_mode", 1}};
  const HostTensor row = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  HostTensor ex = run1(OpKind::kAvgPool, {row}, ceil_pad);
  CHECK(ex.type.shape == Shape{1, 1, 1, 3});
  check_close(ex, {1.5, 3, 4});
  ir::Attrs ceil_pad_incl = ceil_pad;
  ceil_pad_incl["count_include_pad"] = 1;
  check_close(run1(OpKind::kAvgPool, {row}, ceil_pad_incl), {1, 3, 2});
}

TEST_CASE("reference/global_avg_pool averages spatial dims") {
  HostTensor y = run1(OpKind::kGlobalAvgPool, {f32({1, 2, 2, 2}, {1, 2, 3, 4, 10, 10, 10, 14})});
  CHECK(y.type.shape == Shape{1, 2, 1, 1});
  check_close(y, {2.5, 11});
  HostTensor r3 = run1(OpKind::kGlobalAvgPool, {f64({2, 1, 3}, {1, 2, 3, 4, 5, 9})});
  CHECK(r3.type.shape == Shape{2, 1, 1});
  check_close(r3, {2, 6});
}

}  // namespace

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

TEST_CASE("reference/zero-size tensors") {
  // An empty contraction gives zeros (plus c for gemm).
  HostTensor mm = run1(OpKind::kMatmul, {f32({2, 0}, {}), f32({0, 3}, {})});
  CHECK(mm.type.shape == Shape{2, 3});
  CHECK(mm.as<float>() == std::vector<float>(6, 0.0f));
  check_close(run1(OpKind::kGemm, {f32({1, 0}, {}), f32({0, 2}, {}), f32({2}, {1, 2})}), {1, 2});
  CHECK(run1(OpKind::kMatmul, {f32({0, 2, 3}, {}), f32({3, 1}, {1, 1, 1})}).type.shape == Shape{0, 2, 1});
  check_close(run1(OpKind::kReduceSum, {f32({0}, {})}), {0});
  CHECK(run1(OpKind::kConv2d, {f32({0, 1, 2, 2}, {}), f32({1, 1, 1, 1}, {1})}).bytes.empty());
  CHECK(run1(OpKind::kGather, {f32({3}, {1, 2, 3}), i64({0}, {})}).bytes.empty());
  CHECK(run1(OpKind::kGather, {f32({0, 2}, {}), i64({1}, {0})}, {{"axis", 1}}).bytes.empty());
  CHECK(run1(OpKind::kTranspose, {f32({0, 2}, {})}).type.shape == Shape{2, 0});
  CHECK(run1(OpKind::kSoftmax, {f32({2, 0}, {})}).bytes.empty());
  CHECK(run1(OpKind::kPad, {f32({0}, {})}, {{"pads", std::vector<int64_t>{1, 1}}, {"value", 3.0}}).as<float>() ==
        std::vector<float>{3, 3});
}

}  // namespace

TEST_CASE("reference/arg_max and arg_min: axes, keepdims, ties, select_last_index") {
  const HostTensor x = f32({2, 3}, {1, 5, 5, 7, -2, 7});
  CHECK(run1(OpKind::kArgMax, {x}).type == ir::TensorType{DType::kI64, Shape{1, 3}});
  CHECK(run1(OpKind::kArgMax, {x}).as<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(run1(OpKind::kArgMax, {x}, {{"axis", -1}, {"keepdims", 0}}).as<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(run1(OpKind::kArgMax, {x}, {{"axis", 1}, {"select_last_index", 1}}).as<int64_t>() ==
        std::vector<int64_t>{2, 2});
  CHECK(run1(OpKind::kArgMin, {x}, {{"axis", 1}}).as<int64_t>() == std::vector<int64_t>{0, 1});
  const HostTensor t = i8({4}, {-3, 9, -3, 9});
  CHECK(run1(OpKind::kArgMin, {t}, {{"select_last_index", 1}}).as<int64_t>() == std::vector<int64_t>{2});
  CHECK(run1(OpKind::kArgMax, {u8({3}, {7, 200, 100})}).as<int64_t>() == std::vector<int64_t>{1});
  CHECK(run1(OpKind::kArgMax, {i64({2}, {INT64_MIN, INT64_MAX})}).as<int64_t>() == std::vector<int64_t>{1});
}

TEST_CASE("reference/arg_max and arg_min: NaN wins, the first one (the last with select_last_index)") {
  const HostTensor x = f32({5}, {1, NAN, 3, NAN, -1});
  for (OpKind op : {OpKind::kArgMax, OpKind::kArgMin}) {
    CAPTURE(ir::op_name(op));
    CHECK(run1(op, {x}).as<int64_t>() == std::vector<int64_t>{1});
    CHECK(run1(op, {x}, {{"select_last_index", 1}}).as<int64_t>() == std::vector<int64_t>{3});
    CHECK(run1(op, {f64({2}, {NAN, 2})}).as<int64_t>() == std::vector<int64_t>{0});
  }
}

TEST_CASE("reference/reduce_prod over axes of floats and wrapping integers and u64 past INT64_MAX") {
  const HostTensor x = HostTensor::from<float>({2, 3}, {1, 2, 3, -4, 0.5f, 2});
  CHECK(run1(OpKind::kReduceProd, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}).as<float>() ==
        std::vector<float>{6, -4});
  CHECK(run1(OpKind::kReduceProd, {x}, {{"keepdims", int64_t{1}}}).as<float>() == std::vector<float>{-24});
  const HostTensor empty = HostTensor::from<float>({2, 0}, {});
  CHECK(run1(OpKind::kReduceProd, {empty}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}})
            .as<float>() == std::vector<float>{1, 1});  // the empty product
  const HostTensor i = HostTensor::from<int8_t>({3}, {16, 16, -3});
  CHECK(run1(OpKind::kReduceProd, {i}, {{"keepdims", int64_t{0}}}).as<int8_t>() == std::vector<int8_t>{0});
  const HostTensor u = HostTensor::from<uint64_t>({2}, {(uint64_t{1} << 62) + 1, 3});
  CHECK(run1(OpKind::kReduceProd, {u}, {{"keepdims", int64_t{0}}}).as<uint64_t>() ==
        std::vector<uint64_t>{((uint64_t{1} << 62) + 1) * 3});
}
