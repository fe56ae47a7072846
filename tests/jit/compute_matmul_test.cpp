// JIT matmul / gemm kernels against the reference interpreter.
// Tolerance (f32, inputs in [-1, 1]): |got - ref| <= t + t*|ref| with t = 2e-6*sqrt(K) + 1e-6
// (dot_tol); f64 1e-12; f16 rel 2e-3, bf16 rel 1.6e-2 (one rounding of the result + f32
// accumulation); integers exact (wrap-around).
#include <array>

#include "compute_test_util.h"

namespace carve::jit::computetest {
namespace {

std::string check_matmul(int64_t m, int64_t k, int64_t n, DType dt, uint64_t seed) {
  double tol = dt == DType::kF64 ? 1e-12 : dot_tol(k);
  return check([&](GraphBuilder& b) {
    auto x = b.input("a", dt, {m, k});
    auto y = b.input("b", dt, {k, n});
    b.output(b.matmul(x, y));
  }, seed, tol, tol);
}

TEST_CASE("jit/compute/matmul/edge_sizes") {
  if (skip_without_jit()) return;
  const std::vector<std::array<int64_t, 3>> sizes = {
      {1, 1, 1},   {1, 7, 1},     {7, 1, 7},     {7, 7, 7},      {1, 1023, 1},  {1023, 3, 5},
      {5, 3, 1023}, {67, 1023, 33}, {13, 17, 19}, {96, 256, 129}, {25, 300, 257}, {130, 70, 300},
      {3, 0, 4},   {0, 5, 3}};
  for (auto [m, k, n] : sizes) {
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    std::string r = check_matmul(m, k, n, DType::kF32, static_cast<uint64_t>(m * 1000003 + k * 1009 + n));
    CHECK_MESSAGE(r.empty(), r);
  }
  std::string r = check_matmul(37, 70, 45, DType::kF64, 3);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("jit/compute/matmul/random_shapes_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("matmul random M K N", 20, [] {
    auto dim = [] { return *rc::gen::oneOf(rc::gen::just<int64_t>(1), rc::gen::inRange<int64_t>(1, 90)); };
    int64_t m = dim(), k = dim(), n = dim();
    DType dt = *rc::gen::element(DType::kF32, DType::kF64);
    std::string r = check_matmul(m, k, n, dt, *rc::gen::arbitrary<uint64_t>());
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/matmul/batched_broadcast_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("matmul batch broadcast", 20, [] {
    int rank = *rc::gen::inRange(0, 4);
    std::vector<int64_t> out(static_cast<size_t>(rank));
    for (auto& d : out) d = *rc::gen::inRange<int64_t>(1, 4);
    // Each operand: drop some leading batch dims, set some to 1.
    auto operand_batch = [&] {
      int drop = *rc::gen::inRange(0, rank + 1);
      std::vector<int64_t> v(out.begin() + drop, out.end());
      for (auto& d : v) if (*rc::gen::inRange(0, 3) == 0) d = 1;
      return v;
    };
    std::vector<int64_t> ab = operand_batch(), bb = operand_batch();
    int64_t m = *rc::gen::inRange<int64_t>(1, 30), k = *rc::gen::inRange<int64_t>(1, 40),
            n = *rc::gen::inRange<int64_t>(1, 40);
    ab.push_back(m);
    ab.push_back(k);
    bb.push_back(k);
    bb.push_back(n);
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("a", DType::kF32, ir::Shape(ab));
      auto y = b.input("b", DType::kF32, ir::Shape(bb));
      b.output(b.matmul(x, y));
    }, *rc::gen::arbitrary<uint64_t>(), dot_tol(k), dot_tol(k));
    RC_ASSERT(r == std::string());
  }));
}

