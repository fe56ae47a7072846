#include "carve/ir/verify.h"

#include <fmt/format.h>

#include <set>

#include "carve/ir/infer.h"
#include "carve/ir/order.h"

namespace carve::ir {
namespace {

Status error(std::string message) { return Status(ErrorCode::kVerifyError, std::move(message)); }

Status check_handles(const Graph& g) {
  std::set<std::string_view> names;
  for (const Handle& h : g.handles) {
    if (h.name.empty()) return error("a handle has an empty name");
    if (!names.insert(h.name).second)
      return error(fmt::format("handle '{}' is declared twice", h.name));
    Status s = h.type.validate();
    if (!s.ok()) return s.with_context(fmt::format("handle '{}'", h.name));
  }
  return Status();
}

Status check_values(const Graph& g) {
  std::set<std::string_view> names;
  for (ValueId id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    if (v.id != id) return error(fmt::format("value '{}' at index {} has id {}", v.name, id, v.id));
    if (v.name.empty()) return error(fmt::format("value #{} has an empty name", id));
    if (!names.insert(v.name).second) {
      return error(fmt::format("value name '{}' is used twice", v.name));
    }
    Status s = v.type.validate();
    if (!s.ok()) return s.with_context(fmt::format("value '{}'", v.name));
    if (v.kind != ValueKind::kConstant && v.data.has_value()) {
      return error(fmt::format("value '{}' ({}) carries data; only constants may", v.name,
                               value_kind_name(v.kind)));
    }
    if (v.kind == ValueKind::kConstant && v.data.has_value()) {
      int64_t need = *v.type.byte_size();
      if (static_cast<int64_t>(v.data->size()) != need) {
        return error(fmt::format("constant '{}' has {} bytes of data, but {} needs {}", v.name,
                                 v.data->size(), v.type.to_string(), need));
      }
    }
    if (v.kind != ValueKind::kIntermediate && v.producer != kNoNode) {
      return error(fmt::format("{} value '{}' records producer #{}; declared values have none",
                               value_kind_name(v.kind), v.name, v.producer));
    }
  }
  return Status();
}

// Fills definer (kNoNode = declared or undefined) after checking each value is defined once.
Status check_definitions(const Graph& g, std::vector<NodeId>& definer) {
  definer.assign(g.values.size(), kNoNode);
  std::set<std::string_view> names;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    if (node.id != n)
      return error(fmt::format("node '{}' at index {} has id {}", node.name, n, node.id));
    if (node.name.empty())
      return error(fmt::format("node #{} ({}) has an empty name", n, op_name(node.op)));
    if (!names.insert(node.name).second)
      return error(fmt::format("node name '{}' is used twice", node.name));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      ValueId v = node.outputs[i];
      if (!g.has_value(v)) {
        return error(fmt::format("{}: output #{} refers to nonexistent value #{}",
                                 describe_node(g, n), i, v));
      }
      const Value& value = g.value(v);
      if (value.kind != ValueKind::kIntermediate) {
        return error(fmt::format("{}: output #{} '{}' is defined twice: it is also a graph {}",
                                 describe_node(g, n), i, value.name, value_kind_name(value.kind)));
      }
      NodeId& d = definer[static_cast<size_t>(v)];
      if (d != kNoNode) {
        return error(fmt::format("value '{}' is defined twice: by {} and by {}", value.name,
                                 describe_node(g, d), describe_node(g, n)));
      }
      d = n;
    }
  }
  for (ValueId v = 0; v < g.num_values(); ++v) {
    const Value& value = g.value(v);
    NodeId d = definer[static_cast<size_t>(v)];
    if (value.kind == ValueKind::kIntermediate && d != kNoNode && value.producer != d) {
      return error(fmt::format("value '{}' records producer #{} but is defined by {}", value.name,
                               value.producer, describe_node(g, d)));
    }
  }
  return Status();
}

bool is_defined(const Graph& g, const std::vector<NodeId>& definer, ValueId v) {
  return g.value(v).kind != ValueKind::kIntermediate || definer[static_cast<size_t>(v)] != kNoNode;
}

