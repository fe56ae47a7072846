// JIT conv2d kernels against the reference interpreter.
// Tolerance (f32, inputs in [-1, 1]): dot_tol(K) with K = C/groups * kh * kw (plus the
// bias); f64 1e-12; f16 rel 2e-3; integers exact.
// Inputs include +-inf/NaN now and then; weights are kept finite except on the direct
// (depthwise) path, because the GEMM path packs padding as zeros (0 * inf = NaN where
// the reference skips the padded tap; see emit_conv.cpp).
#include <array>

#include "compute_test_util.h"

namespace carve::jit::computetest {
namespace {

struct ConvCase {
  int64_t n = 1, c = 1, h = 1, w = 1, o = 1, kh = 1, kw = 1;
  ir::Conv2dOptions opt;
  bool bias = true;
  DType dtype = DType::kF32;
};

// Output extent >= 1 on both axes.
bool fits(const ConvCase& k) {
  int64_t sh = k.opt.dilations[0] * (k.kh - 1) + 1, sw = k.opt.dilations[1] * (k.kw - 1) + 1;
  return k.h + k.opt.pads[0] + k.opt.pads[2] >= sh && k.w + k.opt.pads[1] + k.opt.pads[3] >= sw;
}

std::string check_conv(const ConvCase& k, uint64_t seed, const JitRunOptions& run = {}) {
  int64_t kk = k.c / k.opt.groups * k.kh * k.kw;
  double tol = k.dtype == DType::kF64 ? 1e-12 : dot_tol(kk + 1);
  double rtol = k.dtype == DType::kF16 ? 2e-3 : tol;
  if (ir::is_integer(k.dtype)) tol = rtol = 0;
  return check([&](GraphBuilder& b) {
    auto x = b.input("x", k.dtype, {k.n, k.c, k.h, k.w});
    auto wt = b.input("w", k.dtype, {k.o, k.c / k.opt.groups, k.kh, k.kw});
    std::optional<ValueId> bias;
    if (k.bias) bias = b.input("bias", k.dtype, {k.o});
    b.output(b.conv2d(x, wt, bias, k.opt));
  }, seed, rtol, tol, -1, 1, run, k.c / k.opt.groups == 1 ? std::vector<std::string>{} : std::vector<std::string>{"w"});
}

ConvCase random_case(bool depthwise) {
  ConvCase k;
  k.n = *rc::gen::inRange<int64_t>(1, 3);
  int64_t groups = depthwise ? *rc::gen::inRange<int64_t>(1, 9) : *rc::gen::inRange<int64_t>(1, 4);
  int64_t cg = depthwise ? 1 : *rc::gen::inRange<int64_t>(1, 5);
  int64_t og = depthwise ? *rc::gen::inRange<int64_t>(1, 3) : *rc::gen::inRange<int64_t>(1, 6);
  k.c = groups * cg;
  k.o = groups * og;
  k.opt.groups = groups;
  k.h = *rc::gen::inRange<int64_t>(1, depthwise ? 20 : 13);
  k.w = *rc::gen::inRange<int64_t>(1, depthwise ? 70 : 40);
  k.kh = *rc::gen::inRange<int64_t>(1, 5);
  k.kw = *rc::gen::inRange<int64_t>(1, 5);
  k.opt.strides = {*rc::gen::inRange<int64_t>(1, 4), *rc::gen::inRange<int64_t>(1, 4)};
  k.opt.dilations = {*rc::gen::inRange<int64_t>(1, 3), *rc::gen::inRange<int64_t>(1, 3)};
  for (auto& p : k.opt.pads) p = *rc::gen::inRange<int64_t>(0, 3);
  k.bias = *rc::gen::arbitrary<bool>();
  k.dtype = *rc::gen::element(DType::kF32, DType::kF32, DType::kF64);
  return k;
}

TEST_CASE("jit/compute/conv2d/random_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("conv2d groups strides pads dilations", 25, [] {
    ConvCase k = random_case(false);
    RC_PRE(fits(k));
    std::string r = check_conv(k, *rc::gen::arbitrary<uint64_t>());
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/conv2d/depthwise_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("conv2d depthwise", 25, [] {
    ConvCase k = random_case(true);
    RC_PRE(fits(k));
    std::string r = check_conv(k, *rc::gen::arbitrary<uint64_t>());
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/conv2d/typical_layers") {
  if (skip_without_jit()) return;
  std::vector<ConvCase> cases;
  ConvCase a;  // 3x3 same, K = 576 > one K block
  a.n = 1, a.c = 64, a.h = 14, a.w = 14, a.o = 40, a.kh = 3, a.kw = 3;
  a.opt.pads = {1, 1, 1, 1};
  cases.push_back(a);
  ConvCase p = a;  // pointwise
  p.kh = p.kw = 1;
  p.opt.pads = {0, 0, 0, 0};
  cases.push_back(p);
  ConvCase d = a;  // depthwise 3x3 stride 2
  d.c = d.o = 32, d.h = d.w = 33, d.opt.groups = 32, d.opt.strides = {2, 2};
  cases.push_back(d);
  ConvCase s = a;  // 7x7 stride 2 stem
  s.c = 3, s.o = 16, s.h = s.w = 40, s.kh = s.kw = 7, s.opt.strides = {2, 2}, s.opt.pads = {3, 3, 3, 3};
  cases.push_back(s);
  ConvCase wide = p;  // pointwise from 1024 channels: weight rows 4 KiB apart (A copied per row tile)
  wide.c = 1024, wide.o = 30, wide.h = wide.w = 6;
  cases.push_back(wide);
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    std::string r = check_conv(cases[i], 100 + i);
    CHECK_MESSAGE(r.empty(), r);
  }
}

TEST_CASE("jit/compute/conv2d/other_dtypes") {
  if (skip_without_jit()) return;
  for (DType dt : {DType::kF16, DType::kBf16, DType::kI32, DType::kI8}) {
    for (int64_t groups : {1, 4}) {
      CAPTURE(ir::dtype_name(dt));
      CAPTURE(groups);
      ConvCase k;
      k.n = 2, k.c = 4, k.h = 9, k.w = 11, k.o = 8, k.kh = 3, k.kw = 2;
      k.opt.groups = groups;
      k.opt.pads = {1, 0, 1, 1};
      k.opt.strides = {1, 2};
      k.dtype = dt;
      double tol = dt == DType::kF16 ? 2e-3 : dt == DType::kBf16 ? 1.6e-2 : 0;
      std::string r = check([&](GraphBuilder& b) {
        auto x = b.input("x", dt, {k.n, k.c, k.h, k.w});
        auto wt = b.input("w", dt, {k.o, k.c / groups, k.kh, k.kw});
        b.output(b.conv2d(x, wt, b.input("bias", dt, {k.o}), k.opt));
      }, 9, tol, tol, -3, 3, {}, {"w"});
      CHECK_MESSAGE(r.empty(), r);
    }
  }
}

// The graph's single output fused (one kernel) vs unfused: "" when within tol (0: bits).
std::string fused_vs_unfused(const ir::Graph& g, const std::vector<HostTensor>& in, double tol) {
  JitRunOptions unfused;
  unfused.fusion.fuse = false;
  std::vector<CompiledKernel> kf;
  auto rf = run_jit(*shared_jit(), g, in, nullptr, {}, &kf);
  auto ru = run_jit(*shared_jit(), g, in, nullptr, unfused);
  if (!rf.ok()) return "fused: " + rf.status().to_string();
  if (!ru.ok()) return "unfused: " + ru.status().to_string();
  if (kf.size() != 1) return "fused into " + std::to_string(kf.size()) + " kernels";
  return compare((*rf)[0], (*ru)[0], tol, tol);
}

// conv + bias + relu (+ a residual add): fused and unfused give the same bits.
TEST_CASE("jit/compute/conv2d/fused_epilogue_equals_unfused") {
  if (skip_without_jit()) return;
  for (int64_t groups : {1, 16}) {
    CAPTURE(groups);
    GraphBuilder b;
    auto x = b.input("x", DType::kF32, {1, 16, 12, 30});
    auto w = b.input("w", DType::kF32, {16, 16 / groups, 3, 3});
    auto res = b.input("res", DType::kF32, {1, 16, 12, 30});
    ir::Conv2dOptions opt;
    opt.groups = groups;
    opt.pads = {1, 1, 1, 1};
    b.output(b.add(b.relu(b.conv2d(x, w, b.input("bias", DType::kF32, {16}), opt)), res));
    auto g = b.build();
    REQUIRE(g.ok());
    auto in = random_inputs(*g, 5, -1, 1, {"w"});
    CHECK(fused_vs_unfused(*g, in, 0) == "");
    std::string r = jit_vs_reference(*g, in, dot_tol(145), dot_tol(145));
    CHECK_MESSAGE(r.empty(), r);
  }
}

TEST_CASE("jit/compute/conv2d/tile_ranges") {
  if (skip_without_jit()) return;
  for (int64_t groups : {1, 2, 24}) {
    CAPTURE(groups);
    GraphBuilder b;
    auto x = b.input("x", DType::kF32, {2, 24, 20, 37});
    auto w = b.input("w", DType::kF32, {24, 24 / groups, 3, 3});
    ir::Conv2dOptions opt;
    opt.groups = groups;
    opt.pads = {1, 2, 1, 0};
    b.output(b.conv2d(x, w, std::nullopt, opt));
    auto g = b.build();
    REQUIRE(g.ok());
    auto in = random_inputs(*g, 6, -1, 1, {"w"});
    const ir::NodeId node = g->nodes.back().id;
    const int64_t natural = compute_op_tiles(*g, g->node(node));
    auto whole = run_node_tiles(*g, node, in, natural, {{0, natural}});
    REQUIRE(whole.ok());
    for (int64_t tiles : {natural, int64_t{5}, int64_t{64}}) {
      CAPTURE(tiles);
      auto parts = run_node_tiles(*g, node, in, tiles, {{0, tiles / 2}, {tiles / 2, tiles}});
      REQUIRE(parts.ok());
      CHECK(compare(*parts, *whole) == "");
    }
    auto stack = run_node_tiles(*g, node, in, natural, {{0, natural}}, /*drop_scratch=*/true);
    REQUIRE(stack.ok());
    CHECK(compare(*stack, *whole, dot_tol(216), dot_tol(216)) == "");
    auto tiled = JitRunOptions{};
    tiled.tile_by_tile = true;
    std::string r = jit_vs_reference(*g, in, dot_tol(216), dot_tol(216), tiled);
    CHECK_MESSAGE(r.empty(), r);
  }
}

// Depthwise (one input channel per group) on the shapes of MobileNet/EfficientNet: the
// direct path vectorises over output columns with masked chunks for padding, row tails
// and rows narrower than a vector (7, 14), and plain vectors on the interior (112).
// Every kernel size / stride / padding combination, odd channel counts; weights may be
// +-inf/NaN (padded taps must be skipped, not multiplied by 0).
TEST_CASE("jit/compute/conv2d/depthwise_shapes") {
  if (skip_without_jit()) return;
  struct Plane { int64_t hw, c; };
  const Plane planes[] = {{7, 5}, {14, 3}, {13, 7}, {112, 3}};
  uint64_t seed = 300;
  for (const Plane& pl : planes) {
    for (int64_t k : {3, 5}) {
      for (int64_t s : {1, 2}) {
        const std::vector<std::array<int64_t, 4>> pads = {
            {0, 0, 0, 0}, {k / 2, k / 2, k / 2, k / 2}, {k / 2 - 1, k / 2 - 1, k / 2, k / 2}, {1, 0, 2, 3}};
        for (const auto& p : pads) {
          ConvCase d;
          d.n = 1, d.c = d.o = pl.c, d.h = d.w = pl.hw, d.kh = d.kw = k;
          d.opt.groups = pl.c;
          d.opt.strides = {s, s};
          d.opt.pads = {p[0], p[1], p[2], p[3]};
          d.bias = (seed & 1) == 0;
          d.dtype = seed % 5 == 0 ? DType::kF64 : DType::kF32;
          if (!fits(d)) continue;
          CAPTURE(pl.hw);
          CAPTURE(pl.c);
          CAPTURE(k);
          CAPTURE(s);
          CAPTURE(p[0]);
          CAPTURE(p[1]);
          CAPTURE(p[2]);
          CAPTURE(p[3]);
          std::string r = check_conv(d, seed++);
          CHECK_MESSAGE(r.empty(), r);
        }
      }
    }
  }
  // Rectangular, channel multiplier 2, batch 2, dilation 2, a row wider than two vectors
  // with a tail (37), and a plane one column wide.
  ConvCase r;
  r.n = 2, r.c = 3, r.o = 6, r.h = 9, r.w = 37, r.kh = 3, r.kw = 5;
  r.opt.groups = 3;
  r.opt.pads = {1, 2, 1, 2};
  r.opt.dilations = {1, 2};
  for (int64_t w : {37, 1, 16, 17}) {
    CAPTURE(w);
    r.w = w;
    r.opt.pads = {1, 2, 1, 2};
    if (!fits(r)) continue;
    std::string m = check_conv(r, 400 + static_cast<uint64_t>(w));
    CHECK_MESSAGE(m.empty(), m);
  }
  // A kernel (dilated) about as tall as the input: no output row block has all its
  // kernel rows inside, so the rows are checked at run time.
  ConvCase t;
  t.n = 1, t.c = t.o = 3, t.h = 40, t.w = 20, t.kh = t.kw = 3;
  t.opt.groups = 3;
  t.opt.dilations = {20, 1};
  t.opt.pads = {20, 1, 20, 1};
  std::string m = check_conv(t, 450);
  CHECK_MESSAGE(m.empty(), m);
}

// Depthwise + bias + SiLU / hard-swish / relu / relu and a cast to f16, as fused by the
// group former: one kernel, equal to the unfused graph (relu: bit for bit) and to the
// reference, on narrow and wide planes.
TEST_CASE("jit/compute/conv2d/depthwise_fused_activation") {
  if (skip_without_jit()) return;
  for (int64_t hw : {7, 14, 56}) {
    for (int act = 0; act < 4; ++act) {
      CAPTURE(hw);
      CAPTURE(act);
      const int64_t c = 11, k = hw == 7 ? 5 : 3, s = hw == 56 ? 2 : 1;
      GraphBuilder b;
      auto x = b.input("x", DType::kF32, {1, c, hw, hw});
      auto w = b.input("w", DType::kF32, {c, 1, k, k});
      ir::Conv2dOptions opt;
      opt.groups = c;
      opt.strides = {s, s};
      opt.pads = {k / 2, k / 2, k / 2, k / 2};
      auto y = b.conv2d(x, w, b.input("bias", DType::kF32, {c}), opt);
      if (act == 0) {
        y = b.mul(y, b.sigmoid(y));
      } else if (act == 1) {
        y = b.mul(y, b.op1(ir::OpKind::kHardSigmoid, {y}, {{"alpha", 1.0 / 6}, {"beta", 0.5}}, "hsig"));
      } else if (act == 2) {
        y = b.relu(y);
      } else {  // changes the dtype: not finished in place, tail chunks lane by lane
        y = b.cast(b.relu(y), DType::kF16);
      }
      b.output(y);
      auto g = b.build();
      REQUIRE(g.ok());
      auto in = random_inputs(*g, 7 + static_cast<uint64_t>(hw), -1, 1, {"w"});
      // The fused SiLU is silu_f32, unfused sigmoid then a multiply: within an ulp or two.
      CHECK(fused_vs_unfused(*g, in, act >= 2 ? 0 : 1e-6) == "");
      const double tol = act == 3 ? 2e-3 : dot_tol(k * k + 1) + 1e-6;
      std::string r = jit_vs_reference(*g, in, tol, tol);
      CHECK_MESSAGE(r.empty(), r);
    }
  }
}

// Narrow depthwise planes split into tiles run separately equal one run.
TEST_CASE("jit/compute/conv2d/depthwise_tile_ranges") {
  if (skip_without_jit()) return;
  for (int64_t hw : {7, 14}) {
    CAPTURE(hw);
    GraphBuilder b;
    const int64_t c = 37;
    auto x = b.input("x", DType::kF32, {1, c, hw, hw});
    auto w = b.input("w", DType::kF32, {c, 1, 5, 5});
    ir::Conv2dOptions opt;
    opt.groups = c;
    opt.pads = {2, 2, 2, 2};
    b.output(b.conv2d(x, w, b.input("bias", DType::kF32, {c}), opt));
    auto g = b.build();
    REQUIRE(g.ok());
    auto in = random_inputs(*g, 8, -1, 1, {"w"});
    const ir::NodeId node = g->nodes.back().id;
    const int64_t natural = compute_op_tiles(*g, g->node(node));
    auto whole = run_node_tiles(*g, node, in, natural, {{0, natural}});
    REQUIRE(whole.ok());
    for (int64_t tiles : {natural, int64_t{5}, int64_t{37}, int64_t{64}}) {
      CAPTURE(tiles);
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (int64_t t = 0; t < tiles; t += 3) ranges.push_back({t, std::min(tiles, t + 3)});
      auto parts = run_node_tiles(*g, node, in, tiles, ranges);
      REQUIRE(parts.ok());
      CHECK(compare(*parts, *whole) == "");
    }
    std::string r = jit_vs_reference(*g, in, dot_tol(26), dot_tol(26));
    CHECK_MESSAGE(r.empty(), r);
  }
}

}  // namespace
}  // namespace carve::jit::computetest
