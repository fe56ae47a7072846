// Liveness from graphs: views folded into sources, in-place reuse, what stays out of the arena.
#include <doctest/doctest.h>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/planner/graph_problem.h"
#include "carve/planner/strategy.h"

using namespace carve;
using ir::DType;

namespace {

planner::GraphProblem plan_graph(const ir::Graph& g, planner::GraphPlanOptions options = {}) {
  auto order = ir::execution_order(g);
  REQUIRE(order.ok());
  auto problem = planner::build_graph_problem(g, *order, options);
  REQUIRE_MESSAGE(problem.ok(), problem.status().to_string());
  return std::move(*problem);
}

const planner::ValuePlacement& placement(const planner::GraphProblem& p, const ir::Graph& g, const char* name) {
  const ir::Value* v = g.find_value(name);
  REQUIRE(v != nullptr);
  return p.values[static_cast<size_t>(v->id)];
}

}  // namespace

TEST_CASE("planner/graph/views alias their source and extend its lifetime") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4, 8});
  auto a = b.rename(b.exp(x), "a");                    // step 0
  auto r = b.rename(b.reshape(a, {32}), "r");          // step 1: view of a
  auto f = b.rename(b.flatten(b.unsqueeze(r, {0}), 1), "f");  // steps 2, 3: views of a
  auto y = b.rename(b.tanh(x), "y");                   // step 4
  auto z = b.rename(b.add(b.reshape(f, {4, 8}), y), "z");  // steps 5, 6
  b.output(z);
  auto g = b.build();
  REQUIRE(g.ok());
  auto p = plan_graph(*g, {.inplace = false});
  CHECK(p.num_views == 4);
  CHECK(placement(p, *g, "r").root == a);
  CHECK(placement(p, *g, "r").is_view);
  CHECK(placement(p, *g, "f").buffer == placement(p, *g, "a").buffer);
  // Only a and y need arena memory; x is an input, z an output.
  REQUIRE(p.problem.buffers.size() == 2);
  const auto& a_buffer = p.problem.buffers[static_cast<size_t>(placement(p, *g, "a").buffer)];
  CHECK(a_buffer.id == "a");
  CHECK(a_buffer.size == 128);
  CHECK(a_buffer.start == 1);  // produced at step 0
  CHECK(a_buffer.end == 8);    // last alias read at step 6: [1, 8)
  CHECK(placement(p, *g, "x").placement == planner::Placement::kInput);
  CHECK(placement(p, *g, "z").placement == planner::Placement::kOutput);
}

TEST_CASE("planner/graph/elementwise output reuses a dying input in place") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {16});
  auto a = b.rename(b.exp(x), "a");
  auto c = b.rename(b.relu(a), "c");       // a dies here: c takes a's bytes
  auto d = b.rename(b.mul(c, c), "d");     // c dies here: d takes them too
  auto e = b.rename(b.add(d, x), "e");
  b.output(b.rename(b.sigmoid(e), "out"));
  auto g = b.build();
  REQUIRE(g.ok());

  auto with = plan_graph(*g);
  CHECK(with.num_inplace == 3);
  CHECK(placement(with, *g, "c").root == a);
  CHECK(placement(with, *g, "e").root == a);
  CHECK(placement(with, *g, "c").is_inplace);
  CHECK(with.problem.buffers.size() == 1);

  auto without = plan_graph(*g, {.inplace = false});
  CHECK(without.num_inplace == 0);
  CHECK(without.problem.buffers.size() == 4);
  CHECK(planner::lower_bound_bytes(with.problem) < planner::lower_bound_bytes(without.problem));
}

TEST_CASE("planner/graph/in place needs a dying same-size arena input") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4, 4});
  auto small = b.rename(b.exp(b.input("s", DType::kF32, {4})), "small");
  auto a = b.rename(b.exp(x), "a");
  auto bcast = b.rename(b.add(a, small), "bcast");  // a dies, same size: in place on a
  auto keep = b.rename(b.exp(bcast), "keep");       // bcast still read below: no in place
  auto both = b.rename(b.add(keep, bcast), "both");
  auto from_input = b.rename(b.neg(x), "from_input");  // x is a graph input: never reused
  b.output(b.add(both, from_input));
  auto g = b.build();
  REQUIRE(g.ok());
  auto p = plan_graph(*g);
  CHECK(placement(p, *g, "bcast").is_inplace);
  CHECK(placement(p, *g, "bcast").root == a);
  CHECK_FALSE(placement(p, *g, "keep").is_inplace);
  CHECK(placement(p, *g, "both").is_inplace);  // keep dies at "both" and has its size
  CHECK_FALSE(placement(p, *g, "from_input").is_inplace);
  CHECK(placement(p, *g, "small").root == small);
}