// A weight shared by every batch ([t, 1, k] x [k, n], PyTorch's sequence-first
// projections): one GEMM of t rows, with a fused bias and residual, equal to the reference.
TEST_CASE("jit/compute/matmul/shared_b_folds_batch_into_m") {
  if (skip_without_jit()) return;
  GraphBuilder fb;
  auto fx = fb.input("a", DType::kF32, {2, 37, 1, 19});
  auto fw = fb.input("b", DType::kF32, {1, 19, 45});
  fb.output(fb.matmul(fx, fw));
  auto fg = fb.build();
  REQUIRE(fg.ok());
  const ir::Node& mm = fg->nodes.back();
  const tiling::MatmulShape shape = tiling::matmul_shape(*fg, mm);
  CHECK(shape.m == 74);
  CHECK(shape.batch_dims.empty());
  CHECK(tiling::matmul_tiles(*fg, mm).batch == 1);
  std::string r = check([&](GraphBuilder& b) {
    auto x = b.input("a", DType::kF32, {2, 37, 1, 19});
    auto w = b.input("b", DType::kF32, {19, 45});
    auto bias = b.input("bias", DType::kF32, {45});
    auto res = b.input("res", DType::kF32, {2, 37, 1, 45});
    b.output(b.add(b.add(b.matmul(x, w), bias), res));
  }, 17, dot_tol(19), dot_tol(19));
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("jit/compute/matmul/vector_operands") {
  if (skip_without_jit()) return;
  struct Case {
    ir::Shape a, b;
  };
  const std::vector<Case> cases = {{{9}, {9}},       {{9}, {9, 5}},     {{4, 9}, {9}},
                                   {{2, 3, 9}, {9}}, {{9}, {2, 9, 40}}, {{300}, {300, 70}}};
  for (const Case& c : cases) {
    CAPTURE(c.a.to_string());
    CAPTURE(c.b.to_string());
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("a", DType::kF32, c.a);
      auto y = b.input("b", DType::kF32, c.b);
      b.output(b.matmul(x, y));
    }, 11, dot_tol(300), dot_tol(300));
    CHECK_MESSAGE(r.empty(), r);
  }
}

TEST_CASE("jit/compute/gemm/flags_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("gemm trans alpha beta c", 20, [] {
    int64_t m = *rc::gen::inRange<int64_t>(1, 50), k = *rc::gen::inRange<int64_t>(1, 60),
            n = *rc::gen::inRange<int64_t>(1, 50);
    bool ta = *rc::gen::arbitrary<bool>(), tb = *rc::gen::arbitrary<bool>();
    double alpha = *rc::gen::element(1.0, 0.5, -2.0), beta = *rc::gen::element(1.0, 0.0, 0.25);
    int c_kind = *rc::gen::inRange(0, 6);  // none, [], [N], [M,1], [1,N], [M,N]
    DType dt = *rc::gen::element(DType::kF32, DType::kF64);
    double tol = dt == DType::kF64 ? 1e-12 : 2 * dot_tol(k);
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("a", dt, ta ? ir::Shape{k, m} : ir::Shape{m, k});
      auto y = b.input("b", dt, tb ? ir::Shape{n, k} : ir::Shape{k, n});
      std::optional<ValueId> c;
      const std::vector<ir::Shape> cs = {{}, {}, {n}, {m, 1}, {1, n}, {m, n}};
      if (c_kind > 0) c = b.input("c", dt, cs[static_cast<size_t>(c_kind)]);
      b.output(b.gemm(x, y, c, ta, tb, alpha, beta));
    }, *rc::gen::arbitrary<uint64_t>(), tol, tol);
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/matmul/other_dtypes") {
  if (skip_without_jit()) return;
  for (DType dt : {DType::kF16, DType::kBf16, DType::kI32, DType::kI8, DType::kU8, DType::kI64}) {
    CAPTURE(ir::dtype_name(dt));
    double rtol = dt == DType::kF16 ? 2e-3 : dt == DType::kBf16 ? 1.6e-2 : 0;
    double atol = rtol == 0 ? 0 : 1e-3;
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("a", dt, {2, 7, 33});
      auto y = b.input("b", dt, {33, 18});
      b.output(b.matmul(x, y));
    }, 5, rtol, atol, -4, 4);
    CHECK_MESSAGE(r.empty(), r);
    if (ir::is_integer(dt)) {
      for (auto [alpha, beta] : std::vector<std::pair<double, double>>{{1, 1}, {2, 0.5}}) {
        std::string g = check([&](GraphBuilder& b) {
          auto x = b.input("a", dt, {9, 12});
          auto y = b.input("b", dt, {9, 7});
          auto c = b.input("c", dt, {7});
          b.output(b.gemm(x, y, c, true, false, alpha, beta));
        }, 6, 0, 0, -4, 4);
        CHECK_MESSAGE(g.empty(), g);
      }
    }
  }
}

// matmul + bias + relu: fused (one kernel with an epilogue) and unfused give the same
// bits, and match the reference.
TEST_CASE("jit/compute/matmul/fused_bias_relu_equals_unfused") {
  if (skip_without_jit()) return;
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{33, 70, 45}, {64, 600, 96}, {5, 9, 1}}) {
    CAPTURE(m);
    GraphBuilder b;
    auto x = b.input("x", DType::kF32, {m, k});
    auto w = b.input("w", DType::kF32, {k, n});
    auto bias = b.input("bias", DType::kF32, {n});
    b.output(b.relu(b.add(b.matmul(x, w), bias)));
    auto g = b.build();
    REQUIRE(g.ok());
    auto in = random_inputs(*g, 21);
    JitRunOptions fused, unfused;
    unfused.fusion.fuse = false;
    std::vector<CompiledKernel> kf, ku;
    auto rf = run_jit(*shared_jit(), *g, in, nullptr, fused, &kf);
    auto ru = run_jit(*shared_jit(), *g, in, nullptr, unfused, &ku);
    REQUIRE(rf.ok());
    REQUIRE(ru.ok());
    CHECK(kf.size() == 1);
    CHECK(ku.size() == 3);
    CHECK(compare((*rf)[0], (*ru)[0]) == "");
    std::string r = jit_vs_reference(*g, in, dot_tol(k), dot_tol(k));
    CHECK_MESSAGE(r.empty(), r);
  }
}

