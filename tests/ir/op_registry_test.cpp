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
  CHECK(op_name(OpKind::reduce_sum) == "reduce_sum");
  CHECK(op_name(OpKind::write_handle_at) == "write_handle_at");
}

TEST_CASE("ir/op/traits arity and flags") {
  CHECK(op_traits(OpKind::add).min_inputs == 2);
  CHECK(op_traits(OpKind::add).max_inputs == 2);
  CHECK(op_traits(OpKind::concat).max_inputs == kVariadic);
  CHECK(op_traits(OpKind::split).max_outputs == kVariadic);
  CHECK(op_traits(OpKind::gemm).min_inputs == 2);
  CHECK(op_traits(OpKind::gemm).max_inputs == 3);
  CHECK(op_traits(OpKind::read_handle).max_inputs == 0);
  CHECK(op_traits(OpKind::write_handle).max_outputs == 0);

  for (OpKind v :
       {OpKind::reshape, OpKind::flatten, OpKind::squeeze, OpKind::unsqueeze, OpKind::identity}) {
    CHECK(is_view(v));
    CHECK_FALSE(is_elementwise(v));
  }
  CHECK_FALSE(is_view(OpKind::transpose));
  for (OpKind e :
       {OpKind::relu, OpKind::clip, OpKind::add, OpKind::less, OpKind::where, OpKind::cast}) {
    CHECK(is_elementwise(e));
  }
  CHECK_FALSE(is_elementwise(OpKind::matmul));
  CHECK_FALSE(is_elementwise(OpKind::softmax));
  CHECK(is_state(OpKind::read_handle));
  CHECK(is_state(OpKind::write_handle_at));
  CHECK(is_sink(OpKind::write_handle));
  CHECK_FALSE(is_sink(OpKind::read_handle));
  CHECK(is_comparison(OpKind::greater_equal));
  CHECK_FALSE(is_comparison(OpKind::max));
  CHECK(is_unary_elementwise(OpKind::hard_sigmoid));
  CHECK(is_binary_elementwise(OpKind::not_equal));
  CHECK(is_reduction(OpKind::reduce_mean));
  CHECK(accepts_attr(OpKind::conv2d, "dilations"));
  CHECK_FALSE(accepts_attr(OpKind::max_pool, "count_include_pad"));
  CHECK(accepts_attr(OpKind::avg_pool, "count_include_pad"));
  CHECK_FALSE(accepts_attr(OpKind::relu, ""));
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
