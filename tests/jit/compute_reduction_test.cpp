// JIT reduce_sum/mean/max, arg_max/min, softmax, layer_norm, batch_norm against the
// reference.
// Tolerance (inputs in [-1, 1] unless noted): sums/means rel+abs 2e-6*sqrt(n) + 1e-6 (f32
// accumulation of n terms, n = reduced count); max 1e-30 (exact up to the sign of zero:
// the vector order can pick the other zero of a +0/-0 tie); softmax rel 1e-5 (exp
// polynomial ~2 ulp + the sum); layer_norm/batch_norm rel+abs 2e-5; f64 1e-11; f16 rel
// 3e-3; integers exact (wrap-around); arg_max/min indices exact.
#include "compute_test_util.h"

namespace carve::jit::computetest {
namespace {

TEST_CASE("jit/compute/reduce/random_axes_property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("reduce_sum mean max over random axes, keepdims", 50, [] {
    int rank = *rc::gen::inRange(1, 5);
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (auto& d : dims) d = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 7), rc::gen::just<int64_t>(37));
    std::vector<int64_t> axes;
    for (int i = 0; i < rank; ++i) {
      if (*rc::gen::inRange(0, 2) == 1) axes.push_back(*rc::gen::arbitrary<bool>() ? i : i - rank);
    }
    bool keep = *rc::gen::arbitrary<bool>();
    OpKind op = *rc::gen::element(OpKind::kReduceSum, OpKind::kReduceMean, OpKind::kReduceMax);
    DType dt = *rc::gen::element(DType::kF32, DType::kF32, DType::kF64);
    int64_t n = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      bool red = axes.empty();
      for (int64_t a : axes) red = red || a == static_cast<int64_t>(i) || a + rank == static_cast<int64_t>(i);
      if (red) n *= dims[i];
    }
    double tol = op == OpKind::kReduceMax ? 1e-30 : dt == DType::kF64 ? 1e-11 : dot_tol(n);
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("x", dt, ir::Shape(dims));
      ValueId y = op == OpKind::kReduceSum    ? b.reduce_sum(x, axes, keep)
                  : op == OpKind::kReduceMean ? b.reduce_mean(x, axes, keep)
                                              : b.reduce_max(x, axes, keep);
      b.output(y);
    }, *rc::gen::arbitrary<uint64_t>(), tol, tol);
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/reduce/dtypes_and_empty") {
  if (skip_without_jit()) return;
  for (DType dt : {DType::kI32, DType::kI8, DType::kU8, DType::kI64, DType::kF16, DType::kBf16}) {
    for (OpKind op : {OpKind::kReduceSum, OpKind::kReduceMax}) {
      for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, std::vector<int64_t>{2}, std::vector<int64_t>{0, 2}}) {
        CAPTURE(ir::dtype_name(dt));
        CAPTURE(ir::op_name(op));
        CAPTURE(axes.size());
        double tol = dt == DType::kF16 ? 3e-3 : dt == DType::kBf16 ? 2e-2 : 0;
        std::string r = check([&](GraphBuilder& b) {
          auto x = b.input("x", dt, {3, 45, 20});
          b.output(op == OpKind::kReduceSum ? b.reduce_sum(x, axes, false) : b.reduce_max(x, axes, true));
        }, 12, tol, tol, -100, 100);
        CHECK_MESSAGE(r.empty(), r);
      }
    }
  }
  // Reducing an empty axis: sum 0, max -inf, mean NaN.
  for (OpKind op : {OpKind::kReduceSum, OpKind::kReduceMax, OpKind::kReduceMean}) {
    CAPTURE(ir::op_name(op));
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("x", DType::kF32, {3, 0, 2});
      b.output(op == OpKind::kReduceSum ? b.reduce_sum(x, {1}) : op == OpKind::kReduceMax ? b.reduce_max(x, {1}) : b.reduce_mean(x, {1}));
    }, 1, 0, 0);
    CHECK_MESSAGE(r.empty(), r);
  }
}

