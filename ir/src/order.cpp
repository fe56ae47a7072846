#include "carve/ir/order.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <queue>

namespace carve::ir {
namespace {

// definer[v] = the node listing v as an output (the last one if several), else kNoNode.
Result<std::vector<NodeId>> definers(const Graph& graph) {
  std::vector<NodeId> def(graph.values.size(), kNoNode);
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId v : graph.node(n).outputs) {
      if (!graph.has_value(v)) {
        return Status(
            ErrorCode::kVerifyError,
            fmt::format("{}: output refers to nonexistent value #{}", describe_node(graph, n), v));
      }
      def[static_cast<size_t>(v)] = n;
    }
  }
  return def;
}

// Names the nodes of one cycle among `stuck` (nodes Kahn could not schedule): walk back
// through stuck producers until a node repeats.
std::string describe_cycle(const Graph& graph, const std::vector<NodeId>& def,
                           const std::vector<std::vector<NodeId>>& state_preds,
                           const std::vector<bool>& stuck) {
  NodeId start = 0;
  while (!stuck[static_cast<size_t>(start)]) ++start;
  std::vector<int> seen_at(graph.nodes.size(), -1);
  std::vector<NodeId> path;
  NodeId n = start;
  while (seen_at[static_cast<size_t>(n)] < 0) {
    seen_at[static_cast<size_t>(n)] = static_cast<int>(path.size());
    path.push_back(n);
    NodeId next = kNoNode;
    for (ValueId v : graph.node(n).inputs) {
      NodeId p = graph.has_value(v) ? def[static_cast<size_t>(v)] : kNoNode;
      if (p != kNoNode && stuck[static_cast<size_t>(p)]) {
        next = p;
        break;
      }
    }
    for (NodeId p : state_preds[static_cast<size_t>(n)])
      if (next == kNoNode && stuck[static_cast<size_t>(p)]) next = p;
    if (next != kNoNode) n = next;
  }
  // path[seen_at[n]..] is the cycle, walked consumer -> producer. Print it in data-flow
  // order (producer first), starting from its smallest node id so the text is stable.
  std::vector<NodeId> cycle(path.rbegin(), path.rend() - seen_at[static_cast<size_t>(n)]);
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  cycle.push_back(cycle.front());
  std::vector<std::string> names;
  for (NodeId id : cycle) names.push_back(describe_node(graph, id));
  return fmt::format("{}", fmt::join(names, " -> "));
}

}  // namespace

std::vector<std::vector<NodeId>> state_predecessors(const Graph& graph) {
  std::vector<std::vector<NodeId>> preds(graph.nodes.size());
  std::map<std::string, NodeId, std::less<>> last_on_handle;
  for (const Node& node : graph.nodes) {
    if (!is_state(node.op)) continue;
    auto attr = node.attrs.find("handle");
    if (attr == node.attrs.end() || !attr->second.is_string()) continue;  // the verifier reports it
    auto [it, first] = last_on_handle.try_emplace(attr->second.as_string(), node.id);
    if (!first) {
      preds[static_cast<size_t>(node.id)].push_back(it->second);
      it->second = node.id;
    }
  }
  return preds;
}

Result<std::vector<NodeId>> execution_order(const Graph& graph) {
  CARVE_ASSIGN_OR_RETURN(std::vector<NodeId> def, definers(graph));
  size_t n = graph.nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<NodeId>> dependents(n);
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    for (ValueId v : graph.node(id).inputs) {
      if (!graph.has_value(v)) {
        return Status(
            ErrorCode::kVerifyError,
            fmt::format("{}: input refers to nonexistent value #{}", describe_node(graph, id), v));
      }
      NodeId p = def[static_cast<size_t>(v)];
      if (p == kNoNode) continue;  // inputs and constants are ready from the start
      ++pending[static_cast<size_t>(id)];
      dependents[static_cast<size_t>(p)].push_back(id);
    }
  }
  const std::vector<std::vector<NodeId>> state_preds = state_predecessors(graph);
  for (NodeId id = 0; id < graph.num_nodes(); ++id)
    for (NodeId p : state_preds[static_cast<size_t>(id)]) {
      ++pending[static_cast<size_t>(id)];
      dependents[static_cast<size_t>(p)].push_back(id);
    }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (pending[static_cast<size_t>(id)] == 0) ready.push(id);
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (NodeId d : dependents[static_cast<size_t>(id)]) {
      if (--pending[static_cast<size_t>(d)] == 0) ready.push(d);
    }
  }
  if (order.size() == n) return order;
  std::vector<bool> stuck(n, false);
  for (size_t i = 0; i < n; ++i) stuck[i] = pending[i] > 0;
  return Status(ErrorCode::kVerifyError,
                fmt::format("cycle: {}", describe_cycle(graph, def, state_preds, stuck)));
}

Result<std::vector<Lifetime>> lifetimes(const Graph& graph, std::span<const NodeId> order) {
  CARVE_ASSIGN_OR_RETURN(std::vector<NodeId> def, definers(graph));
  if (order.size() != graph.nodes.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("order has {} steps but the graph has {} nodes", order.size(),
                              graph.nodes.size()));
  }
  std::vector<int64_t> step_of(graph.nodes.size(), -1);
  for (size_t s = 0; s < order.size(); ++s) {
    NodeId id = order[s];
    if (!graph.has_node(id) || step_of[static_cast<size_t>(id)] >= 0) {
      return Status(
          ErrorCode::kInvalidArgument,
          fmt::format("order step {} names node #{}, which is out of range or repeated", s, id));
    }
    step_of[static_cast<size_t>(id)] = static_cast<int64_t>(s);
  }

  std::vector<Lifetime> life(graph.values.size());
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    NodeId p = def[static_cast<size_t>(v)];
    if (p == kNoNode) {
      if (graph.value(v).kind == ValueKind::kIntermediate) {
        return Status(ErrorCode::kVerifyError,
                      fmt::format("{} is never defined", describe_value(graph, v)));
      }
      continue;  // input/constant: [-1, -1] until used
    }
    int64_t s = step_of[static_cast<size_t>(p)];
    life[static_cast<size_t>(v)] = Lifetime{s, s};
  }
  for (size_t s = 0; s < order.size(); ++s) {
    const Node& node = graph.node(order[s]);
    for (ValueId v : node.inputs) {
      if (!graph.has_value(v)) {
        return Status(ErrorCode::kVerifyError,
                      fmt::format("{}: input refers to nonexistent value #{}",
                                  describe_node(graph, order[s]), v));
      }
      Lifetime& l = life[static_cast<size_t>(v)];
      if (l.first >= static_cast<int64_t>(s)) {
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("order is not topological: {} at step {} reads {} before it "
                                  "is produced",
                                  describe_node(graph, order[s]), s, describe_value(graph, v)));
      }
      l.last = std::max(l.last, static_cast<int64_t>(s));
    }
  }
  int64_t end = static_cast<int64_t>(order.size()) - 1;
  for (ValueId v : graph.outputs) {
    if (graph.has_value(v))
      life[static_cast<size_t>(v)].last = std::max(end, life[static_cast<size_t>(v)].last);
  }
  return life;
}

}  // namespace carve::ir