TEST_CASE("planner/graph/contiguous slices are views at a byte offset") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4, 3, 5});
  auto a = b.rename(b.exp(x), "a");
  auto rows = b.rename(b.slice(a, {1}, {3}, {0}), "rows");          // a[1:3]: contiguous
  auto one = b.rename(b.slice(a, {2, 1}, {3, 2}, {0, 1}), "one");   // a[2, 1:2, :]: contiguous
  auto cols = b.rename(b.slice(a, {1}, {3}, {2}), "cols");          // a[:, :, 1:3]: strided
  b.output(b.exp(rows));
  b.output(b.exp(one));
  b.output(b.exp(cols));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto p = plan_graph(*g);
  CHECK(placement(p, *g, "rows").is_view);
  CHECK(placement(p, *g, "rows").byte_offset == 1 * 15 * 4);
  CHECK(placement(p, *g, "one").is_view);
  CHECK(placement(p, *g, "one").byte_offset == (2 * 15 + 1 * 5) * 4);
  CHECK_FALSE(placement(p, *g, "cols").is_view);
}

TEST_CASE("planner/graph/a view that is a graph output is materialised") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 3});
  auto a = b.rename(b.exp(x), "a");
  b.output(b.rename(b.reshape(a, {6}), "flat"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto p = plan_graph(*g);
  CHECK(p.num_views == 0);
  CHECK(placement(p, *g, "flat").placement == planner::Placement::kOutput);
  CHECK(placement(p, *g, "a").placement == planner::Placement::kArena);
}

TEST_CASE("planner/graph/options plan inputs and outputs into the arena") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {8});
  auto a = b.exp(x);
  b.output(b.rename(b.relu(a), "y"));
  auto g = b.build();
  REQUIRE(g.ok());
  auto p = plan_graph(*g, {.inplace = false, .plan_inputs = true, .plan_outputs = true});
  REQUIRE(p.problem.buffers.size() == 3);
  CHECK(p.problem.buffers[0].id == "x");
  CHECK(p.problem.buffers[0].start == 0);  // before the first step
  const auto& y = p.problem.buffers[static_cast<size_t>(placement(p, *g, "y").buffer)];
  CHECK(y.end == 3);                        // to the end of the 2-step run
  for (const auto& buffer : p.problem.buffers) CHECK(buffer.alignment == 64);
}

TEST_CASE("planner/graph/bad execution orders are rejected") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {8});
  b.output(b.relu(b.exp(x)));
  auto g = b.build();
  REQUIRE(g.ok());
  std::vector<ir::NodeId> duplicate{0, 0};
  CHECK(planner::build_graph_problem(*g, duplicate).status().code() == ErrorCode::kInvalidArgument);
  std::vector<ir::NodeId> short_order{0};
  CHECK(planner::build_graph_problem(*g, short_order).status().code() == ErrorCode::kInvalidArgument);
  std::vector<ir::NodeId> backwards{1, 0};
  CHECK_FALSE(planner::build_graph_problem(*g, backwards).ok());
}

TEST_CASE("planner/graph/fused group keeps its inputs live while its outputs are written") {
  // t = exp(x); m = matmul(t, w) -> s = mul(m, k) fused: s is written while the kernel
  // still reads t, so s must not take t's bytes even though t's last reader (matmul)
  // comes before mul in the order.
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {2, 8, 8});
  auto w = b.input("w", DType::kF32, {2, 8, 8});
  auto k = b.input("k", DType::kF32, {2, 8, 8});
  auto t = b.rename(b.exp(x), "t");                  // step 0
  auto m = b.rename(b.matmul(t, w), "m");            // step 1
  auto s = b.rename(b.mul(m, k), "s");               // step 2
  b.output(b.rename(b.neg(s), "y"));                 // step 3
  auto g = b.build();
  REQUIRE(g.ok());
  planner::GraphPlanOptions options;
  options.unstored.assign(static_cast<size_t>(g->num_values()), false);
  options.unstored[static_cast<size_t>(m)] = true;
  options.fused_groups = {{g->value(m).producer, g->value(s).producer}};
  auto p = plan_graph(*g, options);
  const auto& tb = p.problem.buffers[static_cast<size_t>(placement(p, *g, "t").buffer)];
  const auto& sb = p.problem.buffers[static_cast<size_t>(placement(p, *g, "s").buffer)];
  CHECK(placement(p, *g, "m").placement == planner::Placement::kNone);
  CHECK(tb.end == 4);    // read by the group, which ends at step 2: [1, 4)
  CHECK(sb.start == 2);  // written from the group's first step (1): [2, ...)
  CHECK(tb.start < sb.end);
  CHECK(sb.start < tb.end);  // overlapping lifetimes: no plan may share their bytes
  CHECK_FALSE(placement(p, *g, "s").is_inplace);

  // Without the groups the same graph lets s reuse t's bytes: the rule is what matters.
  planner::GraphPlanOptions plain;
  plain.unstored = options.unstored;
  auto q = plan_graph(*g, plain);
  CHECK(q.problem.buffers[static_cast<size_t>(placement(q, *g, "t").buffer)].end == 3);
}

