#include <doctest/doctest.h>

#include <limits>

#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

namespace {

std::vector<OpKind> unary_ops() {
  std::vector<OpKind> out;
  for (OpKind op : all_ops()) {
    if (is_unary_elementwise(op)) out.push_back(op);
  }
  return out;
}

std::vector<OpKind> binary_ops() {
  std::vector<OpKind> out;
  for (OpKind op : all_ops()) {
    if (is_binary_elementwise(op)) out.push_back(op);
  }
  return out;
}

}  // namespace

TEST_CASE("ir/shape/unary ops keep the input type") {
  CHECK(unary_ops().size() == 29);
  for (OpKind op : unary_ops()) {
    CAPTURE(op_name(op));
    CHECK(infer1(op, {f32({2, 3})}) == f32({2, 3}));
    CHECK(infer1(op, {tt(DType::kBf16, {})}) == tt(DType::kBf16, {}));  // scalars too
    CHECK(infer1(op, {tt(DType::kF16, {0, 5})}) == tt(DType::kF16, {0, 5}));
  }
}

TEST_CASE("ir/shape/unary dtype rules") {
  for (OpKind op :
       {OpKind::kExp, OpKind::kLog, OpKind::kSqrt, OpKind::kRsqrt, OpKind::kTanh, OpKind::kSigmoid,
        OpKind::kGelu, OpKind::kErf, OpKind::kSilu, OpKind::kHardSigmoid, OpKind::kSin, OpKind::kCos,
        OpKind::kTan, OpKind::kAsin, OpKind::kAcos, OpKind::kAtan, OpKind::kSinh, OpKind::kCosh, OpKind::kAsinh,
        OpKind::kAcosh, OpKind::kAtanh}) {
    CAPTURE(op_name(op));
    CHECK(infer_error(op, {tt(DType::kI32, {4})}) == ErrorCode::kTypeMismatch);
  }
  // the rounding ops take integers too (identities there)
  for (OpKind op : {OpKind::kNeg, OpKind::kAbs, OpKind::kRelu, OpKind::kClip, OpKind::kFloor, OpKind::kCeil,
                    OpKind::kRound, OpKind::kTrunc}) {
    CAPTURE(op_name(op));
    CHECK(infer1(op, {tt(DType::kI8, {4})}) == tt(DType::kI8, {4}));
    CHECK(infer_error(op, {tt(DType::kBool, {4})}) == ErrorCode::kTypeMismatch);
  }
}

TEST_CASE("ir/shape/hard_sigmoid and clip attributes") {
  CHECK(infer1(OpKind::kHardSigmoid, {f32({3})}, {{"alpha", 0.1}, {"beta", 0.6}}) == f32({3}));
  CHECK(infer_error(OpKind::kHardSigmoid, {f32({3})}, {{"alpha", 1}}) == ErrorCode::kVerifyError);
  CHECK(infer1(OpKind::kClip, {f32({3})}, {{"min", 0.0}, {"max", 6.0}}) == f32({3}));
  CHECK(infer1(OpKind::kClip, {f32({3})}, {{"max", 6.0}}) == f32({3}));
  CHECK(infer_error(OpKind::kClip, {f32({3})}, {{"min", 1.0}, {"max", 0.0}}) ==
        ErrorCode::kVerifyError);
  CHECK(
      infer_error(OpKind::kClip, {f32({3})}, {{"min", std::numeric_limits<double>::quiet_NaN()}}) ==
      ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/binary broadcasting in every position") {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, {2, 3}},  // equal
      {{}, {2, 3}, {2, 3}},      // scalar left
      {{2, 3}, {}, {2, 3}},      // scalar right
      {{3}, {2, 3}, {2, 3}},     // lower rank left
      {{2, 3}, {3}, {2, 3}},     // lower rank right
      {{2, 1}, {1, 3}, {2, 3}},  // 1s on both sides
      {{1, 3}, {2, 1}, {2, 3}},
      {{4, 1, 5}, {3, 1}, {4, 3, 5}},  // leading, middle and trailing broadcast
      {{1, 1, 1}, {7}, {1, 1, 7}},
      {{5, 0}, {1}, {5, 0}},  // zero-size dims broadcast like any other
      {{1}, {5, 0}, {5, 0}},
      {{8, 1, 6, 1}, {7, 1, 5}, {8, 7, 6, 5}},  // numpy docs example
  };
  for (OpKind op : binary_ops()) {
    // the bit shifts take unsigned integers only
    const bool shift = op == OpKind::kBitShiftLeft || op == OpKind::kBitShiftRight;
    const DType dt = shift ? DType::kU16 : DType::kF32;
    for (const Case& c : cases) {
      CAPTURE(op_name(op));
      CAPTURE(c.a.to_string());
      CAPTURE(c.b.to_string());
      TensorType out = infer1(op, {tt(dt, c.a), tt(dt, c.b)});
      CHECK(out.shape == c.out);
      CHECK(out.dtype == (is_comparison(op) ? DType::kBool : dt));
    }
  }
}

