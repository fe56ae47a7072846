// JIT max_pool / avg_pool / global_avg_pool kernels against the reference interpreter.
// Tolerance: max pooling exact; average pooling rel/abs 1e-6 (f32 sum of <= 25 values in
// [-1, 1], one division); f64 1e-12; f16 rel 2e-3.
#include "compute_test_util.h"

namespace carve::jit::computetest {
namespace {

struct PoolCase {
  ir::Shape x;
  ir::PoolOptions opt;
  bool is_max = true;
  DType dtype = DType::kF32;
};

bool fits(const PoolCase& p) {
  for (int i = 0; i < 2; ++i) {
    auto u = static_cast<size_t>(i);
    if (p.x[2 + i] + p.opt.pads[u] + p.opt.pads[u + 2] < p.opt.kernel[u]) return false;
    if (p.opt.pads[u] >= p.opt.kernel[u] || p.opt.pads[u + 2] >= p.opt.kernel[u]) return false;
  }
  return true;
}

std::string check_pool(const PoolCase& p, uint64_t seed) {
  double tol = p.is_max ? 0 : p.dtype == DType::kF64 ? 1e-12 : p.dtype == DType::kF16 ? 2e-3 : 1e-6;
  return check([&](GraphBuilder& b) {
    auto x = b.input("x", p.dtype, p.x);
    b.output(p.is_max ? b.max_pool(x, p.opt) : b.avg_pool(x, p.opt));
  }, seed, tol, tol);
}

PoolCase random_pool(bool is_max) {
  PoolCase p;
  p.is_max = is_max;
  p.x = ir::Shape{*rc::gen::inRange<int64_t>(1, 3), *rc::gen::inRange<int64_t>(1, 5),
                  *rc::gen::inRange<int64_t>(1, 20), *rc::gen::inRange<int64_t>(1, 60)};
  p.opt.kernel = {*rc::gen::inRange<int64_t>(1, 5), *rc::gen::inRange<int64_t>(1, 5)};
  p.opt.strides = {*rc::gen::inRange<int64_t>(1, 4), *rc::gen::inRange<int64_t>(1, 4)};
  for (size_t i = 0; i < 4; ++i) p.opt.pads[i] = *rc::gen::inRange<int64_t>(0, p.opt.kernel[i % 2]);
  p.opt.ceil_mode = *rc::gen::arbitrary<bool>();
  p.opt.count_include_pad = !is_max && *rc::gen::arbitrary<bool>();
  p.dtype = *rc::gen::element(DType::kF32, DType::kF32, DType::kF64);
  return p;
}

TEST_CASE("jit/compute/pool/max_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("max_pool kernel strides pads ceil_mode", 25, [] {
    PoolCase p = random_pool(true);
    RC_PRE(fits(p));
    RC_ASSERT(check_pool(p, *rc::gen::arbitrary<uint64_t>()) == std::string());
  }));
}

TEST_CASE("jit/compute/pool/avg_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("avg_pool kernel strides pads ceil_mode count_include_pad", 25, [] {
    PoolCase p = random_pool(false);
    RC_PRE(fits(p));
    RC_ASSERT(check_pool(p, *rc::gen::arbitrary<uint64_t>()) == std::string());
  }));
}

TEST_CASE("jit/compute/pool/ceil_mode_cases") {
  if (skip_without_jit()) return;
  // 3x3/2 with ceil_mode over 6 and 7 columns (the last window starts inside the padding
  // or not), avg with and without count_include_pad.
  for (int64_t w : {6, 7, 35}) {
    for (int mode = 0; mode < 3; ++mode) {
      CAPTURE(w);
      CAPTURE(mode);
      PoolCase p;
      p.x = ir::Shape{1, 2, w, w};
      p.opt.kernel = {3, 3};
      p.opt.strides = {2, 2};
      p.opt.pads = {1, 1, 1, 1};
      p.opt.ceil_mode = true;
      p.is_max = mode == 0;
      p.opt.count_include_pad = mode == 2;
      std::string r = check_pool(p, 17);
      CHECK_MESSAGE(r.empty(), r);
    }
  }
}

