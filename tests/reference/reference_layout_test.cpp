// Reference interpreter: concat, split, slice, transpose, pad, gather, views, state ops.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <numeric>

#include "reference_test_util.h"

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

std::vector<int32_t> iota_i(int64_t n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_CASE("reference/concat and split along an axis") {
  HostTensor c = run1(OpKind::kConcat, {i32({2, 1}, {1, 2}), i32({2, 2}, {3, 4, 5, 6})}, {{"axis", 1}});
  CHECK(c.type.shape == Shape{2, 3});
  CHECK(c.as<int32_t>() == std::vector<int32_t>{1, 3, 4, 2, 5, 6});
  HostTensor c0 = run1(OpKind::kConcat, {f32({1, 2}, {1, 2}), f32({2, 2}, {3, 4, 5, 6}), f32({0, 2}, {})},
                       {{"axis", -2}});
  CHECK(c0.as<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  std::vector<HostTensor> parts = run_op(OpKind::kSplit, {i32({2, 3}, {1, 2, 3, 4, 5, 6})},
                                         {{"axis", 1}, {"sizes", std::vector<int64_t>{2, 0, 1}}});
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].as<int32_t>() == std::vector<int32_t>{1, 2, 4, 5});
  CHECK(parts[1].bytes.empty());
  CHECK(parts[2].as<int32_t>() == std::vector<int32_t>{3, 6});
}

TEST_CASE("reference/concat then split is the identity") {
  CHECK(rc::check("split(concat(xs)) == xs", [] {
    const int64_t rows = *rc::gen::inRange<int64_t>(0, 4);
    const int64_t cols = *rc::gen::inRange<int64_t>(1, 4);
    const std::vector<int64_t> widths = *rc::gen::container<std::vector<int64_t>>(
        *rc::gen::inRange<size_t>(1, 5), rc::gen::inRange<int64_t>(0, 4));
    const int64_t axis = *rc::gen::inRange<int64_t>(0, 3);  // 0, 1 or 2 of [rows, w, cols]
    std::vector<HostTensor> xs;
    int32_t next = 0;
    for (int64_t w : widths) {
      Shape shape = axis == 0 ? Shape{w, rows, cols} : axis == 1 ? Shape{rows, w, cols} : Shape{rows, cols, w};
      const int64_t n = shape.num_elements().value();
      xs.push_back(i32(shape, iota_i(n, next)));
      next += static_cast<int32_t>(n);
    }
    const HostTensor joined = run1(OpKind::kConcat, xs, {{"axis", axis}});
    const std::vector<HostTensor> back = run_op(OpKind::kSplit, {joined}, {{"axis", axis}, {"sizes", widths}});
    RC_ASSERT(back == xs);
  }));
}

TEST_CASE("reference/slice clamps and takes negative steps") {
  const HostTensor x = i32({5}, {0, 1, 2, 3, 4});
  auto slice = [&](const HostTensor& t, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
                   std::vector<int64_t> steps) {
    ir::Attrs attrs = {{"starts", starts}, {"ends", ends}};
    if (!axes.empty()) attrs["axes"] = axes;
    if (!steps.empty()) attrs["steps"] = steps;
    return run1(OpKind::kSlice, {t}, attrs);
  };
  CHECK(slice(x, {1}, {3}, {}, {}).as<int32_t>() == std::vector<int32_t>{1, 2});
  CHECK(slice(x, {-2}, {100}, {}, {}).as<int32_t>() == std::vector<int32_t>{3, 4});
  CHECK(slice(x, {-1}, {-100}, {}, {-1}).as<int32_t>() == std::vector<int32_t>{4, 3, 2, 1, 0});
  CHECK(slice(x, {100}, {0}, {}, {-2}).as<int32_t>() == std::vector<int32_t>{4, 2});
  CHECK(slice(x, {3}, {1}, {}, {}).bytes.empty());
  CHECK(slice(x, {0}, {5}, {}, {INT64_MAX}).as<int32_t>() == std::vector<int32_t>{0});
  CHECK(slice(x, {4}, {-6}, {}, {INT64_MIN}).as<int32_t>() == std::vector<int32_t>{4});
  // 2-D: rows reversed, every other column from the end.
  const HostTensor m = i32({2, 5}, iota_i(10));
  HostTensor r = slice(m, {-1, 4}, {-3, -100}, {0, 1}, {-1, -2});
  CHECK(r.type.shape == Shape{2, 3});
  CHECK(r.as<int32_t>() == std::vector<int32_t>{9, 7, 5, 4, 2, 0});
  // Only axis 1 (negative axis), axis 0 untouched.
  CHECK(slice(m, {1}, {3}, {-1}, {}).as<int32_t>() == std::vector<int32_t>{1, 2, 6, 7});
}

