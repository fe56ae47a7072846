#include "carve/planner/parallel_safe.h"

#include "carve/ir/order.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace carve::planner {
namespace {

using ir::NodeId;

// reach[n] has bit m set when m == n or m depends (transitively) on n.
std::vector<std::vector<uint64_t>> descendants(const ir::Graph& graph) {
  const auto n = static_cast<size_t>(graph.num_nodes());
  const size_t words = (n + 63) / 64;
  std::vector<std::vector<uint64_t>> reach(n, std::vector<uint64_t>(words, 0));
  // Builder/parser graphs have producers before consumers, so reverse id order is a
  // reverse topological order only if ids are topological; use explicit DFS order instead.
  std::vector<std::vector<NodeId>> succs(n);
  for (const ir::Node& node : graph.nodes)
    for (ir::ValueId in : node.inputs)
      if (NodeId p = graph.value(in).producer; p != ir::kNoNode) succs[static_cast<size_t>(p)].push_back(node.id);
  const auto state_preds = ir::state_predecessors(graph);  // handle order is a dependence too
  for (const ir::Node& node : graph.nodes)
    for (NodeId p : state_preds[static_cast<size_t>(node.id)]) succs[static_cast<size_t>(p)].push_back(node.id);
  std::vector<int> state(n, 0);  // 0 new, 1 open, 2 done
  std::vector<NodeId> post;
  for (size_t root = 0; root < n; ++root) {
    if (state[root]) continue;
    std::vector<std::pair<NodeId, size_t>> stack{{static_cast<NodeId>(root), 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const auto& out = succs[static_cast<size_t>(v)];
      if (next < out.size()) {
        NodeId s = out[next++];
        if (!state[static_cast<size_t>(s)]) {
          state[static_cast<size_t>(s)] = 1;
          stack.push_back({s, 0});
        }
        continue;
      }
      state[static_cast<size_t>(v)] = 2;
      post.push_back(v);
      stack.pop_back();
    }
  }
  for (NodeId v : post) {  // successors are finished before v
    auto& bits = reach[static_cast<size_t>(v)];
    bits[static_cast<size_t>(v) / 64] |= uint64_t{1} << (v % 64);
    for (NodeId s : succs[static_cast<size_t>(v)])
      for (size_t w = 0; w < words; ++w) bits[w] |= reach[static_cast<size_t>(s)][w];
  }
  return reach;
}

bool reaches(const std::vector<std::vector<uint64_t>>& reach, NodeId from, NodeId to) {
  return reach[static_cast<size_t>(from)][static_cast<size_t>(to) / 64] >> (to % 64) & 1;
}

bool intervals_overlap(const BufferRequest& a, const BufferRequest& b) { return a.start < b.end && b.start < a.end; }
bool bytes_overlap(int64_t a, int64_t a_size, int64_t b, int64_t b_size) {
  return a_size > 0 && b_size > 0 && a < b + b_size && b < a + a_size;
}

}  // namespace

Result<std::vector<BufferPair>> unordered_buffer_pairs(const ir::Graph& graph, const GraphProblem& problem) {
  if (graph.num_nodes() > ParallelSafeLimits::kMaxNodes)
    return Status(ErrorCode::kUnsupported, fmt::format("--parallel-safe handles graphs up to {} nodes, this one has {}",
                                                       ParallelSafeLimits::kMaxNodes, graph.num_nodes()));
  if (problem.values.size() != static_cast<size_t>(graph.num_values()))
    return Status(ErrorCode::kInvalidArgument, "graph problem was built from another graph");
  const auto buffers = problem.problem.buffers.size();
  // Per buffer: the nodes that touch its bytes (producers and readers of every member),
  // and its first writers: the producer of its root (every access of the buffer depends
  // on it), or for a concat view the producers of the concat's inputs.
  std::vector<std::vector<NodeId>> accesses(buffers);
  std::vector<std::vector<NodeId>> first_writers(buffers);
  for (const ir::Node& node : graph.nodes) {
    auto touch = [&](ir::ValueId v) {
      const ValuePlacement& p = problem.values[static_cast<size_t>(v)];
      if (p.placement == Placement::kArena && p.buffer >= 0) accesses[static_cast<size_t>(p.buffer)].push_back(node.id);
    };
    for (ir::ValueId v : node.inputs) touch(v);
    for (ir::ValueId v : node.outputs) touch(v);
  }
  for (size_t b = 0; b < buffers; ++b) {
    if (const ir::ValueId root = problem.buffer_root[b]; root != ir::kNoValue) {
      if (const ConcatView* view = concat_view_of(graph, problem, root)) {
        for (ir::ValueId in : graph.node(view->concat).inputs) first_writers[b].push_back(graph.value(in).producer);
      } else {
        first_writers[b].push_back(graph.value(root).producer);
      }
      continue;
    }
    // Scratch: used only by its kernel's nodes; the first of them (in DAG order) writes it.
    const auto& nodes = problem.scratch_nodes[b];
    accesses[b] = nodes;
    first_writers[b].push_back(nodes.front());
  }
  const auto reach = descendants(graph);
  auto before = [&](size_t a, size_t b) {  // every access of a happens-before each of b's first writes
    for (NodeId w : first_writers[b]) {
      if (w == ir::kNoNode) return false;  // a planned graph input: written before the run
      for (NodeId x : accesses[a])
        if (!reaches(reach, x, w) || x == w) return false;
    }
    return true;
  };
  std::vector<BufferPair> pairs;
  const auto& req = problem.problem.buffers;
  for (size_t a = 0; a < buffers; ++a)
    for (size_t b = a + 1; b < buffers; ++b) {
      if (intervals_overlap(req[a], req[b]) || req[a].size == 0 || req[b].size == 0) continue;
      const bool a_first = req[a].end <= req[b].start;
      if (a_first ? before(a, b) : before(b, a)) continue;
      pairs.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
    }
  return pairs;
}

Result<MemoryPlan> plan_with_conflicts(const Problem& problem, std::span<const BufferPair> extra) {
  CARVE_RETURN_IF_ERROR(check_problem(problem));
  const size_t n = problem.buffers.size();
  std::vector<std::vector<int32_t>> extra_of(n);
  for (auto [a, b] : extra) {
    if (a < 0 || b < 0 || static_cast<size_t>(a) >= n || static_cast<size_t>(b) >= n)
      return Status(ErrorCode::kInvalidArgument, fmt::format("conflict pair ({}, {}) is out of range", a, b));
    extra_of[static_cast<size_t>(a)].push_back(b);
    extra_of[static_cast<size_t>(b)].push_back(a);
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto& req = problem.buffers;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return req[a].size != req[b].size ? req[a].size > req[b].size : req[a].start < req[b].start;
  });
  MemoryPlan plan;
  plan.offsets.assign(n, -1);
  std::vector<bool> placed(n, false);
  std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, end) of conflicting placed buffers
  for (size_t i : order) {
    taken.clear();
    for (size_t j = 0; j < n; ++j)
      if (placed[j] && intervals_overlap(req[i], req[j]) && req[j].size > 0)
        taken.emplace_back(plan.offsets[j], plan.offsets[j] + req[j].size);
    for (int32_t j : extra_of[i])
      if (placed[static_cast<size_t>(j)] && req[static_cast<size_t>(j)].size > 0)
        taken.emplace_back(plan.offsets[static_cast<size_t>(j)],
                           plan.offsets[static_cast<size_t>(j)] + req[static_cast<size_t>(j)].size);
    std::sort(taken.begin(), taken.end());
    const int64_t align = req[i].alignment, size = req[i].size;
    auto align_up = [&](int64_t x) { return (x + align - 1) / align * align; };
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (auto [begin, end] : taken) {
      const int64_t at = align_up(cursor);
      if (begin - at >= size && begin - at < best_gap) {
        best = at;
        best_gap = begin - at;
      }
      cursor = std::max(cursor, end);
    }
    plan.offsets[i] = best >= 0 ? best : align_up(cursor);
    placed[i] = true;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + size);
  }
  return plan;
}

Status validate_with_conflicts(const Problem& problem, const MemoryPlan& plan, std::span<const BufferPair> extra) {
  CARVE_RETURN_IF_ERROR(validate_plan(problem, plan));
  for (auto [a, b] : extra) {
    const auto& x = problem.buffers[static_cast<size_t>(a)];
    const auto& y = problem.buffers[static_cast<size_t>(b)];
    if (bytes_overlap(plan.offsets[static_cast<size_t>(a)], x.size, plan.offsets[static_cast<size_t>(b)], y.size))
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("buffers '{}' and '{}' are not ordered by the graph but share bytes", x.id, y.id));
  }
  return Status();
}

int64_t count_sharing_pairs(const Problem& problem, const MemoryPlan& plan, std::span<const BufferPair> extra) {
  int64_t count = 0;
  for (auto [a, b] : extra)
    count += bytes_overlap(plan.offsets[static_cast<size_t>(a)], problem.buffers[static_cast<size_t>(a)].size,
                           plan.offsets[static_cast<size_t>(b)], problem.buffers[static_cast<size_t>(b)].size);
  return count;
}

}  // namespace carve::planner
