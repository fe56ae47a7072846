// Parallel-safe reuse: unordered buffers never share bytes.
#include <doctest/doctest.h>
#include <rapidcheck.h>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/planner/memory_order.h"
#include "carve/planner/parallel_safe.h"
#include "carve/planner/strategy.h"

using namespace carve;
using ir::DType;

namespace {

// x -> exp -> sum,  x -> tanh -> sum,  add. Run branch by branch, the two big
// intermediates have disjoint lifetimes although the branches are independent.
struct Branches {
  ir::Graph graph;
  planner::GraphProblem problem;
};

Branches branch_by_branch() {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {256});
  auto a = b.rename(b.exp(x), "a");
  auto sa = b.reduce_sum(a, {0});
  auto t = b.rename(b.tanh(x), "t");
  auto sb = b.reduce_sum(t, {0});
  b.output(b.add(sa, sb));
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  REQUIRE(order.ok());
  auto p = planner::build_graph_problem(*g, *order);
  REQUIRE(p.ok());
  return {std::move(*g), std::move(*p)};
}

int32_t buffer_of(const Branches& br, const char* name) {
  return br.problem.values[static_cast<size_t>(br.graph.find_value(name)->id)].buffer;
}

}  // namespace

TEST_CASE("planner/parallel/independent branches are unordered pairs") {
  Branches br = branch_by_branch();
  auto pairs = planner::unordered_buffer_pairs(br.graph, br.problem);
  REQUIRE(pairs.ok());
  const int32_t a = buffer_of(br, "a"), t = buffer_of(br, "t");
  const planner::BufferPair expected{std::min(a, t), std::max(a, t)};
  CHECK(std::find(pairs->begin(), pairs->end(), expected) != pairs->end());

  auto plain = (*planner::make_strategy("greedy-size"))->plan(br.problem.problem, {});
  REQUIRE(plain.ok());
  CHECK(planner::count_sharing_pairs(br.problem.problem, plain->plan, *pairs) >= 1);
  CHECK_FALSE(planner::validate_with_conflicts(br.problem.problem, plain->plan, *pairs).ok());

  auto safe = planner::plan_with_conflicts(br.problem.problem, *pairs);
  REQUIRE(safe.ok());
  CHECK(planner::validate_with_conflicts(br.problem.problem, *safe, *pairs).ok());
  CHECK(planner::count_sharing_pairs(br.problem.problem, *safe, *pairs) == 0);
  CHECK(safe->arena_bytes > plain->plan.arena_bytes);
}

TEST_CASE("planner/parallel/a chain has no unordered pairs") {
  ir::GraphBuilder b;
  auto v = b.input("x", DType::kF32, {64});
  for (int i = 0; i < 6; ++i) v = b.reduce_sum(b.concat({v, v}, 0), {0}, true);
  b.output(v);
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  auto p = planner::build_graph_problem(*g, *order);
  REQUIRE(p.ok());
  auto pairs = planner::unordered_buffer_pairs(*g, *p);
  REQUIRE(pairs.ok());
  CHECK(pairs->empty());
}

TEST_CASE("planner/parallel/conflict pairs out of range are rejected") {
  planner::Problem problem{{{"a", 8, 1, 0, 1}, {"b", 8, 1, 1, 2}}};
  std::vector<planner::BufferPair> bad{{0, 5}};
  CHECK(planner::plan_with_conflicts(problem, bad).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("planner/parallel/plans honour intervals and pairs on random graphs") {
  CHECK(rc::check("parallel-safe plans are valid and share no unordered pair", [] {
    ir::GraphBuilder b;
    std::vector<ir::ValueId> values{b.input("x", DType::kF32, {16})};
    const int nodes = *rc::gen::inRange(1, 25);
    for (int i = 0; i < nodes; ++i) {
      const auto v = values[*rc::gen::inRange<size_t>(0, values.size())];
      const auto w = values[*rc::gen::inRange<size_t>(0, values.size())];
      values.push_back(*rc::gen::arbitrary<bool>() ? b.add(v, w) : b.exp(v));
    }
    b.output(values.back());
    auto g = b.build();
    RC_ASSERT(g.ok());
    auto memory = planner::memory_aware_order(*g);
    RC_ASSERT(memory.ok());
    auto p = planner::build_graph_problem(*g, memory->order, {.inplace = *rc::gen::arbitrary<bool>()});
    RC_ASSERT(p.ok());
    auto pairs = planner::unordered_buffer_pairs(*g, *p);
    RC_ASSERT(pairs.ok());
    auto safe = planner::plan_with_conflicts(p->problem, *pairs);
    RC_ASSERT(safe.ok());
    RC_ASSERT(planner::validate_with_conflicts(p->problem, *safe, *pairs).ok());
  }));
}

// A concat view's buffer is first written by each input's producer, not by the concat:
// a buffer whose accesses all precede the concat but not those producers is unordered.
TEST_CASE("planner/parallel/a concat view's buffer is written by every input's producer") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1, 16});
  auto q = b.rename(b.neg(x), "q");      // step 0
  auto s = b.rename(b.exp(q), "s");      // step 1: q's last read
  auto a = b.rename(b.exp(x), "a");      // step 2: writes c's bytes, unordered with q
  auto t = b.rename(b.tanh(x), "t");     // step 3
  auto r = b.rename(b.sigmoid(s), "r");  // step 4
  b.output(b.neg(b.rename(b.concat({a, t, r}, 1), "c")));
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  REQUIRE(order.ok());
  auto p = planner::build_graph_problem(*g, *order, {.inplace = false});
  REQUIRE(p.ok());
  REQUIRE(p->concat_views.size() == 1);
  auto buffer = [&](const char* name) { return p->values[static_cast<size_t>(g->find_value(name)->id)].buffer; };
  const int32_t qb = buffer("q"), cb = buffer("c");
  REQUIRE(cb == buffer("a"));
  const auto& req = p->problem.buffers;
  REQUIRE(req[static_cast<size_t>(qb)].end <= req[static_cast<size_t>(cb)].start);  // disjoint lifetimes
  auto pairs = planner::unordered_buffer_pairs(*g, *p);
  REQUIRE(pairs.ok());
  const planner::BufferPair expected{std::min(qb, cb), std::max(qb, cb)};
  CHECK(std::find(pairs->begin(), pairs->end(), expected) != pairs->end());
  auto safe = planner::plan_with_conflicts(p->problem, *pairs);
  REQUIRE(safe.ok());
  CHECK(planner::count_sharing_pairs(p->problem, *safe, *pairs) == 0);
}
