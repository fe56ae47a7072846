// JIT layout kernels vs the reference interpreter: transpose, concat, split, slice
// (negative steps included), pad, gather, gather_elements, views materialised as copies,
// handle state ops.
#include <doctest/doctest.h>

#include "engine_test_util.h"

namespace carve::jit::jittest {
namespace {

const std::vector<DType> kLayoutDtypes = {DType::kF32, DType::kF16, DType::kF64, DType::kI8, DType::kI64, DType::kBool};

// Builds a graph with `make`, runs it through the JIT (tiled into small tiles, run one by
// one in reverse) and the reference, and checks every output is bit-identical.
void check_graph(const std::function<void(ir::GraphBuilder&, DType)>& make, const std::vector<Shape>& input_shapes,
                 const std::string& label, DType idx_dtype = DType::kI64, int64_t idx_bound = 0) {
  if (skip_without_jit()) return;
  for (DType d : kLayoutDtypes) {
    ir::GraphBuilder b;
    make(b, d);
    auto g = b.build();
    REQUIRE_MESSAGE(g.ok(), std::string(label + ": " + g.status().to_string()));
    bool ok = rc_check(label + " " + std::string(ir::dtype_name(d)), 3, [&] {
      std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
      std::vector<HostTensor> in;
      for (const ir::Value& v : g->values) {
        if (v.kind != ir::ValueKind::kInput) continue;
        if (v.type.dtype == idx_dtype && v.name == "idx") {
          std::vector<double> iv(static_cast<size_t>(*v.type.shape.num_elements()));
          for (double& x : iv) x = static_cast<double>(static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * idx_bound)) - idx_bound);
          in.push_back(HostTensor::from_doubles(idx_dtype, v.type.shape, iv));
        } else {
          in.push_back(random_tensor(rng, v.type.dtype, v.type.shape));
        }
      }
      auto expected = run_reference(*g, in);
      if (!expected.ok()) RC_FAIL(expected.status().to_string());
      for (int variant = 0; variant < 2; ++variant) {
        JitRunOptions opt;
        if (variant == 1) {
          opt.fusion.elements_per_tile = 5;
          opt.tile_by_tile = true;
        }
        auto actual = run_jit(*shared_jit(), *g, in, nullptr, opt);
        if (!actual.ok()) RC_FAIL(actual.status().to_string());
        for (size_t i = 0; i < expected->size(); ++i) {
          std::string diff = compare((*actual)[i], (*expected)[i]);
          if (!diff.empty()) RC_FAIL(label + " output " + std::to_string(i) + ": " + diff);
          if ((*actual)[i].bytes != (*expected)[i].bytes && ir::is_integer(d)) RC_FAIL("bytes differ");
        }
      }
    });
    CHECK_MESSAGE(ok, label);
  }
}

}  // namespace

TEST_CASE("jit/layout/transpose") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {3, 4, 5});
    b.output(b.transpose(x, {2, 0, 1}));
    b.output(b.transpose(x, {1, 0, 2}));
    b.output(b.transpose(b.input("y", d, {7, 33}), {1, 0}));
    // NCHW <-> NHWC with two images, and a 2-D transpose, both last dims over 16.
    auto nchw = b.input("nchw", d, {2, 20, 3, 17});
    b.output(b.transpose(nchw, {0, 2, 3, 1}));
    b.output(b.transpose(b.transpose(nchw, {0, 2, 3, 1}), {0, 3, 1, 2}));
    b.output(b.transpose(b.input("z", d, {40, 33}), {1, 0}));
  }, {}, "transpose");
}

TEST_CASE("jit/layout/concat") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {2, 3, 4});
    auto y = b.input("y", d, {2, 1, 4});
    auto z = b.input("z", d, {2, 5, 4});
    b.output(b.concat({x, y, z}, 1));
    b.output(b.concat({x, x}, -1));
    b.output(b.concat({x, x}, 0));
  }, {}, "concat");
}

