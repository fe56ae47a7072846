// Memory-aware execution order: exact DP against brute force, heuristic validity.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <algorithm>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/planner/memory_order.h"

using namespace carve;
using ir::DType;

namespace {

bool is_topological(const ir::Graph& g, const std::vector<ir::NodeId>& order) {
  std::vector<int> step(static_cast<size_t>(g.num_nodes()), -1);
  for (size_t i = 0; i < order.size(); ++i) step[static_cast<size_t>(order[i])] = static_cast<int>(i);
  for (const ir::Node& n : g.nodes)
    for (ir::ValueId in : n.inputs) {
      ir::NodeId p = g.value(in).producer;
      if (p != ir::kNoNode && step[static_cast<size_t>(p)] >= step[static_cast<size_t>(n.id)]) return false;
    }
  return order.size() == static_cast<size_t>(g.num_nodes());
}

// Every topological order, by permutation (small graphs only).
int64_t brute_force_peak(const ir::Graph& g) {
  std::vector<ir::NodeId> order(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<ir::NodeId>(i);
  int64_t best = INT64_MAX;
  do {
    if (!is_topological(g, order)) continue;
    best = std::min(best, *planner::modelled_peak_bytes(g, order));
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

// Two branches: the given order computes both big intermediates before reducing either.
ir::Graph two_branch_graph() {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1024});
  auto big1 = b.exp(x);   // 4 KiB
  auto big2 = b.tanh(x);  // 4 KiB
  auto s1 = b.reduce_sum(big1, {0});
  auto s2 = b.reduce_sum(big2, {0});
  b.output(b.add(s1, s2));
  auto g = b.build();
  REQUIRE(g.ok());
  return std::move(*g);
}

}  // namespace

TEST_CASE("planner/order/memory order lowers the peak of two branches") {
  ir::Graph g = two_branch_graph();
  auto given = ir::execution_order(g);
  REQUIRE(given.ok());
  auto given_peak = planner::modelled_peak_bytes(g, *given);
  REQUIRE(given_peak.ok());
  CHECK(*given_peak == 8192 + 4);
  auto memory = planner::memory_aware_order(g);
  REQUIRE(memory.ok());
  CHECK(memory->exact);
  CHECK(is_topological(g, memory->order));
  CHECK(memory->peak_bytes == 4096 + 4 + 4);
  CHECK(*planner::modelled_peak_bytes(g, memory->order) == memory->peak_bytes);
}

TEST_CASE("planner/order/greedy heuristic gives a valid order for large graphs") {
  ir::Graph g = two_branch_graph();
  auto memory = planner::memory_aware_order(g, {.max_exact_nodes = 0});
  REQUIRE(memory.ok());
  CHECK_FALSE(memory->exact);
  CHECK(is_topological(g, memory->order));
  CHECK(memory->peak_bytes == *planner::modelled_peak_bytes(g, memory->order));
}

TEST_CASE("planner/order/exact order matches brute force on random graphs") {
  CHECK(rc::check("exact DP peak == min over all topological orders", [] {
    const int nodes = *rc::gen::inRange(1, 8);
    ir::GraphBuilder b;
    // Three sizes so that orders differ in what they keep live.
    std::vector<ir::ValueId> values{b.input("x4", DType::kF32, {4}), b.input("x16", DType::kF32, {16}),
                                    b.input("x64", DType::kF32, {64})};
    std::vector<int64_t> sizes{4, 16, 64};
    for (int i = 0; i < nodes; ++i) {
      const auto v = *rc::gen::inRange<size_t>(0, values.size());
      const auto w = *rc::gen::inRange<size_t>(0, values.size());
      const bool add = sizes[v] == sizes[w] && *rc::gen::arbitrary<bool>();
      values.push_back(add ? b.add(values[v], values[w]) : b.exp(values[v]));
      sizes.push_back(sizes[v]);
    }
    b.output(values.back());
    auto g = b.build();
    RC_ASSERT(g.ok());
    auto memory = planner::memory_aware_order(*g);
    RC_ASSERT(memory.ok());
    RC_ASSERT(memory->exact);
    RC_ASSERT(is_topological(*g, memory->order));
    RC_ASSERT(memory->peak_bytes == brute_force_peak(*g));
  }));
}