TEST_CASE("reference/transpose permutes axes") {
  HostTensor t = run1(OpKind::kTranspose, {i32({2, 3}, {1, 2, 3, 4, 5, 6})});
  CHECK(t.type.shape == Shape{3, 2});
  CHECK(t.as<int32_t>() == std::vector<int32_t>{1, 4, 2, 5, 3, 6});
  // [2,3,4] with perm (1,2,0): out[j][k][i] = x[i][j][k] = 12i + 4j + k.
  HostTensor p = run1(OpKind::kTranspose, {i32({2, 3, 4}, iota_i(24))}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  CHECK(p.type.shape == Shape{3, 4, 2});
  std::vector<int32_t> v = p.as<int32_t>();
  for (int j = 0; j < 3; ++j) {
    for (int k = 0; k < 4; ++k) {
      for (int i = 0; i < 2; ++i) CHECK(v[static_cast<size_t>((j * 4 + k) * 2 + i)] == 12 * i + 4 * j + k);
    }
  }
  CHECK(rc::check("transpose by perm then by its inverse is the identity", [] {
    const int rank = *rc::gen::inRange(0, 5);
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(*rc::gen::inRange<int64_t>(1, 4));
    // A random permutation: sort the axes by random keys.
    const auto keys = *rc::gen::container<std::vector<int>>(static_cast<size_t>(rank), rc::gen::arbitrary<int>());
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)]; });
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    const Shape shape(dims);
    std::vector<int64_t> values(static_cast<size_t>(shape.num_elements().value()));
    std::iota(values.begin(), values.end(), 0);
    const HostTensor x = i64(shape, values);
    const HostTensor once = run1(OpKind::kTranspose, {x}, {{"perm", perm}});
    const HostTensor twice = run1(OpKind::kTranspose, {once}, {{"perm", inverse}});
    RC_ASSERT(twice == x);
  }));
}

TEST_CASE("reference/pad with a constant converted to the dtype") {
  HostTensor p = run1(OpKind::kPad, {f32({2, 2}, {1, 2, 3, 4})},
                      {{"pads", std::vector<int64_t>{1, 0, 0, 1}}, {"value", 9.0}});
  CHECK(p.type.shape == Shape{3, 3});
  CHECK(p.as<float>() == std::vector<float>{9, 9, 9, 1, 2, 9, 3, 4, 9});
  // Integer pads truncate the value; bool pads with value != 0.
  CHECK(run1(OpKind::kPad, {i32({1}, {5})}, {{"pads", std::vector<int64_t>{1, 1}}, {"value", -2.7}}).as<int32_t>() ==
        std::vector<int32_t>{-2, 5, -2});
  CHECK(run1(OpKind::kPad, {boolean({1}, {false})}, {{"pads", std::vector<int64_t>{0, 2}}, {"value", 1.0}}).as<bool>() ==
        std::vector<bool>{false, true, true});
  HostTensor h = run1(OpKind::kPad, {HostTensor::from_doubles(DType::kBf16, {1}, {2})},
                      {{"pads", std::vector<int64_t>{1, 0}}});
  CHECK(h.to_doubles() == std::vector<double>{0, 2});
  // Rank 3, padding only the middle axis; a scalar pads to itself.
  HostTensor r3 = run1(OpKind::kPad, {i32({1, 1, 2}, {7, 8})}, {{"pads", std::vector<int64_t>{0, 1, 0, 0, 0, 0}}});
  CHECK(r3.as<int32_t>() == std::vector<int32_t>{0, 0, 7, 8});
  CHECK(run1(OpKind::kPad, {i32({}, {3})}, {{"pads", std::vector<int64_t>{}}}).as<int32_t>() == std::vector<int32_t>{3});
}