TEST_CASE("jit/layout/split") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {4, 9, 3});
    for (auto v : b.split(x, 1, {2, 0, 7})) b.output(v);
    for (auto v : b.split(x, -1, {1, 2})) b.output(v);
  }, {}, "split");
}

TEST_CASE("jit/layout/slice with positive and negative steps") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {6, 7, 5});
    b.output(b.slice(x, {1, 0}, {5, 7}, {0, 1}, {2, 3}));
    b.output(b.slice(x, {-1, 6}, {-100, 0}, {0, 1}, {-1, -2}));
    b.output(b.slice(x, {4}, {100}, {2}, {1}));
    b.output(b.slice(x, {2}, {2}, {0}, {1}));  // empty
    b.output(b.slice(x, {3}, {-9}, {1}, {-4}));
  }, {}, "slice");
}

TEST_CASE("jit/layout/pad") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {3, 4});
    b.output(b.pad(x, {1, 2, 0, 3}, 1.5));
    b.output(b.pad(x, {0, 0, 2, 0}));
    auto e = b.input("e", d, {0, 3});
    b.output(b.pad(e, {1, 1, 1, 1}, -2.0));
  }, {}, "pad");
}

TEST_CASE("jit/layout/gather with negative indices") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {5, 4, 3});
    auto idx = b.input("idx", DType::kI64, {2, 3});
    b.output(b.gather(x, idx, 1));
    b.output(b.gather(x, idx, -1));
  }, {}, "gather i64", DType::kI64, 3);
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {6, 2});
    auto idx = b.input("idx", DType::kI32, {7});
    b.output(b.gather(x, idx, 0));
  }, {}, "gather i32", DType::kI32, 6);
}

TEST_CASE("jit/layout/gather out of range writes zeros") {
  if (skip_without_jit()) return;
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {3, 2});
  auto idx = b.input("idx", DType::kI64, {3});
  b.output(b.gather(x, idx, 0));
  auto g = b.build();
  REQUIRE(g.ok());
  auto out = run_jit(*shared_jit(), *g, {HostTensor::from<float>(Shape{3, 2}, {1, 2, 3, 4, 5, 6}),
                                         HostTensor::from<int64_t>(Shape{3}, {2, 3, -4})});
  REQUIRE(out.ok());
  CHECK((*out)[0].as<float>() == std::vector<float>{5, 6, 0, 0, 0, 0});
}

TEST_CASE("jit/layout/gather_elements with negative indices") {
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {5, 4, 3});
    auto idx = b.input("idx", DType::kI64, {3, 4, 7});  // smaller than x off the axis
    b.output(b.gather_elements(x, idx, -1));
    b.output(b.gather_elements(x, idx, 2));
  }, {}, "gather_elements i64 last axis", DType::kI64, 3);
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {5, 4, 3});
    auto idx = b.input("idx", DType::kI32, {9, 2, 3});
    b.output(b.gather_elements(x, idx, 0));
  }, {}, "gather_elements i32 axis 0", DType::kI32, 5);
  check_graph([](ir::GraphBuilder& b, DType d) {
    auto x = b.input("x", d, {6});
    auto idx = b.input("idx", DType::kI64, {11});
    b.output(b.gather_elements(x, idx, 0));
  }, {}, "gather_elements rank 1", DType::kI64, 6);
}

TEST_CASE("jit/layout/gather_elements out of range writes zeros") {
  if (skip_without_jit()) return;
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 3});
  auto idx = b.input("idx", DType::kI64, {2, 2});
  b.output(b.gather_elements(x, idx, 1));
  b.output(b.gather_elements(x, idx, 0));
  auto g = b.build();
  REQUIRE(g.ok());
  auto out = run_jit(*shared_jit(), *g, {HostTensor::from<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6}),
                                         HostTensor::from<int64_t>(Shape{2, 2}, {-1, 3, INT64_MIN, 1})});
  REQUIRE(out.ok());
  CHECK((*out)[0].as<float>() == std::vector<float>{3, 0, 0, 5});
  CHECK((*out)[1].as<float>() == std::vector<float>{4, 0, 0, 5});
}

