#include <doctest/doctest.h>

#include <limits>

#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

using Ints = std::vector<int64_t>;

TEST_CASE("ir/shape/concat") {
  CHECK(shape_of(OpKind::kConcat, {f32({2, 3}), f32({2, 5})}, {{"axis", 1}}) == Shape{2, 8});
  CHECK(shape_of(OpKind::kConcat, {f32({2, 3}), f32({2, 5}), f32({2, 0})}, {{"axis", -1}}) ==
        Shape{2, 8});
  CHECK(shape_of(OpKind::kConcat, {f32({4})}, {{"axis", 0}}) == Shape{4});
  CHECK(infer_error(OpKind::kConcat, {f32({2, 3}), f32({2, 5})}, {{"axis", 0}}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kConcat, {f32({2, 3}), f32({2, 3, 1})}, {{"axis", 0}}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kConcat, {f32({2}), tt(DType::kI32, {2})}, {{"axis", 0}}) ==
        ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kConcat, {f32({2}), f32({2})}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kConcat, {}, {{"axis", 0}}) == ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/split sizes") {
  auto r = infer(OpKind::kSplit, {f32({10, 4})}, {{"axis", 0}, {"sizes", Ints{3, 7}}});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0] == f32({3, 4}));
  CHECK((*r)[1] == f32({7, 4}));
  r = infer(OpKind::kSplit, {f32({10, 4})}, {{"axis", -1}, {"sizes", Ints{1, 1, 2}}});
  REQUIRE(r.ok());
  CHECK(r->size() == 3);
  CHECK((*r)[2] == f32({10, 2}));
  r = infer(OpKind::kSplit, {f32({10})}, {{"sizes", Ints{0, 10}}});  // axis defaults to 0
  REQUIRE(r.ok());
  CHECK((*r)[0] == f32({0}));
  CHECK(infer_error(OpKind::kSplit, {f32({10})}, {{"sizes", Ints{3, 3}}}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kSplit, {f32({10})}, {{"sizes", Ints{-1, 11}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSplit, {f32({10})}, {{"sizes", Ints{}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSplit, {f32({10})}) == ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/slice with negative indices steps and clamping") {
  TensorType x = f32({10, 8});
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  CHECK(shape_of(OpKind::kSlice, {x}, {{"starts", Ints{2}}, {"ends", Ints{7}}}) == Shape{5, 8});
  CHECK(shape_of(OpKind::kSlice, {x}, {{"starts", Ints{-3}}, {"ends", Ints{1000}}}) == Shape{3, 8});
  CHECK(shape_of(OpKind::kSlice, {x},
                 {{"starts", Ints{0, 1}}, {"ends", Ints{10, -1}}, {"steps", Ints{2, 3}}}) ==
        Shape{5, 2});
  CHECK(shape_of(
            OpKind::kSlice, {x},
            {{"starts", Ints{-1}}, {"ends", Ints{lo}}, {"axes", Ints{-1}}, {"steps", Ints{-1}}}) ==
        Shape{10, 8});  // full reverse
  CHECK(shape_of(OpKind::kSlice, {x},
                 {{"starts", Ints{7}}, {"ends", Ints{2}}, {"steps", Ints{-2}}}) == Shape{3, 8});
  CHECK(shape_of(OpKind::kSlice, {x}, {{"starts", Ints{5}}, {"ends", Ints{2}}}) == Shape{0, 8});
  CHECK(
      shape_of(OpKind::kSlice, {x},
               {{"starts", Ints{0}}, {"ends", Ints{hi}}, {"axes", Ints{1}}, {"steps", Ints{lo}}}) ==
      Shape{10, 0});
  CHECK(shape_of(
            OpKind::kSlice, {x},
            {{"starts", Ints{hi}}, {"ends", Ints{lo}}, {"axes", Ints{1}}, {"steps", Ints{lo}}}) ==
        Shape{10, 1});
  CHECK(infer_error(OpKind::kSlice, {x},
                    {{"starts", Ints{0}}, {"ends", Ints{1}}, {"steps", Ints{0}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSlice, {x}, {{"starts", Ints{0, 0}}, {"ends", Ints{1}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSlice, {x},
                    {{"starts", Ints{0, 0}}, {"ends", Ints{1, 1}}, {"axes", Ints{1, -1}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSlice, {x},
                    {{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{2}}}) ==
        ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/transpose perm") {
  TensorType x = f32({2, 3, 4});
  CHECK(shape_of(OpKind::kTranspose, {x}, {{"perm", Ints{1, 2, 0}}}) == Shape{3, 4, 2});
  CHECK(shape_of(OpKind::kTranspose, {x}) == Shape{4, 3, 2});
  CHECK(shape_of(OpKind::kTranspose, {f32({})}) == Shape{});
  for (const Ints& bad : {Ints{0, 0, 1}, Ints{0, 1}, Ints{0, 1, 3}, Ints{-1, 0, 1}}) {
    auto r = infer(OpKind::kTranspose, {x}, {{"perm", bad}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kVerifyError);
    CHECK(contains(r.status().message(), "not a permutation"));
  }
}

TEST_CASE("ir/shape/pad") {
  CHECK(shape_of(OpKind::kPad, {f32({2, 3})}, {{"pads", Ints{1, 0, 2, 5}}, {"value", 1.5}}) ==
        Shape{5, 8});
  CHECK(shape_of(OpKind::kPad, {f32({})}, {{"pads", Ints{}}}) == Shape{});
  CHECK(infer_error(OpKind::kPad, {f32({2, 3})}, {{"pads", Ints{1, 1}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kPad, {f32({2, 3})}, {{"pads", Ints{-1, 0, 0, 0}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kPad, {f32({2})}, {{"pads", Ints{0, 0}}, {"value", "zero"}}) ==
        ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/gather") {
  CHECK(infer1(OpKind::kGather, {f32({5, 4, 3}), tt(DType::kI64, {2, 6})}, {{"axis", 1}}) ==
        f32({5, 2, 6, 3}));
  CHECK(infer1(OpKind::kGather, {f32({5, 4, 3}), tt(DType::kI32, {})}) == f32({4, 3}));
  CHECK(infer1(OpKind::kGather, {f32({5, 4}), tt(DType::kI32, {7})}, {{"axis", -1}}) == f32({5, 7}));
  CHECK(infer_error(OpKind::kGather, {f32({5}), f32({2})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kGather, {f32({5}), tt(DType::kI8, {2})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kGather, {f32({5}), tt(DType::kI64, {2})}, {{"axis", 1}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kGather, {f32({}), tt(DType::kI64, {2})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/reshape with -1 and 0") {
  TensorType x = f32({2, 3, 4});
  CHECK(shape_of(OpKind::kReshape, {x}, {{"shape", Ints{6, -1}}}) == Shape{6, 4});
  CHECK(shape_of(OpKind::kReshape, {x}, {{"shape", Ints{0, -1}}}) == Shape{2, 12});
  CHECK(shape_of(OpKind::kReshape, {x}, {{"shape", Ints{-1}}}) == Shape{24});
  CHECK(shape_of(OpKind::kReshape, {x}, {{"shape", Ints{0, 0, 0}}}) == Shape{2, 3, 4});
  CHECK(shape_of(OpKind::kReshape, {x}, {{"shape", Ints{4, 0, -1}}}) == Shape{4, 3, 2});
  CHECK(shape_of(OpKind::kReshape, {f32({1, 1})}, {{"shape", Ints{}}}) == Shape{});
  CHECK(shape_of(OpKind::kReshape, {f32({0, 5})}, {{"shape", Ints{-1, 5}}}) == Shape{0, 5});
}

TEST_CASE("ir/shape/reshape errors") {
  TensorType x = f32({2, 3, 4});
  CHECK(infer_error(OpKind::kReshape, {x}, {{"shape", Ints{-1, -1}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReshape, {x}, {{"shape", Ints{5, 5}}}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kReshape, {x}, {{"shape", Ints{-2, 12}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReshape, {f32({24})}, {{"shape", Ints{6, 0}}}) ==
        ErrorCode::kVerifyError);  // 0 past the input rank
  CHECK(infer_error(OpKind::kReshape, {x}, {{"shape", Ints{7, -1}}}) == ErrorCode::kShapeError);
  // -1 next to a 0-sized dim is ambiguous.
  CHECK(infer_error(OpKind::kReshape, {f32({0, 5})}, {{"shape", Ints{0, -1}}}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kReshape, {x}) == ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/flatten") {
  TensorType x = f32({2, 3, 4});
  CHECK(shape_of(OpKind::kFlatten, {x}) == Shape{2, 12});
  CHECK(shape_of(OpKind::kFlatten, {x}, {{"axis", 0}}) == Shape{1, 24});
  CHECK(shape_of(OpKind::kFlatten, {x}, {{"axis", 3}}) == Shape{24, 1});
  CHECK(shape_of(OpKind::kFlatten, {x}, {{"axis", -1}}) == Shape{6, 4});
  CHECK(shape_of(OpKind::kFlatten, {x}, {{"axis", -3}}) == Shape{1, 24});
  CHECK(shape_of(OpKind::kFlatten, {f32({})}, {{"axis", 0}}) == Shape{1, 1});
  CHECK(infer_error(OpKind::kFlatten, {x}, {{"axis", 4}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kFlatten, {x}, {{"axis", -4}}) == ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/squeeze and unsqueeze") {
  TensorType x = f32({1, 3, 1, 5});
  CHECK(shape_of(OpKind::kSqueeze, {x}) == Shape{3, 5});
  CHECK(shape_of(OpKind::kSqueeze, {x}, {{"axes", Ints{0}}}) == Shape{3, 1, 5});
  CHECK(shape_of(OpKind::kSqueeze, {x}, {{"axes", Ints{-2}}}) == Shape{1, 3, 5});
  CHECK(infer_error(OpKind::kSqueeze, {x}, {{"axes", Ints{1}}}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kSqueeze, {x}, {{"axes", Ints{4}}}) == ErrorCode::kVerifyError);

  TensorType y = f32({3, 5});
  CHECK(shape_of(OpKind::kUnsqueeze, {y}, {{"axes", Ints{0}}}) == Shape{1, 3, 5});
  CHECK(shape_of(OpKind::kUnsqueeze, {y}, {{"axes", Ints{0, 3}}}) == Shape{1, 3, 5, 1});
  CHECK(shape_of(OpKind::kUnsqueeze, {y}, {{"axes", Ints{-1}}}) == Shape{3, 5, 1});
  CHECK(shape_of(OpKind::kUnsqueeze, {f32({})}, {{"axes", Ints{0}}}) == Shape{1});
  CHECK(infer_error(OpKind::kUnsqueeze, {y}, {{"axes", Ints{1, 1}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kUnsqueeze, {y}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kUnsqueeze, {f32({1, 1, 1, 1, 1, 1, 1, 1})}, {{"axes", Ints{0}}}) ==
        ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/identity and view outputs keep the dtype") {
  CHECK(infer1(OpKind::kIdentity, {tt(DType::kU8, {2, 2})}) == tt(DType::kU8, {2, 2}));
  CHECK(infer1(OpKind::kReshape, {tt(DType::kI8, {4})}, {{"shape", Ints{2, 2}}}).dtype == DType::kI8);
  CHECK(infer1(OpKind::kFlatten, {tt(DType::kBool, {2, 2})}).dtype == DType::kBool);
}

TEST_CASE("ir/shape/read_handle and write_handle") {
  std::vector<Handle> h = {Handle{"kv", f32({1, 16, 64})}};
  CHECK(infer1(OpKind::kReadHandle, {}, {{"handle", "kv"}}, h) == f32({1, 16, 64}));
  auto w = infer(OpKind::kWriteHandle, {f32({1, 16, 64})}, {{"handle", "kv"}}, h);
  REQUIRE(w.ok());
  CHECK(w->empty());
  CHECK(infer_error(OpKind::kReadHandle, {}, {{"handle", "cache"}}, h) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReadHandle, {}, {}, h) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kWriteHandle, {f32({1, 16, 32})}, {{"handle", "kv"}}, h) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kWriteHandle, {tt(DType::kF16, {1, 16, 64})}, {{"handle", "kv"}}, h) ==
        ErrorCode::kTypeMismatch);
}

TEST_CASE("ir/shape/write_handle_at") {
  std::vector<Handle> h = {Handle{"kv", f32({1, 16, 64})}};
  TensorType pos = tt(DType::kI64, {});
  Attrs a{{"handle", "kv"}, {"axis", 1}};
  auto ok = infer(OpKind::kWriteHandleAt, {f32({1, 4, 64}), pos}, a, h);
  REQUIRE(ok.ok());
  CHECK(ok->empty());
  CHECK(infer(OpKind::kWriteHandleAt, {f32({1, 16, 64}), pos}, a, h).ok());
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({1, 17, 64}), pos}, a, h) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({1, 4, 32}), pos}, a, h) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({4, 64}), pos}, a, h) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({1, 4, 64}), tt(DType::kI32, {})}, a, h) ==
        ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({1, 4, 64}), tt(DType::kI64, {1})}, a, h) ==
        ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({1, 4, 64}), pos},
                    {{"handle", "kv"}, {"axis", 3}}, h) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kWriteHandleAt, {f32({1, 4, 64}), pos}, {{"handle", "kv"}}, h) ==
        ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/unknown attribute and wrong input count") {
  auto r = infer(OpKind::kRelu, {f32({2})}, {{"alpha", 0.1}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kVerifyError);
  CHECK(contains(r.status().message(), "unknown attribute 'alpha'"));
  r = infer(OpKind::kAdd, {f32({2})});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kVerifyError);
  CHECK(contains(r.status().message(), "takes 2 inputs, got 1"));
  CHECK(infer_error(OpKind::kReadHandle, {f32({2})}, {{"handle", "kv"}}) ==
        ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/gather_elements") {
  CHECK(infer1(OpKind::kGatherElements, {f32({5, 4, 3}), tt(DType::kI64, {2, 4, 7})}, {{"axis", 2}}) ==
        f32({2, 4, 7}));
  CHECK(infer1(OpKind::kGatherElements, {tt(DType::kI8, {5, 4}), tt(DType::kI32, {9, 1})}) == tt(DType::kI8, {9, 1}));
  CHECK(infer1(OpKind::kGatherElements, {f32({5, 4}), tt(DType::kI32, {0, 2})}, {{"axis", -1}}) == f32({0, 2}));
  CHECK(infer_error(OpKind::kGatherElements, {f32({5}), f32({2})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kGatherElements, {f32({5, 4}), tt(DType::kI64, {2})}) == ErrorCode::kShapeError);
  // off the axis indices may not be larger than data
  CHECK(infer_error(OpKind::kGatherElements, {f32({5, 4}), tt(DType::kI64, {2, 5})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kGatherElements, {f32({5, 4}), tt(DType::kI64, {2, 2})}, {{"axis", 2}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kGatherElements, {f32({}), tt(DType::kI64, {})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/gather_nd") {
  const TensorType i64_23 = tt(DType::kI64, {2, 3});
  // k = 3 of rank 3: scalars per row; k = 1: rows of [4, 3].
  CHECK(infer1(OpKind::kGatherNd, {f32({5, 4, 3}), i64_23}) == f32({2}));
  CHECK(infer1(OpKind::kGatherNd, {f32({5, 4, 3}), tt(DType::kI32, {7, 1})}) == f32({7, 4, 3}));
  // batch_dims 1: indices [5, 2, 1] pick [3]-slices of data[b, i]
  CHECK(infer1(OpKind::kGatherNd, {tt(DType::kI8, {5, 4, 3}), tt(DType::kI64, {5, 2, 1})}, {{"batch_dims", 1}}) ==
        tt(DType::kI8, {5, 2, 3}));
  CHECK(infer_error(OpKind::kGatherNd, {f32({5, 4}), f32({2, 1})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kGatherNd, {f32({5, 4}), tt(DType::kI64, {2, 3})}) == ErrorCode::kShapeError);  // k > rank
  CHECK(infer_error(OpKind::kGatherNd, {f32({5, 4}), tt(DType::kI64, {2, 0})}) == ErrorCode::kShapeError);  // k = 0
  CHECK(infer_error(OpKind::kGatherNd, {f32({5, 4}), tt(DType::kI64, {4, 1})}, {{"batch_dims", 1}}) ==
        ErrorCode::kShapeError);  // batch dims differ
  CHECK(infer_error(OpKind::kGatherNd, {f32({5, 4}), tt(DType::kI64, {5, 1})}, {{"batch_dims", 2}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kGatherNd, {f32({5, 4}), tt(DType::kI64, {})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/scatter_nd") {
  const TensorType data = f32({4, 3, 2});
  CHECK(infer1(OpKind::kScatterNd, {data, tt(DType::kI64, {5, 1}), f32({5, 3, 2})}) == data);
  CHECK(infer1(OpKind::kScatterNd, {data, tt(DType::kI32, {2, 2, 3}), f32({2, 2})}, {{"reduction", "max"}}) == data);
  CHECK(infer_error(OpKind::kScatterNd, {data, tt(DType::kI64, {5, 1}), f32({5, 3})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kScatterNd, {data, tt(DType::kI64, {5, 4}), f32({5})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kScatterNd, {data, tt(DType::kI64, {5, 1}), tt(DType::kF64, {5, 3, 2})}) ==
        ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kScatterNd, {data, tt(DType::kI64, {5, 1}), f32({5, 3, 2})}, {{"reduction", "sum"}}) ==
        ErrorCode::kVerifyError);
  const TensorType flags = tt(DType::kBool, {3});
  CHECK(infer1(OpKind::kScatterNd, {flags, tt(DType::kI64, {1, 1}), tt(DType::kBool, {1})}) == flags);
  CHECK(infer_error(OpKind::kScatterNd, {flags, tt(DType::kI64, {1, 1}), tt(DType::kBool, {1})}, {{"reduction", "add"}}) ==
        ErrorCode::kTypeMismatch);
}

TEST_CASE("ir/shape/top_k") {
  auto types = infer(OpKind::kTopK, {f32({3, 7})}, {{"k", 2}});
  REQUIRE(types.ok());
  CHECK(*types == std::vector<TensorType>{f32({3, 2}), tt(DType::kI64, {3, 2})});
  types = infer(OpKind::kTopK, {tt(DType::kU8, {3, 7})}, {{"k", 0}, {"axis", 0}, {"largest", 0}});
  REQUIRE(types.ok());
  CHECK(*types == std::vector<TensorType>{tt(DType::kU8, {0, 7}), tt(DType::kI64, {0, 7})});
  CHECK(infer_error(OpKind::kTopK, {f32({3, 7})}, {{"k", 8}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kTopK, {f32({3, 7})}, {{"k", -1}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kTopK, {f32({3, 7})}) == ErrorCode::kVerifyError);  // k is required
  CHECK(infer_error(OpKind::kTopK, {f32({3, 7})}, {{"k", 1}, {"axis", 2}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kTopK, {tt(DType::kBool, {3})}, {{"k", 1}}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kTopK, {f32({})}, {{"k", 1}}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/data-dependent extents are planned at their bound") {
  const TensorType extent = tt(DType::kI64, {});  // the last output
  auto nz = infer(OpKind::kNonZero, {tt(DType::kBool, {2, 3})});
  REQUIRE(nz.ok());
  CHECK(*nz == std::vector<TensorType>{tt(DType::kI64, {2, 6}), extent});
  auto scalar = infer(OpKind::kNonZero, {f32({})});  // a scalar counts as [1]
  REQUIRE(scalar.ok());
  CHECK((*scalar)[0] == tt(DType::kI64, {1, 1}));
  auto flat = infer(OpKind::kUnique, {f32({2, 3})});
  REQUIRE(flat.ok());
  const TensorType six = tt(DType::kI64, {6});
  CHECK(*flat == std::vector<TensorType>{f32({6}), six, six, six, extent});
  auto rows = infer(OpKind::kUnique, {tt(DType::kI32, {4, 3})}, {{"axis", -2}, {"sorted", 0}});
  REQUIRE(rows.ok());
  const TensorType four = tt(DType::kI64, {4});
  CHECK(*rows == std::vector<TensorType>{tt(DType::kI32, {4, 3}), four, four, four, extent});
  CHECK(infer_error(OpKind::kUnique, {f32({2, 3})}, {{"axis", 2}}) == ErrorCode::kVerifyError);
  auto nms = infer(OpKind::kNonMaxSuppression,
                   {f32({2, 5, 4}), f32({2, 3, 5}), tt(DType::kI64, {1}), f32({}), f32({1})});
  REQUIRE(nms.ok());
  CHECK(*nms == std::vector<TensorType>{tt(DType::kI64, {30, 3}), extent});
  CHECK(infer_error(OpKind::kNonMaxSuppression, {f32({2, 5, 4}), f32({2, 3, 4}), tt(DType::kI64, {1}), f32({})}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kNonMaxSuppression, {f32({2, 5, 4}), f32({2, 3, 5}), f32({1}), f32({})}) ==
        ErrorCode::kTypeMismatch);
}