TEST_CASE("reference/gather with negative indices and along inner axes") {
  const HostTensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  HostTensor g = run1(OpKind::kGather, {data, i64({2}, {-1, 0})});
  CHECK(g.type.shape == Shape{2, 2});
  CHECK(g.as<float>() == std::vector<float>{5, 6, 1, 2});
  // axis 1 with 2-D i32 indices: out [3, 2, 2].
  HostTensor g1 = run1(OpKind::kGather, {data, i32({2, 2}, {1, 0, -2, 1})}, {{"axis", 1}});
  CHECK(g1.type.shape == Shape{3, 2, 2});
  CHECK(g1.as<float>() == std::vector<float>{2, 1, 1, 2, 4, 3, 3, 4, 6, 5, 5, 6});
  // Scalar index drops the axis.
  HostTensor s = run1(OpKind::kGather, {data, i64({}, {1})});
  CHECK(s.type.shape == Shape{2});
  CHECK(s.as<float>() == std::vector<float>{3, 4});
}

TEST_CASE("reference/gather index out of range is kOutOfBounds naming the node") {
  for (int64_t bad : std::vector<int64_t>{3, -4, INT64_MAX, INT64_MIN}) {
    Result<std::vector<HostTensor>> r = try_op(OpKind::kGather, {f32({3}, {1, 2, 3}), i64({2}, {0, bad})});
    REQUIRE(!r.ok());
    CHECK(r.status().code() == ErrorCode::kOutOfBounds);
    CHECK(r.status().message().find("node 'n' (gather)") != std::string::npos);
    CHECK(r.status().message().find(std::to_string(bad)) != std::string::npos);
  }
}

TEST_CASE("reference/gather_elements along each axis with negative indices") {
  const HostTensor data = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  // axis 1: out[i][j] = data[i][idx[i][j]]; indices smaller than data off the axis.
  HostTensor g1 = run1(OpKind::kGatherElements, {data, i64({2, 4}, {2, -3, 0, -1, 1, 1, 0, 2})}, {{"axis", 1}});
  CHECK(g1.type.shape == Shape{2, 4});
  CHECK(g1.as<float>() == std::vector<float>{3, 1, 1, 3, 5, 5, 4, 6});
  // axis 0 (default), i32, a row fewer and a column fewer than data.
  HostTensor g0 = run1(OpKind::kGatherElements, {data, i32({1, 2}, {1, -2})});
  CHECK(g0.as<float>() == std::vector<float>{4, 2});
  CHECK(run1(OpKind::kGatherElements, {data, i64({0, 3}, {})}).bytes.empty());
}

TEST_CASE("reference/gather_elements index out of range is kOutOfBounds naming the node") {
  for (int64_t bad : std::vector<int64_t>{3, -4, INT64_MAX, INT64_MIN}) {
    Result<std::vector<HostTensor>> r =
        try_op(OpKind::kGatherElements, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({1, 2}, {0, bad})}, {{"axis", -1}});
    REQUIRE(!r.ok());
    CHECK(r.status().code() == ErrorCode::kOutOfBounds);
    CHECK(r.status().message().find("node 'n' (gather_elements)") != std::string::npos);
    CHECK(r.status().message().find(std::to_string(bad)) != std::string::npos);
  }
}

TEST_CASE("reference/views copy the bytes") {
  const HostTensor x = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor r = run1(OpKind::kReshape, {x}, {{"shape", std::vector<int64_t>{3, -1}}});
  CHECK(r.type.shape == Shape{3, 2});
  CHECK(r.bytes == x.bytes);
  CHECK(run1(OpKind::kFlatten, {i32({2, 1, 3}, {1, 2, 3, 4, 5, 6})}, {{"axis", 2}}).type.shape == Shape{2, 3});
  CHECK(run1(OpKind::kSqueeze, {i32({1, 3, 1}, {1, 2, 3})}).type.shape == Shape{3});
  HostTensor u = run1(OpKind::kUnsqueeze, {x}, {{"axes", std::vector<int64_t>{0, -1}}});
  CHECK(u.type.shape == Shape{1, 2, 3, 1});
  CHECK(u.bytes == x.bytes);
  CHECK(run1(OpKind::kIdentity, {x}) == x);
}

}  // namespace