// reduce_prod: floats in [0.5, 2] (products stay normal; f32 accumulates 45 rounding
// errors: rel 1e-5), integers wrap exactly; the 16-bit and unsigned dtypes with sum and max too.
TEST_CASE("jit/compute/reduce/prod and the 16-bit and unsigned dtypes") {
  if (skip_without_jit()) return;
  for (DType dt : {DType::kF32, DType::kF64, DType::kF16, DType::kI32, DType::kI64, DType::kU8, DType::kI16,
                   DType::kU16, DType::kU32, DType::kU64}) {
    std::vector<OpKind> ops = {OpKind::kReduceProd};
    if (!ir::is_float(dt)) ops = {OpKind::kReduceProd, OpKind::kReduceSum, OpKind::kReduceMax};
    for (OpKind op : ops) {
      for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, std::vector<int64_t>{2}, std::vector<int64_t>{0, 2},
                                        std::vector<int64_t>{}}) {
        CAPTURE(ir::dtype_name(dt));
        CAPTURE(ir::op_name(op));
        CAPTURE(axes.size());
        const double tol = dt == DType::kF16 ? 3e-3 : dt == DType::kF32 ? 1e-5 : dt == DType::kF64 ? 1e-12 : 0;
        const bool fp = ir::is_float(dt);
        std::string r = check([&](GraphBuilder& b) {
          auto x = b.input("x", dt, {3, 45, 20});
          ir::Attrs attrs{{"keepdims", int64_t{axes.size() == 1}}};
          if (!axes.empty()) attrs["axes"] = axes;
          b.output(b.op1(op, {x}, attrs));
        }, 21, tol, fp ? 1e-300 : 0, fp ? 0.5 : 0, fp ? 2 : 200);
        CHECK_MESSAGE(r.empty(), r);
      }
    }
  }
}

// arg_max/arg_min: values from a small set (ties everywhere, NaN in floats), exact indices.
TEST_CASE("jit/compute/arg_max_min/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("arg_max/arg_min random shape, axis, keepdims, select_last_index, ties, NaN", 60, [] {
    int rank = *rc::gen::inRange(1, 4);
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (auto& d : dims) d = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 6), rc::gen::just<int64_t>(19));
    const int64_t axis = *rc::gen::inRange<int64_t>(-rank, rank);
    const bool keep = *rc::gen::arbitrary<bool>(), last = *rc::gen::arbitrary<bool>();
    const OpKind op = *rc::gen::element(OpKind::kArgMax, OpKind::kArgMin);
    const DType dt = *rc::gen::element(DType::kF32, DType::kF64, DType::kF16, DType::kBf16, DType::kI8, DType::kU8,
                                       DType::kI32, DType::kI64);
    GraphBuilder b;
    auto x = b.input("x", dt, ir::Shape(dims));
    b.output(op == OpKind::kArgMax ? b.arg_max(x, axis, keep, last) : b.arg_min(x, axis, keep, last));
    auto g = b.build();
    RC_ASSERT(g.ok());
    const std::vector<double> pool = ir::is_float(dt) ? std::vector<double>{-1.5, 0, 2, 2, NAN, -0.0}
                                                      : std::vector<double>{-3, 0, 1, 1, 100};
    std::vector<double> v(static_cast<size_t>(*ir::Shape(dims).num_elements()));
    for (double& e : v) e = pool[static_cast<size_t>(*rc::gen::inRange<size_t>(0, pool.size()))];
    std::string r = jit_vs_reference(*g, {HostTensor::from_doubles(dt, ir::Shape(dims), v)}, 0, 0);
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/arg_max_min/tiles cover every output once") {
  if (skip_without_jit()) return;
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {7, 9, 3});
  b.output(b.arg_min(x, 1, false, true));
  auto g = b.build();
  REQUIRE(g.ok());
  std::vector<HostTensor> in = random_inputs(*g, 5);
  auto ref = run_reference(*g, in);
  REQUIRE(ref.ok());
  // 21 outputs in 4 tiles, run as [3, 4) then [0, 3).
  auto got = run_node_tiles(*g, g->nodes.front().id, in, 4, {{3, 4}, {0, 3}});
  REQUIRE(got.ok());
  CHECK(got->as<int64_t>() == (*ref)[0].as<int64_t>());
}

TEST_CASE("jit/compute/softmax/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("softmax random shape and axis", 25, [] {
    int rank = *rc::gen::inRange(1, 4);
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (auto& d : dims) d = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 9), rc::gen::just<int64_t>(70));
    int64_t axis = *rc::gen::inRange<int64_t>(-rank, rank);
    DType dt = *rc::gen::element(DType::kF32, DType::kF32, DType::kF64, DType::kF16);
    double tol = dt == DType::kF64 ? 1e-11 : dt == DType::kF16 ? 3e-3 : 1e-5;
    std::string r = check([&](GraphBuilder& b) { b.output(b.softmax(b.input("x", dt, ir::Shape(dims)), axis)); },
                          *rc::gen::arbitrary<uint64_t>(), tol, 1e-7, -20, 20);
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/softmax/extreme_values") {
  if (skip_without_jit()) return;
  // Large magnitudes: max subtraction keeps exp finite; far-below-max entries give 0.
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {3, 40});
  b.output(b.softmax(x));
  auto g = b.build();
  REQUIRE(g.ok());
  std::vector<float> v(120);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i % 7) * 150.0 - 400.0 + (i / 40) * 1000.0);
  std::vector<HostTensor> in = {HostTensor::from<float>({3, 40}, v)};
  std::string r = jit_vs_reference(*g, in, 1e-5, 1e-30);
  CHECK_MESSAGE(r.empty(), r);
}