// A fused epilogue that changes the dtype (cast to f16) with K > the K block: the
// kernel must not keep partial sums in the output, so it packs all of K at once (or,
// for a very long K, falls back to the simple loop).
TEST_CASE("jit/compute/matmul/long_k_with_cast_epilogue") {
  if (skip_without_jit()) return;
  for (int64_t k : {600, 3000}) {
    CAPTURE(k);
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("x", DType::kF32, {19, k});
      auto w = b.input("w", DType::kF32, {k, 40});
      b.output(b.cast(b.matmul(x, w), DType::kF16));
    }, 8, 2e-3, 1e-3);
    CHECK_MESSAGE(r.empty(), r);
  }
}

// Running tile ranges [0, k) then [k, n) equals one call over [0, n), for the natural
// tile count and for other num_tiles (the kernel accepts any).
TEST_CASE("jit/compute/matmul/gemv_rows") {
  // m <= kGemvMaxRows: the m-row GEMV kernel (B streamed when row-major, else packed per
  // run), over strip tails (n not a multiple of the vector width), several column tiles
  // and K blocks, batched A, gemm flags; and its tile ranges write the whole run's bytes.
  if (skip_without_jit()) return;
  for (int64_t m = 1; m <= tiling::kGemvMaxRows; ++m) {
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {17, 33}, {300, 129}, {700, 600}}) {
      CAPTURE(m);
      CAPTURE(k);
      CAPTURE(n);
      std::string r = check_matmul(m, k, n, DType::kF32, static_cast<uint64_t>(m * 31 + k * 7 + n));
      CHECK_MESSAGE(r.empty(), r);
      for (bool tb : {false, true}) {
        CAPTURE(tb);
        r = check([&](GraphBuilder& b) {
          auto x = b.input("a", DType::kF32, {m, k});
          auto y = b.input("b", DType::kF32, tb ? ir::Shape{n, k} : ir::Shape{k, n});
          b.output(b.relu(b.gemm(x, y, b.input("c", DType::kF32, {n}), false, tb, -0.5, 2.0)));
        }, static_cast<uint64_t>(m + k + n), 2 * dot_tol(k), 2 * dot_tol(k));
        CHECK_MESSAGE(r.empty(), r);
      }
    }
  }
  std::string r = check([&](GraphBuilder& b) {  // batched A, broadcast B: m 2 per GEMM
    b.output(b.matmul(b.input("a", DType::kF64, {3, 2, 40}), b.input("b", DType::kF64, {40, 50})));
  }, 5, 1e-12, 1e-12);
  CHECK_MESSAGE(r.empty(), r);

  GraphBuilder b;
  b.output(b.matmul(b.input("a", DType::kF32, {3, 300}), b.input("b", DType::kF32, {300, 1000})));
  auto g = b.build();
  REQUIRE(g.ok());
  auto in = random_inputs(*g, 6);
  const ir::NodeId node = g->nodes.back().id;
  const int64_t natural = compute_op_tiles(*g, g->node(node));
  CHECK(natural == 4);  // column tiles of 256
  auto whole = run_node_tiles(*g, node, in, natural, {{0, natural}});
  REQUIRE(whole.ok());
  for (int64_t split : {int64_t{1}, int64_t{3}}) {
    auto parts = run_node_tiles(*g, node, in, natural, {{0, split}, {split, natural}});
    REQUIRE(parts.ok());
    CHECK(compare(*parts, *whole) == "");
  }
}

