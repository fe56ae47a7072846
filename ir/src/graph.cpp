#include "carve/ir/graph.h"

#include <fmt/format.h>

#include <algorithm>

namespace carve::ir {

std::string_view value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInput:
      return "input";
    case ValueKind::kConstant:
      return "const";
    case ValueKind::kIntermediate:
      return "intermediate";
  }
  return "?";
}

const Value* Graph::find_value(std::string_view n) const {
  for (const Value& v : values) {
    if (v.name == n) return &v;
  }
  return nullptr;
}

const Node* Graph::find_node(std::string_view n) const {
  for (const Node& node : nodes) {
    if (node.name == n) return &node;
  }
  return nullptr;
}

const Handle* Graph::find_handle(std::string_view n) const {
  for (const Handle& h : handles) {
    if (h.name == n) return &h;
  }
  return nullptr;
}

bool Graph::is_output(ValueId id) const {
  return std::find(outputs.begin(), outputs.end(), id) != outputs.end();
}

std::vector<std::vector<NodeId>> compute_users(const Graph& graph) {
  std::vector<std::vector<NodeId>> users(graph.values.size());
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId in : graph.node(n).inputs) {
      if (!graph.has_value(in)) continue;
      auto& list = users[static_cast<size_t>(in)];
      // Nodes are visited in id order, so a duplicate can only be the last entry.
      if (list.empty() || list.back() != n) list.push_back(n);
    }
  }
  return users;
}

std::string describe_node(const Graph& graph, NodeId id) {
  if (!graph.has_node(id)) return fmt::format("node #{}", id);
  const Node& node = graph.node(id);
  return fmt::format("node '{}' ({})", node.name, op_name(node.op));
}

std::string describe_value(const Graph& graph, ValueId id) {
  if (!graph.has_value(id)) return fmt::format("value #{}", id);
  const Value& v = graph.value(id);
  return fmt::format("value '{}' ({})", v.name, v.type.to_string());
}

std::string describe_operands(const Graph& graph, std::span<const ValueId> ids) {
  std::vector<std::string> parts;
  for (ValueId id : ids) {
    parts.push_back(graph.has_value(id) ? fmt::format("'{}' {}", graph.value(id).name,
                                                      graph.value(id).type.to_string())
                                        : fmt::format("#{}", id));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace carve::ir