TEST_CASE("planner/graph/in place inside a fused group only over elementwise readers") {
  // a = exp(x); y = add(matmul(a, a), a) fused (matmul + epilogue): a dies in the group and
  // has y's shape, but the matmul reads all of a: no in place. In a pure elementwise
  // group (z = add(neg(c), c)) c may be taken over.
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {8, 8});
  auto a = b.rename(b.exp(x), "a");
  auto mm = b.matmul(a, a);
  auto y = b.rename(b.add(mm, a), "y");
  auto c = b.rename(b.exp(y), "c");
  auto n = b.neg(c);
  auto z = b.rename(b.add(n, c), "z");
  b.output(b.rename(b.tanh(z), "out"));
  auto g = b.build();
  REQUIRE(g.ok());
  planner::GraphPlanOptions options;
  options.unstored.assign(static_cast<size_t>(g->num_values()), false);
  options.unstored[static_cast<size_t>(mm)] = true;
  options.unstored[static_cast<size_t>(n)] = true;
  options.fused_groups = {{g->value(mm).producer, g->value(y).producer},
                          {g->value(n).producer, g->value(z).producer}};
  auto p = plan_graph(*g, options);
  CHECK_FALSE(placement(p, *g, "y").is_inplace);
  CHECK(placement(p, *g, "z").is_inplace);
  CHECK(placement(p, *g, "z").buffer == placement(p, *g, "c").buffer);
}

TEST_CASE("planner/graph/fused groups are checked") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4});
  b.output(b.neg(b.exp(x)));
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  REQUIRE(order.ok());
  planner::GraphPlanOptions options;
  options.fused_groups = {{0, 1}, {1}};
  auto p = planner::build_graph_problem(*g, *order, options);
  CHECK(p.status().code() == ErrorCode::kInvalidArgument);
  options.fused_groups = {{0, 7}};
  CHECK(planner::build_graph_problem(*g, *order, options).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("planner/graph/no in place over a residual inside a matmul epilogue group") {
  // y = add(matmul(a, w), r) fused: r is read only by the elementwise epilogue with y's
  // shape, but the kernel accumulates K blocks in its output, so y must not take r's bytes.
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {8, 8});
  auto w = b.input("w", DType::kF32, {8, 8});
  auto a = b.rename(b.exp(x), "a");
  auto r = b.rename(b.tanh(x), "r");
  auto mm = b.matmul(a, w);
  auto y = b.rename(b.add(mm, r), "y");
  b.output(b.rename(b.neg(y), "out"));
  auto g = b.build();
  REQUIRE(g.ok());
  planner::GraphPlanOptions options;
  options.unstored.assign(static_cast<size_t>(g->num_values()), false);
  options.unstored[static_cast<size_t>(mm)] = true;
  options.fused_groups = {{g->value(mm).producer, g->value(y).producer}};
  auto p = plan_graph(*g, options);
  CHECK_FALSE(placement(p, *g, "y").is_inplace);
  CHECK(placement(p, *g, "y").buffer != placement(p, *g, "r").buffer);
  // Unfused, the add may take over r.
  planner::GraphPlanOptions plain;
  CHECK(plan_graph(*g, plain).values[static_cast<size_t>(y)].is_inplace);
}