TEST_CASE("jit/layout/views as copies and layout after views") {
  if (skip_without_jit()) return;
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 3, 4});
  auto r = b.reshape(x, {6, 4});
  b.output(b.transpose(r, {1, 0}));
  auto g = b.build();
  REQUIRE(g.ok());
  std::mt19937_64 rng(1);
  std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, {2, 3, 4})};
  auto out = run_jit(*shared_jit(), *g, in);
  auto ref = run_reference(*g, in);
  REQUIRE(out.ok());
  REQUIRE(ref.ok());
  CHECK(compare((*out)[0], (*ref)[0]) == "");
  // a view node compiled on request (e.g. a graph output view) is a copy kernel
  for (ir::NodeId id = 0; id < g->num_nodes(); ++id) {
    if (!ir::is_view(g->node(id).op)) continue;
    auto group = make_single_node_group(*g, id);
    REQUIRE(group.ok());
    auto k = shared_jit()->compile_group(*g, *group);
    REQUIRE_MESSAGE(k.ok(), k.status().to_string());
    std::vector<float> src = in[0].as<float>(), dst(src.size(), -1.0f);
    void* ops[] = {src.data(), dst.data()};
    k->fn(ops, 0, group->num_tiles);
    CHECK(std::memcmp(dst.data(), src.data(), src.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("jit/layout/read_handle write_handle write_handle_at") {
  if (skip_without_jit()) return;
  ir::GraphBuilder b;
  b.handle("kv", DType::kF32, {2, 6, 3});
  b.handle("state", DType::kF32, {4});
  auto v = b.input("v", DType::kF32, {2, 2, 3});
  auto pos = b.input("pos", DType::kI64, {});
  auto s = b.input("s", DType::kF32, {4});
  auto old = b.read_handle("state");
  b.output(b.add(old, s));
  b.write_handle("state", s);
  b.write_handle_at("kv", v, pos, 1);
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  std::mt19937_64 rng(2);
  for (int64_t p : {0, 3, 4}) {
    std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, {2, 2, 3}), HostTensor::scalar<int64_t>(p),
                                  random_tensor(rng, DType::kF32, {4})};
    ReferenceHandles h1, h2;
    h1["state"] = random_tensor(rng, DType::kF32, {4});
    h1["kv"] = random_tensor(rng, DType::kF32, {2, 6, 3});
    h2 = h1;
    auto ref = run_reference(*g, in, &h1);
    REQUIRE_MESSAGE(ref.ok(), ref.status().to_string());
    auto out = run_jit(*shared_jit(), *g, in, &h2);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK(compare((*out)[0], (*ref)[0]) == "");
    CHECK(h2["state"].bytes == h1["state"].bytes);
    CHECK(h2["kv"].bytes == h1["kv"].bytes);
  }
  // pos beyond the end is clamped (the reference rejects it): writes at 6 - 2 = 4
  std::vector<HostTensor> in = {random_tensor(rng, DType::kF32, {2, 2, 3}), HostTensor::scalar<int64_t>(1000),
                                random_tensor(rng, DType::kF32, {4})};
  ReferenceHandles h;
  auto out = run_jit(*shared_jit(), *g, in, &h);
  REQUIRE(out.ok());
  std::vector<float> kv = h["kv"].as<float>(), v0 = in[0].as<float>();
  CHECK(kv[(0 * 6 + 4) * 3 + 0] == v0[0]);
  CHECK(kv[(1 * 6 + 5) * 3 + 2] == v0[(1 * 2 + 1) * 3 + 2]);
}

}  // namespace carve::jit::jittest