TEST_CASE("jit/compute/pool/narrow_planes") {
  if (skip_without_jit()) return;
  // Rows narrower than two vectors run as masked vector blocks (border columns too): the
  // inception/googlenet shapes (3x3/1 pad 1 on 7, 14, 28 columns), 3x3/2 with ceil_mode,
  // a one-column plane and a wide left pad.
  struct Form { int64_t k, s, p; bool ceil; };
  for (int64_t w : {1, 3, 7, 14, 17, 28}) {
    for (Form f : {Form{3, 1, 1, false}, Form{3, 2, 1, true}, Form{5, 1, 4, false}}) {
      for (int mode = 0; mode < 3; ++mode) {
        for (DType dt : {DType::kF32, DType::kF64}) {
          PoolCase p;
          p.x = ir::Shape{1, 3, 5, w};
          p.opt.kernel = {3, f.k};
          p.opt.strides = {1, f.s};
          p.opt.pads = {1, f.p, 1, f.p};
          p.opt.ceil_mode = f.ceil;
          p.is_max = mode == 0;
          p.opt.count_include_pad = mode == 2;
          p.dtype = dt;
          if (!fits(p)) continue;
          CAPTURE(w);
          CAPTURE(f.k);
          CAPTURE(mode);
          CAPTURE(ir::dtype_name(dt));
          std::string r = check_pool(p, 5);
          CHECK_MESSAGE(r.empty(), r);
        }
      }
    }
  }
}

TEST_CASE("jit/compute/pool/other_dtypes") {
  if (skip_without_jit()) return;
  for (DType dt : {DType::kI8, DType::kU8, DType::kI32, DType::kF16, DType::kBf16}) {
    CAPTURE(ir::dtype_name(dt));
    PoolCase p;
    p.x = ir::Shape{2, 3, 9, 40};
    p.opt.kernel = {2, 3};
    p.opt.strides = {2, 1};
    p.opt.pads = {1, 1, 0, 2};
    p.dtype = dt;
    std::string r = check([&](GraphBuilder& b) { b.output(b.max_pool(b.input("x", dt, p.x), p.opt)); }, 3, 0, 0, -50, 50);
    CHECK_MESSAGE(r.empty(), r);
    if (ir::is_float(dt)) {
      double tol = dt == DType::kF16 ? 2e-3 : 1.6e-2;
      r = check([&](GraphBuilder& b) { b.output(b.avg_pool(b.input("x", dt, p.x), p.opt)); }, 3, tol, tol);
      CHECK_MESSAGE(r.empty(), r);
    }
  }
}

TEST_CASE("jit/compute/pool/global_avg_pool") {
  if (skip_without_jit()) return;
  const std::vector<ir::Shape> shapes = {{1, 1, 1}, {2, 3, 7}, {2, 5, 9, 13}, {1, 64, 7, 7}, {2, 2, 3, 4, 5}};
  for (const ir::Shape& s : shapes) {
    for (DType dt : {DType::kF32, DType::kF64, DType::kF16}) {
      CAPTURE(s.to_string());
      CAPTURE(ir::dtype_name(dt));
      double tol = dt == DType::kF64 ? 1e-12 : dt == DType::kF16 ? 2e-3 : 1e-6;
      std::string r = check([&](GraphBuilder& b) { b.output(b.global_avg_pool(b.input("x", dt, s))); }, 8, tol, tol);
      CHECK_MESSAGE(r.empty(), r);
    }
  }
}

TEST_CASE("jit/compute/pool/tile_ranges") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  ir::PoolOptions opt;
  opt.kernel = {3, 3};
  opt.strides = {1, 1};
  opt.pads = {1, 1, 1, 1};
  b.output(b.max_pool(b.input("x", DType::kF32, {3, 7, 30, 41}), opt));
  auto g = b.build();
  REQUIRE(g.ok());
  auto in = random_inputs(*g, 2);
  const ir::NodeId node = g->nodes.back().id;
  auto whole = run_node_tiles(*g, node, in, 1, {{0, 1}});
  REQUIRE(whole.ok());
  for (int64_t tiles : {compute_op_tiles(*g, g->node(node)), int64_t{4}, int64_t{21}, int64_t{50}}) {
    CAPTURE(tiles);
    auto parts = run_node_tiles(*g, node, in, tiles, {{0, 1}, {1, tiles / 2}, {tiles / 2, tiles}});
    REQUIRE(parts.ok());
    CHECK(compare(*parts, *whole) == "");
  }
}

}  // namespace
}  // namespace carve::jit::computetest
