// State ops on one handle keep their node order in execution_order.
#include <doctest/doctest.h>

#include <algorithm>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"

using namespace carve;
using ir::DType;

TEST_CASE("ir/order/state ops on one handle keep node order") {
  ir::GraphBuilder b;
  b.handle("kv", DType::kF32, {4, 2});
  b.handle("other", DType::kF32, {2});
  auto x = b.input("x", DType::kF32, {1, 2});
  auto pos = b.input("pos", DType::kI64, {});
  // The write comes first in node order but has a longer data chain than the read.
  auto slow = b.exp(b.exp(b.exp(x)));
  const ir::NodeId write = b.write_handle_at("kv", slow, pos, 0);
  auto read = b.read_handle("kv");
  auto unrelated = b.read_handle("other");
  b.output(b.reduce_sum(read, {0}, false));
  b.output(b.exp(unrelated));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto preds = ir::state_predecessors(*g);
  const ir::NodeId read_node = g->value(read).producer;
  REQUIRE(preds[static_cast<size_t>(read_node)].size() == 1);
  CHECK(preds[static_cast<size_t>(read_node)][0] == write);
  CHECK(preds[static_cast<size_t>(g->value(unrelated).producer)].empty());
  auto order = ir::execution_order(*g);
  REQUIRE(order.ok());
  auto at = [&](ir::NodeId n) { return std::find(order->begin(), order->end(), n) - order->begin(); };
  CHECK(at(write) < at(read_node));
}