Status check_uses(const Graph& g, const std::vector<NodeId>& definer) {
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId v = node.inputs[i];
      if (!g.has_value(v)) {
        return error(fmt::format("{}: input #{} refers to nonexistent value #{}",
                                 describe_node(g, n), i, v));
      }
      if (!is_defined(g, definer, v)) {
        return error(fmt::format("{}: input #{} '{}' is dangling: used but never defined",
                                 describe_node(g, n), i, g.value(v).name));
      }
    }
  }
  std::set<ValueId> seen;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    ValueId v = g.outputs[i];
    if (!g.has_value(v))
      return error(fmt::format("graph output #{} refers to nonexistent value #{}", i, v));
    if (!is_defined(g, definer, v)) {
      return error(fmt::format("graph output '{}' is never produced by any node", g.value(v).name));
    }
    if (!seen.insert(v).second) {
      return error(fmt::format("value '{}' is listed as a graph output twice", g.value(v).name));
    }
  }
  for (ValueId v = 0; v < g.num_values(); ++v) {
    if (!is_defined(g, definer, v)) {
      return error(
          fmt::format("intermediate value '{}' is never defined by any node", g.value(v).name));
    }
  }
  return Status();
}

std::string arity_text(int lo, int hi) {
  if (lo == hi) return fmt::format("{}", lo);
  if (hi == kVariadic) return fmt::format("at least {}", lo);
  return fmt::format("{} to {}", lo, hi);
}

// "node 'mm' (matmul) on 'x' f32[2,3], 'w' i32[3,4]": inference errors name the operands.
std::string inference_context(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  if (node.inputs.empty()) return describe_node(g, n);
  return fmt::format("{} on {}", describe_node(g, n), describe_operands(g, node.inputs));
}

Status check_node(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  if (!is_valid_op(node.op)) {
    return error(
        fmt::format("node '{}': unknown op (enum value {})", node.name, static_cast<int>(node.op)));
  }
  const OpTraits& t = op_traits(node.op);
  auto ins = static_cast<int>(node.inputs.size()), outs = static_cast<int>(node.outputs.size());
  if (ins < t.min_inputs || ins > t.max_inputs) {
    return error(fmt::format("{}: wrong arity: has {} inputs, {} takes {}", describe_node(g, n),
                             ins, t.name, arity_text(t.min_inputs, t.max_inputs)));
  }
  if (outs < t.min_outputs || outs > t.max_outputs) {
    return error(fmt::format("{}: wrong arity: has {} outputs, {} gives {}", describe_node(g, n),
                             outs, t.name, arity_text(t.min_outputs, t.max_outputs)));
  }
  std::vector<TensorType> in_types;
  for (ValueId v : node.inputs) in_types.push_back(g.value(v).type);
  Result<std::vector<TensorType>> inferred = infer_types(node.op, in_types, node.attrs, g.handles);
  if (!inferred.ok()) return inferred.status().with_context(inference_context(g, n));
  if (inferred->size() != node.outputs.size()) {
    return error(fmt::format("{}: wrong arity: has {} outputs, its attributes give {}",
                             describe_node(g, n), node.outputs.size(), inferred->size()));
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const Value& out = g.value(node.outputs[i]);
    const TensorType& want = (*inferred)[i];
    if (out.type == want) continue;
    ErrorCode code =
        out.type.dtype != want.dtype ? ErrorCode::kTypeMismatch : ErrorCode::kShapeError;
    return Status(code, fmt::format("{}: output #{} '{}' is stored as {} but inference gives {}",
                                    describe_node(g, n), i, out.name, out.type.to_string(),
                                    want.to_string()));
  }
  return Status();
}

}  // namespace

Status verify(const Graph& graph) {
  CARVE_RETURN_IF_ERROR(check_handles(graph));
  CARVE_RETURN_IF_ERROR(check_values(graph));
  std::vector<NodeId> definer;
  CARVE_RETURN_IF_ERROR(check_definitions(graph, definer));
  CARVE_RETURN_IF_ERROR(check_uses(graph, definer));
  for (NodeId n = 0; n < graph.num_nodes(); ++n) CARVE_RETURN_IF_ERROR(check_node(graph, n));
  return execution_order(graph).status();
}

}  // namespace carve::ir