TEST_CASE("planner/graph/concat inputs are written into the concat's output") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1, 4, 2, 2});  // 64 bytes: every slice stays aligned
  auto s = b.rename(b.sigmoid(x), "s");                // step 0
  auto a = b.rename(b.exp(s), "a");                    // step 1
  auto t = b.rename(b.tanh(x), "t");                   // step 2
  auto c = b.rename(b.concat({a, t}, 1), "c");         // step 3: no kernel
  b.output(b.rename(b.neg(c), "y"));                   // step 4
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto p = plan_graph(*g);
  REQUIRE(p.concat_views.size() == 1);
  CHECK(p.concat_views[0].input_offsets == std::vector<int64_t>{0, 64});
  CHECK(p.num_views == 1);
  CHECK(placement(p, *g, "c").is_view);
  CHECK(placement(p, *g, "c").root == c);
  CHECK(placement(p, *g, "a").root == c);
  CHECK(placement(p, *g, "a").byte_offset == 0);
  CHECK_FALSE(placement(p, *g, "a").is_view);  // its producer still runs, into the slice
  CHECK_FALSE(placement(p, *g, "a").is_inplace);  // a dying s would otherwise give a its bytes
  CHECK(placement(p, *g, "t").root == c);
  CHECK(placement(p, *g, "t").byte_offset == 64);
  CHECK(placement(p, *g, "t").buffer == placement(p, *g, "c").buffer);
  // s and c: c lives from a's step (1) to its last read (4).
  REQUIRE(p.problem.buffers.size() == 2);
  const auto& c_buffer = p.problem.buffers[static_cast<size_t>(placement(p, *g, "c").buffer)];
  CHECK(c_buffer.size == 128);
  CHECK(c_buffer.start == 2);
  CHECK(c_buffer.end == 6);
  REQUIRE(planner::concat_view_of(*g, p, c) != nullptr);
  CHECK(planner::concat_view_of(*g, p, a) == nullptr);

  auto copies = plan_graph(*g, {.concat_views = false});
  CHECK(copies.concat_views.empty());
  CHECK_FALSE(placement(copies, *g, "c").is_view);
  CHECK(placement(copies, *g, "t").root == t);
}

TEST_CASE("planner/graph/concats whose inputs cannot be slices stay copies") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1, 16});  // 64 bytes
  auto m = b.input("m", DType::kF32, {2, 16});
  auto a = b.rename(b.exp(x), "a");
  auto t = b.rename(b.tanh(x), "t");
  auto e = b.rename(b.exp(m), "e");
  auto u = b.rename(b.neg(m), "u");
  auto r = b.rename(b.reshape(b.exp(x), {1, 16}), "r");
  auto odd = b.rename(b.exp(b.input("o", DType::kF32, {1, 3})), "odd");  // 12 bytes
  auto taken = b.rename(b.concat({a, t}, 1), "taken");  // a view: claims a and t
  auto again = b.rename(b.concat({t, x}, 1), "again");  // t is taken, x a graph input
  auto strided = b.rename(b.concat({e, u}, 1), "strided");  // axis 0 has extent 2
  auto of_view = b.rename(b.concat({r, a}, 1), "of_view");  // r is a reshape view
  auto unaligned = b.rename(b.concat({odd, b.exp(x)}, 1), "unaligned");  // second slice at 12 bytes
  auto twice = b.rename(b.concat({b.sigmoid(x), b.sigmoid(x)}, 1), "twice");
  auto outside = b.concat({b.neg(x), b.abs(x)}, 1);  // the graph's output: caller memory
  for (auto v : {taken, again, strided, of_view, unaligned, twice}) b.output(b.exp(v));
  b.output(b.rename(outside, "outside"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto p = plan_graph(*g);
  REQUIRE(p.concat_views.size() == 2);  // taken and twice (two distinct sigmoid values)
  CHECK(placement(p, *g, "taken").is_view);
  CHECK(placement(p, *g, "twice").is_view);
  for (const char* name : {"again", "strided", "of_view", "unaligned", "outside"}) {
    CAPTURE(name);
    CHECK_FALSE(placement(p, *g, name).is_view);
  }
  CHECK(placement(p, *g, "e").root == e);
  CHECK(placement(p, *g, "odd").root == odd);
}

TEST_CASE("planner/graph/a value read twice by one concat stays a copy") {
  ir::GraphBuilder b;
  auto x = b.input("x", DType::kF32, {1, 16});
  auto a = b.rename(b.exp(x), "a");
  b.output(b.exp(b.rename(b.concat({a, a}, 1), "c")));
  auto g = b.build();
  REQUIRE(g.ok());
  auto p = plan_graph(*g);
  CHECK(p.concat_views.empty());
  CHECK(placement(p, *g, "a").root == a);
}
