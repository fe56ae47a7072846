// The graph IR: values, nodes, handles and graph outputs.
//
// Ownership/lifetime: Graph is a plain value type that owns everything it holds (names,
// attributes, constant bytes); copies are deep. Ids are indices: values[id].id == id and
// nodes[id].id == id, so ids stay stable as long as nothing is erased.
// Thread-safety: no internal synchronisation; concurrent const access is safe.
// Errors: Graph itself checks nothing, so it can hold a broken graph for the verifier to
// report (verify.h). Build graphs with GraphBuilder (builder.h), which yields verified
// graphs, or parse (text.h), whose result should go through verify(). Both number ids in
// definition order.
//
// A value is defined exactly once: by its declaration (kind input or constant) or as an
// output of one node (kind intermediate, producer = that node). "Graph output" is not a
// kind but a mark: Graph::outputs lists the values returned to the caller, in order; an
// input or constant may be an output too. Handles are named, typed pieces of state that
// outlive one run (e.g. a KV cache); only state ops touch them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "carve/ir/attr.h"
#include "carve/ir/op.h"
#include "carve/ir/shape.h"

namespace carve::ir {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;
inline constexpr NodeId kNoNode = -1;

enum class ValueKind : uint8_t { kInput, kConstant, kIntermediate };
// "input", "const", "intermediate"
std::string_view value_kind_name(ValueKind kind);

struct Value {
  ValueId id = kNoValue;
  std::string name;  // unique among values, non-empty
  TensorType type;
  ValueKind kind = ValueKind::kIntermediate;
  NodeId producer = kNoNode;  // set iff kind == intermediate
  // Constants only, optional: exactly type.byte_size() bytes, little-endian elements.
  std::optional<std::vector<uint8_t>> data;

  friend bool operator==(const Value&, const Value&) = default;
};

struct Node {
  NodeId id = kNoNode;
  std::string name;  // unique among nodes, non-empty
  OpKind op = OpKind::kIdentity;
  std::vector<ValueId> inputs;   // positional; optional trailing inputs are omitted
  std::vector<ValueId> outputs;  // values this node defines, in order
  Attrs attrs;

  friend bool operator==(const Node&, const Node&) = default;
};

struct Handle {
  std::string name;  // unique among handles, non-empty
  TensorType type;

  friend bool operator==(const Handle&, const Handle&) = default;
};

struct Graph {
  std::string name = "main";
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<Handle> handles;
  std::vector<ValueId> outputs;

  bool has_value(ValueId id) const { return id >= 0 && id < num_values(); }
  bool has_node(NodeId id) const { return id >= 0 && id < num_nodes(); }
  int32_t num_values() const { return static_cast<int32_t>(values.size()); }
  int32_t num_nodes() const { return static_cast<int32_t>(nodes.size()); }
  // Preconditions: has_value(id) / has_node(id).
  const Value& value(ValueId id) const { return values[static_cast<size_t>(id)]; }
  const Node& node(NodeId id) const { return nodes[static_cast<size_t>(id)]; }
  Value& value(ValueId id) { return values[static_cast<size_t>(id)]; }
  Node& node(NodeId id) { return nodes[static_cast<size_t>(id)]; }

  // Linear scans by name; nullptr when absent.
  const Value* find_value(std::string_view name) const;
  const Node* find_node(std::string_view name) const;
  const Handle* find_handle(std::string_view name) const;
  bool is_output(ValueId id) const;

  // Structural equality: every field of every value, node, handle and output, in order.
  friend bool operator==(const Graph&, const Graph&) = default;
};

// users[v] = the nodes that read value v, ascending, one entry per node even when a node
// reads v twice. Out-of-range input ids are skipped (the verifier reports them).
std::vector<std::vector<NodeId>> compute_users(const Graph& graph);

// "node 'mm0' (matmul)": the prefix every node-related error message starts with.
std::string describe_node(const Graph& graph, NodeId id);
// "value 'x' (f32[2,3])", or "value #7" for an id the graph does not have.
std::string describe_value(const Graph& graph, ValueId id);
// "'x' f32[2,3], 'w' f32[3,4]": the operands named in inference errors.
std::string describe_operands(const Graph& graph, std::span<const ValueId> ids);

}  // namespace carve::ir
