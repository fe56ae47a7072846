#include "carve/ir/order.h"

#include <doctest/doctest.h>

#include "carve/ir/text.h"
#include "ir_test_util.h"

using namespace carve;
using namespace carve::ir;
using namespace carve::ir::test;

namespace {

// x, w -> n0 a = matmul(x, w) -> n1 b = relu(a) -> n2 c = add(a, x) -> n3 d = neg(b);
// u is an unused constant; outputs c and b.
Graph diamond() {
  GraphBuilder bld;
  ValueId x = bld.input("x", DType::kF32, {2, 3});
  ValueId w = bld.constant("w", DType::kF32, {3, 3});
  ValueId a = bld.matmul(x, w);
  ValueId b = bld.relu(a);
  ValueId c = bld.add(a, x);
  bld.neg(b);
  bld.constant("u", DType::kF32, {1});
  bld.output(c);
  bld.output(b);
  return must_build(bld);
}

}  // namespace

TEST_CASE("ir/order/insertion order when already topological") {
  Graph g = diamond();
  Result<std::vector<NodeId>> order = execution_order(g);
  REQUIRE(order.ok());
  CHECK(*order == std::vector<NodeId>{0, 1, 2, 3});
}

TEST_CASE("ir/order/reorders a non topological graph deterministically") {
  // Node 0 reads node 2's output; nodes 1 and 2 are both ready first: the smaller id wins.
  Result<Graph> g = parse(
      "graph g {\n"
      "  input x: f32[2]\n"
      "  late = relu(e) -> r: f32[2]\n"
      "  first = neg(x) -> n: f32[2]\n"
      "  second = exp(x) -> e: f32[2]\n"
      "  output r, n\n"
      "}\n");
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  REQUIRE(verify(*g).ok());
  Result<std::vector<NodeId>> order = execution_order(*g);
  REQUIRE(order.ok());
  CHECK(*order == std::vector<NodeId>{1, 2, 0});
  Result<std::vector<Lifetime>> life = lifetimes(*g, *order);
  REQUIRE(life.ok());
  CHECK((*life)[3] == Lifetime{1, 2});  // e: produced at step 1 by `second`, read at step 2
  CHECK((*life)[1] == Lifetime{2, 2});  // r: output, produced by the last step
}

TEST_CASE("ir/order/cycle is an error naming the nodes") {
  Graph g = diamond();
  g.node(0).inputs = {3, 1};  // matmul reads relu's output
  Result<std::vector<NodeId>> order = execution_order(g);
  REQUIRE_FALSE(order.ok());
  CHECK(order.status().code() == ErrorCode::kVerifyError);
  CHECK(contains(
      order.status().message(),
      "cycle: node 'matmul_0' (matmul) -> node 'relu_1' (relu) -> node 'matmul_0' (matmul)"));
}

TEST_CASE("ir/order/lifetime conventions on a hand graph") {
  Graph g = diamond();
  std::vector<NodeId> order = *execution_order(g);
  Result<std::vector<Lifetime>> life = lifetimes(g, order);
  REQUIRE(life.ok());
  REQUIRE(life->size() == 7);
  const std::vector<Lifetime>& l = *life;
  CHECK(l[0] == Lifetime{kBeforeFirstStep, 2});  // input x: before step 0, last read by add
  CHECK(l[1] == Lifetime{-1, 0});                // const w: read by matmul only
  CHECK(l[2] == Lifetime{0, 2});                 // a: matmul's step to add's step
  CHECK(l[3] == Lifetime{1, 3});                 // b: output (end = 3), also read at 3
  CHECK(l[4] == Lifetime{2, 3});                 // c: output lives to the end
  CHECK(l[5] == Lifetime{3, 3});                 // d: never read, still written at 3
  CHECK(l[6] == Lifetime{-1, -1});               // u: unused constant
}

TEST_CASE("ir/order/lifetimes of inputs that are outputs and of an empty graph") {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {2});
  b.output(x);
  Graph g = must_build(b);
  Result<std::vector<Lifetime>> life = lifetimes(g, *execution_order(g));
  REQUIRE(life.ok());
  CHECK((*life)[0] == Lifetime{-1, -1});  // no steps: the end is step -1

  GraphBuilder b2;
  ValueId y = b2.input("y", DType::kF32, {2});
  b2.output(y);
  b2.output(b2.neg(y));
  Graph g2 = must_build(b2);
  life = lifetimes(g2, *execution_order(g2));
  REQUIRE(life.ok());
  CHECK((*life)[0] == Lifetime{-1, 0});  // output input lives to the end (step 0)
}

TEST_CASE("ir/order/lifetimes reject bad orders") {
  Graph g = diamond();
  CHECK(lifetimes(g, std::vector<NodeId>{0, 1, 2}).status().code() == ErrorCode::kInvalidArgument);
  CHECK(lifetimes(g, std::vector<NodeId>{0, 1, 1, 3}).status().code() ==
        ErrorCode::kInvalidArgument);
  CHECK(lifetimes(g, std::vector<NodeId>{0, 1, 2, 9}).status().code() ==
        ErrorCode::kInvalidArgument);
  Result<std::vector<Lifetime>> bad = lifetimes(g, std::vector<NodeId>{1, 0, 2, 3});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(contains(bad.status().message(), "not topological"));
  CHECK(contains(bad.status().message(), "node 'relu_1' (relu)"));
}

TEST_CASE("ir/order/compute_users and sinks in the order") {
  GraphBuilder b;
  b.handle("h", DType::kF32, {2});
  ValueId x = b.input("x", DType::kF32, {2});
  ValueId s = b.add(x, x);
  b.write_handle("h", s);
  b.output(b.neg(s));
  Graph g = must_build(b);
  std::vector<std::vector<NodeId>> users = compute_users(g);
  CHECK(users[0] == std::vector<NodeId>{0});  // add reads x twice: listed once
  CHECK(users[1] == std::vector<NodeId>{1, 2});
  CHECK(*execution_order(g) == std::vector<NodeId>{0, 1, 2});
  Result<std::vector<Lifetime>> life = lifetimes(g, *execution_order(g));
  REQUIRE(life.ok());
  CHECK((*life)[1] == Lifetime{0, 2});
}
