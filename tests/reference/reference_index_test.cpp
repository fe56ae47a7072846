// Reference interpreter: gather_nd, scatter_nd (reductions, duplicates, negative indices)
// and top_k, against values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "reference_test_util.h"

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

TEST_CASE("reference/gather_nd picks elements and slices") {
  const HostTensor data = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  // k = 3: elements; k = 1 with a negative index: [2, 2] slices.
  CHECK(run1(OpKind::kGatherNd, {data, i64({2, 3}, {0, 1, 1, 1, -1, 0})}).as<float>() == std::vector<float>{3, 6});
  HostTensor slices = run1(OpKind::kGatherNd, {data, i32({1, 1}, {-1})});
  CHECK(slices.type.shape == Shape{1, 2, 2});
  CHECK(slices.as<float>() == std::vector<float>{4, 5, 6, 7});
  // batch_dims 1: row b of the indices indexes data[b] (ONNX's example).
  HostTensor batched = run1(OpKind::kGatherNd, {data, i64({2, 1}, {1, 0})}, {{"batch_dims", 1}});
  CHECK(batched.type.shape == Shape{2, 2});
  CHECK(batched.as<float>() == std::vector<float>{2, 3, 4, 5});
  CHECK(run1(OpKind::kGatherNd, {data, i64({0, 2}, {})}).type.shape == Shape{0, 2});
}

TEST_CASE("reference/gather_nd and scatter_nd index out of range is kOutOfBounds naming the node") {
  for (int64_t bad : std::vector<int64_t>{2, -3, INT64_MAX, INT64_MIN}) {
    auto g = try_op(OpKind::kGatherNd, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({1, 2}, {bad, 0})});
    REQUIRE(!g.ok());
    CHECK(g.status().code() == ErrorCode::kOutOfBounds);
    CHECK(g.status().message().find("node 'n' (gather_nd)") != std::string::npos);
    CHECK(g.status().message().find(std::to_string(bad)) != std::string::npos);
    auto s = try_op(OpKind::kScatterNd, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2, 1}, {0, bad}), f32({2, 3}, {0, 0, 0, 0, 0, 0})},
                    {{"reduction", "add"}});
    REQUIRE(!s.ok());
    CHECK(s.status().code() == ErrorCode::kOutOfBounds);
    CHECK(s.status().message().find("node 'n' (scatter_nd)") != std::string::npos);
  }
}

TEST_CASE("reference/scatter_nd replaces and reduces in index order") {
  const HostTensor data = f32({4}, {1, 2, 3, 4});
  const HostTensor idx = i64({3, 1}, {2, -4, 2});  // 2 twice: the later update wins / both reduce
  const HostTensor upd = f32({3}, {10, 20, 30});
  CHECK(run1(OpKind::kScatterNd, {data, idx, upd}).as<float>() == std::vector<float>{20, 2, 30, 4});
  CHECK(run1(OpKind::kScatterNd, {data, idx, upd}, {{"reduction", "add"}}).as<float>() == std::vector<float>{21, 2, 43, 4});
  CHECK(run1(OpKind::kScatterNd, {data, idx, upd}, {{"reduction", "mul"}}).as<float>() == std::vector<float>{20, 2, 900, 4});
  CHECK(run1(OpKind::kScatterNd, {data, idx, f32({3}, {0, 20, 5})}, {{"reduction", "max"}}).as<float>() ==
        std::vector<float>{20, 2, 5, 4});
  CHECK(run1(OpKind::kScatterNd, {data, idx, f32({3}, {0, 20, 5})}, {{"reduction", "min"}}).as<float>() ==
        std::vector<float>{1, 2, 0, 4});
  // Slices: k = 1 of [3, 2] replaces rows; integers wrap.
  HostTensor rows = run1(OpKind::kScatterNd, {i8({3, 2}, {1, 2, 3, 4, 5, 6}), i32({1, 1}, {1}), i8({1, 2}, {127, -128})},
                         {{"reduction", "add"}});
  CHECK(rows.as<int8_t>() == std::vector<int8_t>{1, 2, -126, -124, 5, 6});
  // max/min propagate NaN (numpy's maximum); bool without a reduction copies.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor m = run1(OpKind::kScatterNd, {f64({2}, {1, nan}), i64({2, 1}, {0, 1}), f64({2}, {nan, 5})}, {{"reduction", "max"}});
  CHECK(std::isnan(m.as<double>()[0]));
  CHECK(std::isnan(m.as<double>()[1]));
  CHECK(run1(OpKind::kScatterNd, {boolean({3}, {false, false, true}), i64({1, 1}, {0}), boolean({1}, {true})}).as<bool>() ==
        std::vector<bool>{true, false, true});
}

TEST_CASE("reference/top_k sorts with ties by lower index and NaN last") {
  const HostTensor x = f32({2, 4}, {3, 1, 3, 2, 5, 6, 5, 4});
  std::vector<HostTensor> top = run_op(OpKind::kTopK, {x}, {{"k", 3}});
  REQUIRE(top.size() == 2);
  CHECK(top[0].as<float>() == std::vector<float>{3, 3, 2, 6, 5, 5});
  CHECK(top[1].as<int64_t>() == std::vector<int64_t>{0, 2, 3, 1, 0, 2});
  std::vector<HostTensor> low = run_op(OpKind::kTopK, {x}, {{"k", 2}, {"axis", 0}, {"largest", 0}});
  CHECK(low[0].as<float>() == std::vector<float>{3, 1, 3, 2, 5, 6, 5, 4});
  CHECK(low[1].as<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t largest : {0, 1}) {
    std::vector<HostTensor> r = run_op(OpKind::kTopK, {f32({4}, {nan, 2, nan, 1})}, {{"k", 3}, {"largest", largest}});
    CHECK(r[1].as<int64_t>() == (largest ? std::vector<int64_t>{1, 3, 0} : std::vector<int64_t>{3, 1, 0}));
  }
  std::vector<HostTensor> ints = run_op(OpKind::kTopK, {u8({3}, {200, 7, 255})}, {{"k", 1}});
  CHECK(ints[0].as<uint8_t>() == std::vector<uint8_t>{255});
  CHECK(run_op(OpKind::kTopK, {x}, {{"k", 0}})[1].type.shape == Shape{2, 0});
}

}  // namespace
