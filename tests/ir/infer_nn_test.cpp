#include <doctest/doctest.h>

#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

using Ints = std::vector<int64_t>;

TEST_CASE("ir/shape/reductions with axes and keepdims") {
  for (OpKind op : {OpKind::kReduceSum, OpKind::kReduceMean, OpKind::kReduceMax}) {
    CAPTURE(op_name(op));
    TensorType x = f32({2, 3, 4});
    CHECK(shape_of(op, {x}, {{"axes", Ints{1}}}) == Shape{2, 1, 4});  // keepdims defaults to 1
    CHECK(shape_of(op, {x}, {{"axes", Ints{1}}, {"keepdims", 0}}) == Shape{2, 4});
    CHECK(shape_of(op, {x}, {{"axes", Ints{-1, 0}}, {"keepdims", 0}}) == Shape{3});
    CHECK(shape_of(op, {x}, {}) == Shape{1, 1, 1});  // no axes: all of them
    CHECK(shape_of(op, {x}, {{"axes", Ints{}}, {"keepdims", 0}}) == Shape{});
    CHECK(shape_of(op, {f32({})}, {{"keepdims", 0}}) == Shape{});
  }
}

TEST_CASE("ir/shape/reductions reject bad attributes and dtypes") {
  TensorType x = f32({2, 3, 4});
  CHECK(infer_error(OpKind::kReduceSum, {x}, {{"axes", Ints{1, -2}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReduceSum, {x}, {{"axes", Ints{3}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReduceSum, {x}, {{"keepdims", 2}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReduceSum, {x}, {{"axes", 1}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kReduceMean, {tt(DType::kI32, {3})}) == ErrorCode::kTypeMismatch);
  CHECK(shape_of(OpKind::kReduceMax, {tt(DType::kI32, {3})}, {}) == Shape{1});
}

TEST_CASE("ir/shape/softmax axis") {
  CHECK(infer1(OpKind::kSoftmax, {f32({2, 5})}) == f32({2, 5}));
  CHECK(infer1(OpKind::kSoftmax, {f32({2, 5})}, {{"axis", 0}}) == f32({2, 5}));
  CHECK(infer_error(OpKind::kSoftmax, {f32({2, 5})}, {{"axis", 2}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSoftmax, {f32({2, 5})}, {{"axis", -3}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kSoftmax, {f32({})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kSoftmax, {tt(DType::kI64, {2})}) == ErrorCode::kTypeMismatch);
}

TEST_CASE("ir/shape/layer_norm scale and bias shapes") {
  TensorType x = f32({2, 5, 8});
  CHECK(infer1(OpKind::kLayerNorm, {x, f32({8}), f32({8})}) == x);
  CHECK(infer1(OpKind::kLayerNorm, {x, f32({8})}) == x);  // bias is optional
  CHECK(infer1(OpKind::kLayerNorm, {x, f32({5, 8}), f32({5, 8})}, {{"axis", 1}}) == x);
  CHECK(infer_error(OpKind::kLayerNorm, {x, f32({8}), f32({8})}, {{"axis", 1}}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kLayerNorm, {x, f32({8}), f32({7})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kLayerNorm, {x, tt(DType::kF16, {8})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kLayerNorm, {x, f32({8})}, {{"epsilon", -1.0}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kLayerNorm, {x}) == ErrorCode::kVerifyError);  // arity
}

TEST_CASE("ir/shape/matmul 2-D and batched with broadcast batch dims") {
  CHECK(shape_of(OpKind::kMatmul, {f32({2, 3}), f32({3, 4})}) == Shape{2, 4});
  CHECK(shape_of(OpKind::kMatmul, {f32({5, 2, 3}), f32({5, 3, 4})}) == Shape{5, 2, 4});
  CHECK(shape_of(OpKind::kMatmul, {f32({5, 1, 2, 3}), f32({7, 3, 4})}) == Shape{5, 7, 2, 4});
  CHECK(shape_of(OpKind::kMatmul, {f32({2, 3}), f32({4, 3, 5})}) == Shape{4, 2, 5});
  CHECK(shape_of(OpKind::kMatmul, {f32({1, 2, 3}), f32({6, 3, 0})}) == Shape{6, 2, 0});
  CHECK(infer_error(OpKind::kMatmul, {f32({2, 2, 3}), f32({3, 3, 4})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kMatmul, {f32({2, 3}), tt(DType::kF16, {3, 4})}) ==
        ErrorCode::kTypeMismatch);
}

TEST_CASE("ir/shape/matmul 1-D rules") {
  CHECK(shape_of(OpKind::kMatmul, {f32({3}), f32({3})}) == Shape{});      // dot
  CHECK(shape_of(OpKind::kMatmul, {f32({3}), f32({3, 4})}) == Shape{4});  // row vector
  CHECK(shape_of(OpKind::kMatmul, {f32({2, 3}), f32({3})}) == Shape{2});  // column vector
  CHECK(shape_of(OpKind::kMatmul, {f32({5, 2, 3}), f32({3})}) == Shape{5, 2});
  CHECK(shape_of(OpKind::kMatmul, {f32({3}), f32({5, 3, 4})}) == Shape{5, 4});
  CHECK(infer_error(OpKind::kMatmul, {f32({3}), f32({4})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kMatmul, {f32({}), f32({3})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/matmul contraction mismatch names both shapes") {
  auto r = infer(OpKind::kMatmul, {f32({2, 3}), f32({4, 5})});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kShapeError);
  CHECK(contains(r.status().message(), "[2,3] x [4,5]"));
}

TEST_CASE("ir/shape/gemm transposes and bias broadcast") {
  CHECK(shape_of(OpKind::kGemm, {f32({4, 3}), f32({3, 5})}) == Shape{4, 5});
  CHECK(shape_of(OpKind::kGemm, {f32({3, 4}), f32({3, 5})}, {{"trans_a", 1}}) == Shape{4, 5});
  CHECK(shape_of(OpKind::kGemm, {f32({4, 3}), f32({5, 3})}, {{"trans_b", 1}}) == Shape{4, 5});
  CHECK(shape_of(OpKind::kGemm, {f32({3, 4}), f32({5, 3})},
                 {{"trans_a", 1}, {"trans_b", 1}, {"alpha", 0.5}, {"beta", 2.0}}) == Shape{4, 5});
  for (Shape c : {Shape{5}, Shape{4, 1}, Shape{1, 5}, Shape{}, Shape{4, 5}}) {
    CAPTURE(c.to_string());
    CHECK(shape_of(OpKind::kGemm, {f32({4, 3}), f32({3, 5}), f32(c)}) == Shape{4, 5});
  }
  for (Shape c : {Shape{4}, Shape{2, 4, 5}, Shape{5, 4}}) {
    CAPTURE(c.to_string());
    CHECK(infer_error(OpKind::kGemm, {f32({4, 3}), f32({3, 5}), f32(c)}) == ErrorCode::kShapeError);
  }
  CHECK(infer_error(OpKind::kGemm, {f32({4, 3}), f32({4, 5})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kGemm, {f32({4, 3, 1}), f32({3, 5})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kGemm, {f32({4, 3}), f32({3, 5})}, {{"trans_a", 2}}) ==
        ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/conv2d output size with pads strides and dilations") {
  TensorType x = f32({1, 3, 32, 32});
  TensorType w = f32({8, 3, 3, 3});
  CHECK(shape_of(OpKind::kConv2d, {x, w}) == Shape{1, 8, 30, 30});
  CHECK(shape_of(OpKind::kConv2d, {x, w}, {{"pads", Ints{1, 1, 1, 1}}}) == Shape{1, 8, 32, 32});
  CHECK(shape_of(OpKind::kConv2d, {x, w}, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}) ==
        Shape{1, 8, 16, 16});
  CHECK(shape_of(OpKind::kConv2d, {x, w}, {{"dilations", Ints{2, 2}}}) == Shape{1, 8, 28, 28});
  // Asymmetric pads [top,left,bottom,right] and strides on a non-square input.
  CHECK(shape_of(OpKind::kConv2d, {f32({2, 3, 10, 7}), w},
                 {{"pads", Ints{0, 1, 2, 3}}, {"strides", Ints{2, 2}}}) == Shape{2, 8, 5, 5});
  // Non-square kernel with per-axis strides.
  CHECK(shape_of(OpKind::kConv2d, {f32({1, 3, 10, 6}), f32({4, 3, 5, 1})},
                 {{"strides", Ints{1, 2}}}) == Shape{1, 4, 6, 3});
  // Window larger than the padded input.
  CHECK(infer_error(OpKind::kConv2d, {f32({1, 3, 2, 2}), w}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/conv2d groups and bias") {
  CHECK(shape_of(OpKind::kConv2d, {f32({2, 8, 5, 5}), f32({16, 2, 3, 3})}, {{"groups", 4}}) ==
        Shape{2, 16, 3, 3});
  CHECK(shape_of(OpKind::kConv2d, {f32({1, 8, 5, 5}), f32({8, 1, 3, 3}), f32({8})},
                 {{"groups", 8}}) == Shape{1, 8, 3, 3});  // depthwise
  CHECK(infer_error(OpKind::kConv2d, {f32({1, 8, 5, 5}), f32({16, 2, 3, 3})}, {{"groups", 3}}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kConv2d, {f32({1, 8, 5, 5}), f32({16, 4, 3, 3})}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kConv2d, {f32({1, 3, 5, 5}), f32({8, 3, 3, 3}), f32({4})}) ==
        ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kConv2d, {f32({3, 5, 5}), f32({8, 3, 3, 3})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/conv2d rejects bad attributes") {
  TensorType x = f32({1, 3, 8, 8}), w = f32({4, 3, 3, 3});
  CHECK(infer_error(OpKind::kConv2d, {x, w}, {{"strides", Ints{0, 1}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kConv2d, {x, w}, {{"strides", Ints{1}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kConv2d, {x, w}, {{"pads", Ints{1, 1, 1}}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kConv2d, {x, w}, {{"pads", Ints{-1, 0, 0, 0}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kConv2d, {x, w}, {{"dilations", Ints{0, 1}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kConv2d, {x, w}, {{"groups", 0}}) == ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/max_pool output size and ceil_mode") {
  TensorType x = f32({1, 1, 5, 5});
  CHECK(shape_of(OpKind::kMaxPool, {x}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}) ==
        Shape{1, 1, 2, 2});
  CHECK(shape_of(OpKind::kMaxPool, {x},
                 {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", 1}}) ==
        Shape{1, 1, 3, 3});
  CHECK(shape_of(OpKind::kMaxPool, {f32({1, 1, 6, 6})},
                 {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}) ==
        Shape{1, 1, 3, 3});
  CHECK(shape_of(OpKind::kMaxPool, {f32({1, 1, 6, 6})},
                 {{"kernel", Ints{3, 3}},
                  {"strides", Ints{2, 2}},
                  {"pads", Ints{1, 1, 1, 1}},
                  {"ceil_mode", 1}}) == Shape{1, 1, 4, 4});
  // ceil_mode drops a last window that would start in the end padding.
  CHECK(shape_of(OpKind::kMaxPool, {x},
                 {{"kernel", Ints{2, 2}},
                  {"strides", Ints{2, 2}},
                  {"pads", Ints{1, 1, 1, 1}},
                  {"ceil_mode", 1}}) == Shape{1, 1, 3, 3});
  CHECK(shape_of(OpKind::kMaxPool, {x}, {{"kernel", Ints{3, 1}}}) == Shape{1, 1, 3, 5});
  CHECK(shape_of(OpKind::kMaxPool, {tt(DType::kI8, {1, 1, 4, 4})}, {{"kernel", Ints{2, 2}}}) ==
        Shape{1, 1, 3, 3});
  CHECK(infer_error(OpKind::kMaxPool, {x}) == ErrorCode::kVerifyError);  // kernel is required
  CHECK(infer_error(OpKind::kMaxPool, {x}, {{"kernel", Ints{6, 6}}}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kMaxPool, {x}, {{"kernel", Ints{2, 2}}, {"count_include_pad", 1}}) ==
        ErrorCode::kVerifyError);  // avg_pool only
}

TEST_CASE("ir/shape/avg_pool count_include_pad and pad limits") {
  TensorType x = f32({2, 3, 7, 7});
  CHECK(shape_of(OpKind::kAvgPool, {x},
                 {{"kernel", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", 1}}) ==
        Shape{2, 3, 7, 7});
  CHECK(shape_of(OpKind::kAvgPool, {x}, {{"kernel", Ints{7, 7}}}) == Shape{2, 3, 1, 1});
  CHECK(infer_error(OpKind::kAvgPool, {x}, {{"kernel", Ints{2, 2}}, {"pads", Ints{2, 0, 0, 0}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kAvgPool, {x}, {{"kernel", Ints{2, 2}}, {"strides", Ints{0, 1}}}) ==
        ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kAvgPool, {tt(DType::kI32, {1, 1, 4, 4})}, {{"kernel", Ints{2, 2}}}) ==
        ErrorCode::kTypeMismatch);
}

TEST_CASE("ir/shape/global_avg_pool") {
  CHECK(shape_of(OpKind::kGlobalAvgPool, {f32({2, 3, 7, 9})}) == Shape{2, 3, 1, 1});
  CHECK(shape_of(OpKind::kGlobalAvgPool, {f32({2, 3, 10})}) == Shape{2, 3, 1});
  CHECK(infer_error(OpKind::kGlobalAvgPool, {f32({2, 3})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/batch_norm") {
  TensorType x = f32({2, 3, 4, 4}), c = f32({3});
  CHECK(infer1(OpKind::kBatchNorm, {x, c, c, c, c}, {{"epsilon", 1e-3}}) == x);
  CHECK(infer_error(OpKind::kBatchNorm, {x, c, c, c, f32({4})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kBatchNorm, {x, c, c, c}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kBatchNorm, {f32({3}), c, c, c, c}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/arg_max and arg_min") {
  for (OpKind op : {OpKind::kArgMax, OpKind::kArgMin}) {
    CAPTURE(op_name(op));
    TensorType x = f32({2, 3, 4});
    CHECK(infer1(op, {x}) == tt(DType::kI64, {1, 3, 4}));  // axis 0, keepdims 1
    CHECK(infer1(op, {x}, {{"axis", -1}, {"keepdims", 0}}) == tt(DType::kI64, {2, 3}));
    CHECK(infer1(op, {tt(DType::kU8, {5})}, {{"keepdims", 0}, {"select_last_index", 1}}) == tt(DType::kI64, {}));
    CHECK(infer_error(op, {x}, {{"axis", 3}}) == ErrorCode::kVerifyError);
    CHECK(infer_error(op, {x}, {{"select_last_index", 2}}) == ErrorCode::kVerifyError);
    CHECK(infer_error(op, {x}, {{"axes", Ints{0}}}) == ErrorCode::kVerifyError);
    CHECK(infer_error(op, {f32({})}) == ErrorCode::kShapeError);
    CHECK(infer_error(op, {f32({2, 0})}, {{"axis", 1}}) == ErrorCode::kShapeError);  // nothing to pick
    CHECK(infer1(op, {f32({2, 0})}, {{"axis", 0}}) == tt(DType::kI64, {1, 0}));
    CHECK(infer_error(op, {tt(DType::kBool, {3})}) == ErrorCode::kTypeMismatch);
  }
}