TEST_CASE("jit/compute/tiles/pack_gemv_b_layout") {
  // Strips: wide from column 0, then vec-lane strips, then single columns; the strip at
  // column c of width w holds (k, j) at c * K + k * w + (j - c). trans_b reads B^T (in
  // tiles of 64 k: K = 130 ends in a short one).
  const tiling::GemvStrips s{8, 4};
  for (const int64_t K : {3, 130}) {
    CAPTURE(K);
    const int64_t N = 15;  // wide [0, 8), vec [8, 12), single 12, 13, 14
    std::vector<int32_t> b(K * N), bt(K * N), p(K * N), pt(K * N);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) b[k * N + j] = bt[j * K + k] = static_cast<int32_t>(100 * k + j);
    tiling::pack_gemv_b(b.data(), p.data(), K, N, false, 4, s);
    tiling::pack_gemv_b(bt.data(), pt.data(), K, N, true, 4, s);
    CHECK(p == pt);
    std::vector<int32_t> in_place = bt;
    tiling::pack_transposed_gemv_b_in_place(in_place.data(), K, N, 4, s);
    CHECK(in_place == p);
    auto at = [&](int64_t k, int64_t j) {
      int64_t c = j < 8 ? 0 : j < 12 ? 8 : j, w = j < 8 ? 8 : j < 12 ? 4 : 1;
      return p[c * K + k * w + (j - c)];
    };
    int64_t wrong = 0;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) wrong += at(k, j) != 100 * k + j;
    CHECK(wrong == 0);
  }
  CHECK(tiling::gemv_strips(1, DType::kF32, 16).wide == 128);
  CHECK(tiling::gemv_strips(4, DType::kF64, 16).vec == 8);
  for (int64_t m = 1; m <= tiling::kGemvMaxRows; ++m)
    for (int w : {4, 8, 16}) CHECK(256 % tiling::gemv_strips(m, DType::kF32, w).wide == 0);
}

TEST_CASE("jit/compute/matmul/tile_ranges") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  auto x = b.input("a", DType::kF32, {2, 300, 130});
  auto y = b.input("b", DType::kF32, {130, 520});
  b.output(b.matmul(x, y));
  auto g = b.build();
  REQUIRE(g.ok());
  auto in = random_inputs(*g, 4);
  const ir::NodeId node = g->nodes.back().id;
  const int64_t natural = compute_op_tiles(*g, g->node(node));
  CHECK(natural > 2);
  auto whole = run_node_tiles(*g, node, in, natural, {{0, natural}});
  REQUIRE(whole.ok());
  auto ref = run_reference(*g, in);
  REQUIRE(ref.ok());
  CHECK(compare(*whole, (*ref)[0], dot_tol(130), dot_tol(130)) == "");
  for (int64_t tiles : {natural, int64_t{1}, int64_t{3}, natural * 5}) {
    for (int64_t split : {int64_t{1}, tiles / 2, tiles - 1}) {
      CAPTURE(tiles);
      CAPTURE(split);
      auto parts = run_node_tiles(*g, node, in, tiles, {{0, split}, {split, tiles}});
      REQUIRE(parts.ok());
      CHECK(compare(*parts, *whole) == "");
    }
  }
  // Without scratch the panel is packed on the stack in shorter K blocks: same result
  // within the dot-product tolerance (the K summation is split differently).
  auto stack = run_node_tiles(*g, node, in, natural, {{0, natural}}, /*drop_scratch=*/true);
  REQUIRE(stack.ok());
  CHECK(compare(*stack, (*ref)[0], dot_tol(130), dot_tol(130)) == "");
}

TEST_CASE("jit/compute/tiles/rules_and_registration") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  auto x = b.input("a", DType::kF32, {1024, 1024});
  auto y = b.input("b", DType::kF32, {1024, 1024});
  auto mm = b.matmul(x, y);
  auto img = b.input("img", DType::kF32, {2, 8, 16, 16});
  auto w = b.input("w", DType::kF32, {8, 1, 3, 3});
  ir::Conv2dOptions dw;
  dw.groups = 8;
  auto cv = b.conv2d(img, w, std::nullopt, dw);
  auto sm = b.softmax(b.input("s", DType::kF32, {4096, 100}));
  b.output(mm);
  b.output(cv);
  b.output(sm);
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  REQUIRE(order.ok());
  auto groups = form_kernel_groups(*g, *order);
  REQUIRE(groups.ok());
  for (const KernelGroup& grp : *groups) {
    const ir::Node& anchor = g->node(grp.nodes.front());
    CAPTURE(anchor.name);
    CHECK(is_compute_op(anchor.op));
    // The fusion pass tiles compute groups by the compute emitters' rules.
    CHECK(grp.num_tiles == compute_op_tiles(*g, anchor));
    CHECK(grp.num_tiles >= 1);
  }
  const ir::Node& mm_node = g->node(g->value(mm).producer);
  CHECK(compute_op_tiles(*g, mm_node) == tiling::matmul_tiles(*g, mm_node).tiles());
  CHECK(compute_op_scratch_bytes(*g, mm_node) > 0);
  const ir::Node& cv_node = g->node(g->value(cv).producer);
  CHECK(tiling::unit_tiles_for(*g, cv_node).units == 16);  // 2 images x 8 planes
  CHECK(compute_op_tiles(*g, cv_node) == tiling::unit_tiles_for(*g, cv_node).tiles());
  CHECK(compute_op_scratch_bytes(*g, cv_node) == 0);
}

}  // namespace
}  // namespace carve::jit::computetest
