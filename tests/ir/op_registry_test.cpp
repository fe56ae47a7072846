#include <doctest/doctest.h>

#include "carve/ir/op.h"
#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

TEST_CASE("ir/op/name round trip for every op") {
  CHECK(all_ops().size() == static_cast<size_t>(kNumOps));
  for (OpKind op : all_ops()) {
    Result<OpKind> back = op_from_name(op_name(op));
    REQUIRE(back.ok());
    CHECK(*back == op);
    CHECK(op_traits(op).kind == op);
  }
  CHECK(op_name(OpKind::kReduceSum) == "reduce_sum");
  CHECK(op_name(OpKind::kWriteHandleAt) == "write_handle_at");
}

TEST_CASE("ir/op/traits arity and flags") {
  CHECK(op_traits(OpKind::kAdd).min_inputs == 2);
  CHECK(op_traits(OpKind::kAdd).max_inputs == 2);
  CHECK(op_traits(OpKind::kConcat).max_inputs == kVariadic);
  CHECK(op_traits(OpKind::kSplit).max_outputs == kVariadic);
  CHECK(op_traits(OpKind::kGemm).min_inputs == 2);
  CHECK(op_traits(OpKind::kGemm).max_inputs == 3);
  CHECK(op_traits(OpKind::kReadHandle).max_inputs == 0);
  CHECK(op_traits(OpKind::kWriteHandle).max_outputs == 0);

  for (OpKind v :
       {OpKind::kReshape, OpKind::kFlatten, OpKind::kSqueeze, OpKind::kUnsqueeze, OpKind::kIdentity}) {
    CHECK(is_view(v));
    CHECK_FALSE(is_elementwise(v));
  }
  CHECK_FALSE(is_view(OpKind::kTranspose));
  for (OpKind e :
       {OpKind::kRelu, OpKind::kClip, OpKind::kAdd, OpKind::kLess, OpKind::kWhere, OpKind::kCast}) {
    CHECK(is_elementwise(e));
  }
  CHECK_FALSE(is_elementwise(OpKind::kMatmul));
  CHECK_FALSE(is_elementwise(OpKind::kSoftmax));
  CHECK(is_state(OpKind::kReadHandle));
  CHECK(is_state(OpKind::kWriteHandleAt));
  CHECK(is_sink(OpKind::kWriteHandle));
  CHECK_FALSE(is_sink(OpKind::kReadHandle));
  CHECK(is_comparison(OpKind::kGreaterEqual));
  CHECK_FALSE(is_comparison(OpKind::kMax));
  CHECK(is_unary_elementwise(OpKind::kHardSigmoid));
  // the rounding and trigonometric ops sit in the unary range; fmod is binary
  for (OpKind u : {OpKind::kFloor, OpKind::kRound, OpKind::kTrunc, OpKind::kSin, OpKind::kAtanh}) {
    CAPTURE(op_name(u));
    CHECK(is_unary_elementwise(u));
    CHECK(is_elementwise(u));
    CHECK_FALSE(is_binary_elementwise(u));
  }
  CHECK(is_binary_elementwise(OpKind::kFmod));
  CHECK_FALSE(is_comparison(OpKind::kFmod));
  CHECK_FALSE(is_unary_elementwise(OpKind::kFmod));
  CHECK(op_traits(OpKind::kFmod).min_inputs == 2);
  CHECK(*op_from_name("round") == OpKind::kRound);
  CHECK(*op_from_name("acosh") == OpKind::kAcosh);
  CHECK(op_name(OpKind::kFmod) == "fmod");
  CHECK(is_binary_elementwise(OpKind::kNotEqual));
  CHECK(is_reduction(OpKind::kReduceMean));
  CHECK(is_reduction(OpKind::kReduceProd));
  CHECK(op_name(OpKind::kReduceProd) == "reduce_prod");
  for (OpKind shift : {OpKind::kBitShiftLeft, OpKind::kBitShiftRight}) {
    CHECK(is_binary_elementwise(shift));
    CHECK(is_elementwise(shift));
    CHECK_FALSE(is_comparison(shift));
  }
  CHECK(*op_from_name("bit_shift_left") == OpKind::kBitShiftLeft);
  CHECK(*op_from_name("bit_shift_right") == OpKind::kBitShiftRight);
  CHECK_FALSE(is_reduction(OpKind::kArgMax));  // not a reduce_* (no axes list)
  CHECK(op_from_name("arg_min").value() == OpKind::kArgMin);
  CHECK(op_from_name("gather_elements").value() == OpKind::kGatherElements);
  CHECK(accepts_attr(OpKind::kArgMax, "select_last_index"));
  CHECK_FALSE(accepts_attr(OpKind::kArgMax, "axes"));
  CHECK_FALSE(is_view(OpKind::kGatherElements));
  CHECK(op_from_name("gather_nd").value() == OpKind::kGatherNd);
  CHECK(op_from_name("scatter_nd").value() == OpKind::kScatterNd);
  CHECK(op_from_name("top_k").value() == OpKind::kTopK);
  CHECK(op_traits(OpKind::kTopK).min_outputs == 2);
  CHECK(op_traits(OpKind::kScatterNd).min_inputs == 3);
  CHECK(accepts_attr(OpKind::kScatterNd, "reduction"));
  CHECK_FALSE(accepts_attr(OpKind::kTopK, "sorted"));  // always sorted
  CHECK(accepts_attr(OpKind::kConv2d, "dilations"));
  CHECK_FALSE(accepts_attr(OpKind::kMaxPool, "count_include_pad"));
  CHECK(accepts_attr(OpKind::kAvgPool, "count_include_pad"));
  CHECK_FALSE(accepts_attr(OpKind::kRelu, ""));
}

TEST_CASE("ir/op/unknown name and invalid enum") {
  Result<OpKind> r = op_from_name("conv3d");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kNotFound);
  auto bad = static_cast<OpKind>(999);
  CHECK_FALSE(is_valid_op(bad));
  CHECK(op_name(bad) == "?");
  CHECK_FALSE(is_view(bad));
  CHECK_FALSE(is_elementwise(bad));
  CHECK(infer_error(bad, {}) == ErrorCode::kVerifyError);
}