TEST_CASE("ir/shape/bit shifts take unsigned integers only") {
  for (OpKind op : {OpKind::kBitShiftLeft, OpKind::kBitShiftRight}) {
    CAPTURE(op_name(op));
    for (DType d : {DType::kU8, DType::kU16, DType::kU32, DType::kU64}) {
      CHECK(infer1(op, {tt(d, {2, 3}), tt(d, {3})}) == tt(d, {2, 3}));
    }
    for (DType d : {DType::kI8, DType::kI16, DType::kI32, DType::kI64, DType::kF32, DType::kBool}) {
      CAPTURE(dtype_name(d));
      CHECK(infer_error(op, {tt(d, {2}), tt(d, {2})}) == ErrorCode::kTypeMismatch);
    }
    CHECK(infer_error(op, {tt(DType::kU8, {2}), tt(DType::kU16, {2})}) == ErrorCode::kTypeMismatch);
  }
}

TEST_CASE("ir/shape/binary incompatible broadcast is a shape error") {
  auto r = infer(OpKind::kAdd, {f32({2, 3}), f32({4})});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kShapeError);
  CHECK(contains(r.status().message(), "[2,3]"));
  CHECK(contains(r.status().message(), "[4]"));
  CHECK(infer_error(OpKind::kMul, {f32({2, 0}), f32({3})}) == ErrorCode::kShapeError);
}

TEST_CASE("ir/shape/binary dtype rules") {
  CHECK(infer_error(OpKind::kAdd, {f32({2}), tt(DType::kF16, {2})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kAdd, {tt(DType::kBool, {2}), tt(DType::kBool, {2})}) ==
        ErrorCode::kTypeMismatch);
  CHECK(infer1(OpKind::kSub, {tt(DType::kI64, {2}), tt(DType::kI64, {})}) == tt(DType::kI64, {2}));
  // Comparisons accept bools and always produce bool.
  CHECK(infer1(OpKind::kEqual, {tt(DType::kBool, {2}), tt(DType::kBool, {1})}) ==
        tt(DType::kBool, {2}));
  CHECK(infer1(OpKind::kLess, {tt(DType::kI32, {3, 1}), tt(DType::kI32, {4})}) ==
        tt(DType::kBool, {3, 4}));
}

TEST_CASE("ir/shape/where broadcasts all three operands") {
  auto b = [](Shape s) { return tt(DType::kBool, std::move(s)); };
  CHECK(infer1(OpKind::kWhere, {b({2, 1, 1}), f32({3, 1}), f32({4})}) == f32({2, 3, 4}));
  CHECK(infer1(OpKind::kWhere, {b({}), f32({3}), f32({})}) == f32({3}));
  CHECK(infer1(OpKind::kWhere, {b({5}), f32({}), f32({})}) == f32({5}));
  CHECK(infer1(OpKind::kWhere, {b({1}), f32({}), f32({2, 1})}) == f32({2, 1}));
  CHECK(infer_error(OpKind::kWhere, {b({2}), f32({3}), f32({3})}) == ErrorCode::kShapeError);
  CHECK(infer_error(OpKind::kWhere, {f32({3}), f32({3}), f32({3})}) == ErrorCode::kTypeMismatch);
  CHECK(infer_error(OpKind::kWhere, {b({3}), f32({3}), tt(DType::kI32, {3})}) ==
        ErrorCode::kTypeMismatch);
}

TEST_CASE("ir/shape/cast changes the dtype") {
  CHECK(infer1(OpKind::kCast, {f32({2, 3})}, {{"to", "bf16"}}) == tt(DType::kBf16, {2, 3}));
  CHECK(infer1(OpKind::kCast, {tt(DType::kBool, {})}, {{"to", "i64"}}) == tt(DType::kI64, {}));
  CHECK(infer_error(OpKind::kCast, {f32({2})}, {{"to", "f33"}}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kCast, {f32({2})}) == ErrorCode::kVerifyError);
  CHECK(infer_error(OpKind::kCast, {f32({2})}, {{"to", 3}}) == ErrorCode::kVerifyError);
}

TEST_CASE("ir/shape/broadcast_shapes of several shapes") {
  const Shape three[] = {{2, 1, 1}, {1, 3, 1}, {1, 1, 4}};
  CHECK(*broadcast_shapes(three) == Shape{2, 3, 4});
  CHECK(*broadcast_shapes(std::span<const Shape>{}) == Shape{});
  CHECK(broadcast_shapes(Shape{3}, Shape{4}).status().code() == ErrorCode::kShapeError);
}