TEST_CASE("jit/compute/layer_norm/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("layer_norm random shape axis bias", 40, [] {
    int rank = *rc::gen::inRange(1, 4);
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (auto& d : dims) d = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 9), rc::gen::just<int64_t>(67));
    int64_t axis = *rc::gen::inRange<int64_t>(-rank, rank);
    int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    std::vector<int64_t> norm(dims.begin() + a, dims.end());
    bool bias = *rc::gen::arbitrary<bool>();
    DType dt = *rc::gen::element(DType::kF32, DType::kF32, DType::kF64, DType::kF16);
    double tol = dt == DType::kF64 ? 1e-11 : dt == DType::kF16 ? 3e-3 : 2e-5;
    std::string r = check([&](GraphBuilder& b) {
      auto x = b.input("x", dt, ir::Shape(dims));
      auto s = b.input("scale", dt, ir::Shape(norm));
      std::optional<ValueId> bv;
      if (bias) bv = b.input("bias", dt, ir::Shape(norm));
      b.output(b.layer_norm(x, s, bv, axis, 1e-5));
    }, *rc::gen::arbitrary<uint64_t>(), tol, tol);
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/batch_norm/property") {
  if (skip_without_jit()) return;
  CHECK(rc_check("batch_norm inference", 30, [] {
    int rank = *rc::gen::inRange(2, 5);
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (auto& d : dims) d = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 6), rc::gen::just<int64_t>(35));
    DType dt = *rc::gen::element(DType::kF32, DType::kF64, DType::kBf16);
    double tol = dt == DType::kF64 ? 1e-11 : dt == DType::kBf16 ? 2e-2 : 2e-5;
    GraphBuilder b;
    auto x = b.input("x", dt, ir::Shape(dims));
    ir::Shape ch{dims[1]};
    auto y = b.batch_norm(x, b.input("scale", dt, ch), b.input("bias", dt, ch), b.input("mean", dt, ch),
                          b.input("var", dt, ch), 1e-3);
    b.output(y);
    auto g = b.build();
    RC_ASSERT(g.ok());
    auto in = random_inputs(*g, *rc::gen::arbitrary<uint64_t>());
    // var >= 0
    std::vector<double> var = in[4].to_doubles();
    for (double& v : var) v = std::fabs(v);
    in[4] = HostTensor::from_doubles(dt, ch, var);
    std::string r = jit_vs_reference(*g, in, tol, tol);
    RC_ASSERT(r == std::string());
  }));
}

TEST_CASE("jit/compute/reduce/tile_ranges") {
  if (skip_without_jit()) return;
  struct Case {
    const char* what;
    std::function<void(GraphBuilder&, ValueId)> op;
  };
  const std::vector<Case> cases = {
      {"sum inner", [](GraphBuilder& b, ValueId x) { b.output(b.reduce_sum(x, {2})); }},
      {"sum outer", [](GraphBuilder& b, ValueId x) { b.output(b.reduce_sum(x, {0, 1}, false)); }},
      {"softmax", [](GraphBuilder& b, ValueId x) { b.output(b.softmax(x, 1)); }},
      {"layer_norm", [](GraphBuilder& b, ValueId x) {
         b.output(b.layer_norm(x, b.input("s", DType::kF32, {600}), std::nullopt, -1));
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    GraphBuilder b;
    auto x = b.input("x", DType::kF32, {30, 20, 600});
    c.op(b, x);
    auto g = b.build();
    REQUIRE(g.ok());
    auto in = random_inputs(*g, 3);
    const ir::NodeId node = g->nodes.back().id;
    auto whole = run_node_tiles(*g, node, in, 1, {{0, 1}});
    REQUIRE(whole.ok());
    for (int64_t tiles : {compute_op_tiles(*g, g->node(node)), int64_t{7}, int64_t{1000}}) {
      CAPTURE(tiles);
      auto parts = run_node_tiles(*g, node, in, tiles, {{0, tiles / 3}, {tiles / 3, tiles}});
      REQUIRE(parts.ok());
      CHECK(compare(*parts, *whole) == "");
    }
  }
}

}  // namespace
}  // namespace carve::jit::computetest
