#include "cli/demo_command.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/ir/text.h"
#include "carve/ir/verify.h"
#include "carve/planner/graph_problem.h"
#include "carve/planner/strategy.h"
#include "carve/runtime/arena.h"

namespace carve::cli {
namespace {

// x -> layer_norm -> matmul+bias -> gelu -> matmul+bias -> residual add -> softmax
Result<ir::Graph> build_demo_graph() {
  using ir::DType;
  ir::GraphBuilder b("demo_block");
  const int64_t tokens = 8, dim = 32, hidden = 128;
  auto x = b.input("x", DType::kF32, {1, tokens, dim});
  auto ln_scale = b.constant("ln_scale", DType::kF32, {dim});
  auto ln_bias = b.constant("ln_bias", DType::kF32, {dim});
  auto w1 = b.constant("w1", DType::kF32, {dim, hidden});
  auto b1 = b.constant("b1", DType::kF32, {hidden});
  auto w2 = b.constant("w2", DType::kF32, {hidden, dim});
  auto b2 = b.constant("b2", DType::kF32, {dim});
  auto h = b.layer_norm(x, ln_scale, ln_bias);
  auto up = b.gelu(b.add(b.matmul(h, w1), b1));
  auto down = b.add(b.matmul(up, w2), b2);
  auto residual = b.add(x, down);
  auto flat = b.reshape(residual, {tokens, dim});
  auto probs = b.softmax(flat, -1);
  b.output(b.rename(probs, "probs"));
  return b.build();
}

}  // namespace

int run_builtin_demo(std::ostream& out, std::ostream& err) {
  auto graph = build_demo_graph();
  if (!graph.ok()) {
    fmt::print(err, "carve demo: {}\n", graph.status().to_string());
    return 1;
  }
  if (Status s = ir::verify(*graph); !s.ok()) {
    fmt::print(err, "carve demo: {}\n", s.to_string());
    return 1;
  }
  fmt::print(out, "== graph (text format, verified) ==\n{}\n", ir::print(*graph));

  auto order = ir::execution_order(*graph);
  auto life = order.ok() ? ir::lifetimes(*graph, *order) : Result<std::vector<ir::Lifetime>>(order.status());
  if (!life.ok()) {
    fmt::print(err, "carve demo: {}\n", life.status().to_string());
    return 1;
  }
  fmt::print(out, "== execution order ==\n");
  for (size_t step = 0; step < order->size(); ++step)
    fmt::print(out, "  step {:>2}: {}\n", step, ir::describe_node(*graph, (*order)[step]));
  fmt::print(out, "\n== tensor lifetimes [first step, last step] (-1 = before the first step) ==\n");
  for (const ir::Value& v : graph->values) {
    const ir::Lifetime& l = (*life)[static_cast<size_t>(v.id)];
    fmt::print(out, "  {:<14} {:<14} {:<13} [{:>2}, {:>2}]\n", v.name, v.type.to_string(),
               ir::value_kind_name(v.kind), l.first, l.last);
  }

  auto problem = planner::build_graph_problem(*graph, *order);
  if (!problem.ok()) {
    fmt::print(err, "carve demo: {}\n", problem.status().to_string());
    return 1;
  }
  auto strategy = planner::make_strategy("greedy-size");
  auto plan = strategy.ok() ? (*strategy)->plan(problem->problem, {}) : Result<planner::PlanResult>(strategy.status());
  if (!plan.ok()) {
    fmt::print(err, "carve demo: {}\n", plan.status().to_string());
    return 1;
  }
  const int64_t naive = [&] {
    int64_t sum = 0;
    for (const auto& buffer : problem->problem.buffers) sum += buffer.size;
    return sum;
  }();
  fmt::print(out, "\n== arena plan (greedy-size) ==\n");
  fmt::print(out, "  {} arena buffers, {} views folded, {} in place\n", problem->problem.buffers.size(),
             problem->num_views, problem->num_inplace);
  fmt::print(out, "  arena {} bytes, lower bound {} bytes, no reuse {} bytes\n", plan->plan.arena_bytes,
             planner::lower_bound_bytes(problem->problem), naive);

  runtime::CpuAllocator allocator;
  auto arena = runtime::materialize(problem->problem, plan->plan, allocator);
  if (!arena.ok()) {
    fmt::print(err, "carve demo: {}\n", arena.status().to_string());
    return 1;
  }
  fmt::print(out, "\n== arena as Storage + Buffer views ==\n");
  fmt::print(out, "  arena storage #{} of {} bytes\n", arena->storage_id().value, arena->arena_bytes());
  for (size_t i = 0; i < problem->problem.buffers.size(); ++i) {
    const runtime::Buffer& view = *arena->find(problem->problem.buffers[i].id);
    fmt::print(out, "  {:<14} buffer #{:<3} storage #{} offset {:>6} size {:>6}\n",
               problem->problem.buffers[i].id, view.id().value, view.storage_id().value, plan->plan.offsets[i], view.size());
  }
  return 0;
}

int run_demo_command(const DemoCommandOptions& options, std::ostream& out, std::ostream& err) {
#ifdef CARVE_HAVE_ONNX
  return run_pipeline_demo(options, out, err);
#else
  (void)options;
  fmt::print(out, "(this build has no ONNX importer: showing the plan of a built-in block instead of the "
                  "shipped model's pipeline)\n\n");
  return run_builtin_demo(out, err);
#endif
}

}  // namespace carve::cli
