// Kernel grouping (see fusion.h). No LLVM here: this file is built in every configuration.
#include "carve/jit/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "carve/ir/op.h"
#include "carve/jit/tiles.h"

namespace carve::jit {
namespace {

bool is_compute_anchor(ir::OpKind op) {
  return op == ir::OpKind::kMatmul || op == ir::OpKind::kGemm || op == ir::OpKind::kConv2d;
}

bool is_layout_like(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kConcat:
    case ir::OpKind::kSplit:
    case ir::OpKind::kSlice:
    case ir::OpKind::kTranspose:
    case ir::OpKind::kPad:
    case ir::OpKind::kGather:
    case ir::OpKind::kGatherElements:
    case ir::OpKind::kGatherNd:
    case ir::OpKind::kReadHandle:
    case ir::OpKind::kWriteHandle:
    case ir::OpKind::kWriteHandleAt:
      return true;
    default:
      return ir::is_view(op);
  }
}

int64_t numel(const ir::Graph& g, ir::ValueId v) {
  if (!g.has_value(v)) return 0;
  auto n = g.value(v).type.shape.num_elements();
  return n.ok() ? *n : 0;
}

int64_t ceil_div(int64_t a, int64_t b) { return b <= 0 ? a : (a + b - 1) / b; }

class Grouper {
 public:
  Grouper(const ir::Graph& g, const FusionOptions& opt)
      : g_(g), opt_(opt), users_(ir::compute_users(g)) {}

  // Operands, internal values, name and tiles for a group whose nodes are set.
  KernelGroup finish(std::vector<ir::NodeId> nodes) const {
    KernelGroup group;
    group.nodes = std::move(nodes);
    std::vector<ir::ValueId> produced;
    for (ir::NodeId id : group.nodes) {
      for (ir::ValueId v : g_.node(id).outputs) produced.push_back(v);
    }
    auto inside = [&](ir::ValueId v) {
      return std::find(produced.begin(), produced.end(), v) != produced.end();
    };
    auto add_operand = [&](OperandRole role, ir::ValueId v) {
      for (const auto& op : group.operands) {
        if (op.value == v && op.role == role && v != ir::kNoValue) return;
      }
      group.operands.push_back(KernelOperand{role, v});
    };
    const ir::Node& anchor = g_.node(group.nodes.front());
    if (anchor.op == ir::OpKind::kReadHandle) add_operand(OperandRole::kInput, ir::kNoValue);
    for (ir::NodeId id : group.nodes) {
      for (ir::ValueId v : g_.node(id).inputs) {
        if (!inside(v)) add_operand(OperandRole::kInput, v);
      }
    }
    // A produced value is internal when only group nodes read it and it is not an output.
    for (size_t i = 0; i < group.nodes.size(); ++i) {
      for (ir::ValueId v : g_.node(group.nodes[i]).outputs) {
        bool internal = i + 1 < group.nodes.size() && !g_.is_output(v);
        if (internal && g_.has_value(v)) {
          for (ir::NodeId u : users_[static_cast<size_t>(v)]) {
            if (std::find(group.nodes.begin(), group.nodes.end(), u) == group.nodes.end()) {
              internal = false;
            }
          }
        }
        if (internal) {
          group.internal_values.push_back(v);
        } else {
          add_operand(OperandRole::kOutput, v);
        }
      }
    }
    if (anchor.op == ir::OpKind::kWriteHandle || anchor.op == ir::OpKind::kWriteHandleAt) {
      add_operand(OperandRole::kOutput, ir::kNoValue);
    }
    // Name: "<op>_<id>" or "fused_<op>_<op>..._<anchor id>".
    if (group.nodes.size() == 1) {
      group.name = fmt::format("{}_{}", ir::op_name(anchor.op), anchor.id);
    } else {
      group.name = "fused";
      for (ir::NodeId id : group.nodes) group.name += fmt::format("_{}", ir::op_name(g_.node(id).op));
      group.name += fmt::format("_{}", anchor.id);
    }
    group.num_tiles = tiles_for(g_, group, opt_);
    // An attention group keeps its scores on the tile's stack: no scratch.
    const bool attention = tiling::attention_shape(g_, group.nodes).valid;
    group.scratch_bytes = attention ? 0 : compute_op_scratch_bytes(g_, anchor);
    if (group.scratch_bytes > 0) group.operands.push_back(KernelOperand{OperandRole::kScratch, ir::kNoValue});
    return group;
  }

  // Whether `next` may extend the group `nodes` (before the closure check): an
  // elementwise node with one output that reads the last node's output.
  bool extends(const std::vector<ir::NodeId>& nodes, ir::NodeId next) const {
    const ir::Node& n = g_.node(next);
    if (!ir::is_elementwise(n.op) || n.outputs.size() != 1) return false;
    ir::ValueId last = g_.node(nodes.back()).outputs.front();
    return std::find(n.inputs.begin(), n.inputs.end(), last) != n.inputs.end();
  }

  // Whether every value the group produces before its last node stays inside it: not a
  // graph output and read by group nodes only (then only the last output is stored).
  bool closed(const std::vector<ir::NodeId>& nodes) const {
    for (size_t i = 0; i + 1 < nodes.size(); ++i) {
      for (ir::ValueId v : g_.node(nodes[i]).outputs) {
        if (!g_.has_value(v) || g_.is_output(v)) return false;
        for (ir::NodeId u : users_[static_cast<size_t>(v)]) {
          if (std::find(nodes.begin(), nodes.end(), u) == nodes.end()) return false;
        }
      }
    }
    return true;
  }

  // [first, chain..., softmax, matmul] when `first` (a matmul) starts an attention
  // group (fusion.h); empty otherwise.
  std::vector<ir::NodeId> attention_nodes(ir::NodeId first) const {
    std::vector<ir::NodeId> nodes{first};
    auto only_user = [&](ir::ValueId v) -> const ir::Node* {
      if (!g_.has_value(v) || g_.is_output(v) || users_[static_cast<size_t>(v)].size() != 1) return nullptr;
      const ir::Node& u = g_.node(users_[static_cast<size_t>(v)].front());
      if (!opt_.side.empty() && opt_.side[static_cast<size_t>(u.id)] != opt_.side[static_cast<size_t>(first)])
        return nullptr;
      return &u;
    };
    const ir::ValueId scores = g_.node(first).outputs.front();
    ir::ValueId cur = scores;
    for (;;) {
      const ir::Node* next = only_user(cur);
      if (next == nullptr || next->outputs.size() != 1) return {};
      nodes.push_back(next->id);
      cur = next->outputs.front();
      if (next->op == ir::OpKind::kSoftmax) break;
      if (!ir::is_elementwise(next->op) || g_.value(cur).type.shape != g_.value(scores).type.shape) return {};
    }
    const ir::Node* pv = only_user(cur);
    if (pv == nullptr || pv->op != ir::OpKind::kMatmul || pv->inputs.front() != cur) return {};
    nodes.push_back(pv->id);
    return tiling::attention_shape(g_, nodes).valid ? nodes : std::vector<ir::NodeId>{};
  }

  const ir::Graph& g_;
  const FusionOptions& opt_;
  std::vector<std::vector<ir::NodeId>> users_;
};

Status check_node(const ir::Graph& g, ir::NodeId id) {
  const ir::Node& n = g.node(id);
  for (ir::ValueId v : n.inputs) {
    if (!g.has_value(v)) {
      return Status(ErrorCode::kVerifyError,
                    fmt::format("{}: input id {} is not a value of the graph", ir::describe_node(g, id), v));
    }
  }
  for (ir::ValueId v : n.outputs) {
    if (!g.has_value(v)) {
      return Status(ErrorCode::kVerifyError,
                    fmt::format("{}: output id {} is not a value of the graph", ir::describe_node(g, id), v));
    }
  }
  if (!ir::is_valid_op(n.op)) {
    return Status(ErrorCode::kVerifyError, fmt::format("{}: unknown op", ir::describe_node(g, id)));
  }
  return Status();
}

}  // namespace

int64_t tiles_for(const ir::Graph& graph, const KernelGroup& group, const FusionOptions& options) {
  if (group.nodes.empty() || !graph.has_node(group.nodes.front())) return 1;
  const ir::Node& anchor = graph.node(group.nodes.front());
  if (!ir::is_valid_op(anchor.op)) return 1;
  if (const tiling::AttentionShape a = tiling::attention_shape(graph, group.nodes); a.valid) return a.tiles();
  int64_t per_tile = std::max<int64_t>(1, options.elements_per_tile);
  if (ir::is_elementwise(anchor.op) || is_layout_like(anchor.op)) {
    int64_t total = 0;
    if (anchor.op == ir::OpKind::kConcat || anchor.op == ir::OpKind::kWriteHandle ||
        anchor.op == ir::OpKind::kWriteHandleAt) {
      // copies iterate over the input elements
      if (!anchor.inputs.empty()) {
        if (anchor.op == ir::OpKind::kConcat) {
          for (ir::ValueId v : anchor.inputs) total += numel(graph, v);
        } else {
          total = numel(graph, anchor.inputs[0]);
        }
      }
    } else {
      // elementwise: the last node's output; split: all outputs; others: output 0.
      const ir::Node& last = graph.node(group.nodes.back());
      for (ir::ValueId v : last.outputs) total += numel(graph, v);
    }
    return std::max<int64_t>(1, ceil_div(total, per_tile));
  }
  return std::max<int64_t>(1, compute_op_tiles(graph, anchor));
}

Result<KernelGroup> make_single_node_group(const ir::Graph& graph, ir::NodeId node,
                                           const FusionOptions& options) {
  if (!graph.has_node(node)) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("node id {} is not in the graph", node));
  }
  CARVE_RETURN_IF_ERROR(check_node(graph, node));
  Grouper grouper(graph, options);
  return grouper.finish({node});
}

Result<KernelGroup> make_group(const ir::Graph& graph, std::vector<ir::NodeId> nodes,
                               const FusionOptions& options) {
  if (nodes.empty()) return Status(ErrorCode::kInvalidArgument, "a group needs at least one node");
  for (ir::NodeId node : nodes) {
    if (!graph.has_node(node)) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("node id {} is not in the graph", node));
    }
    CARVE_RETURN_IF_ERROR(check_node(graph, node));
  }
  return Grouper(graph, options).finish(std::move(nodes));
}

Result<std::vector<KernelGroup>> form_kernel_groups(const ir::Graph& graph,
                                                    std::span<const ir::NodeId> order,
                                                    const FusionOptions& options) {
  if (order.size() != static_cast<size_t>(graph.num_nodes())) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("order has {} nodes, the graph {}", order.size(), graph.num_nodes()));
  }
  std::vector<bool> seen(static_cast<size_t>(graph.num_nodes()), false);
  for (ir::NodeId id : order) {
    if (!graph.has_node(id)) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("order names node id {}, which the graph lacks", id));
    }
    if (seen[static_cast<size_t>(id)]) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("order lists {} twice", ir::describe_node(graph, id)));
    }
    seen[static_cast<size_t>(id)] = true;
    CARVE_RETURN_IF_ERROR(check_node(graph, id));
  }

  Grouper grouper(graph, options);
  std::vector<KernelGroup> groups;
  std::vector<bool> assigned(static_cast<size_t>(graph.num_nodes()), false);
  // Attention groups first (their nodes are then taken by no other group), each formed at
  // its last node's place.
  std::map<ir::NodeId, std::vector<ir::NodeId>> attention_at;
  if (options.fuse && options.fuse_attention) {
    for (ir::NodeId id : order) {
      if (graph.node(id).op != ir::OpKind::kMatmul || assigned[static_cast<size_t>(id)]) continue;
      std::vector<ir::NodeId> nodes = grouper.attention_nodes(id);
      auto taken = [&](ir::NodeId n) { return assigned[static_cast<size_t>(n)]; };
      if (nodes.empty() || std::any_of(nodes.begin(), nodes.end(), taken)) continue;
      for (ir::NodeId n : nodes) assigned[static_cast<size_t>(n)] = true;
      attention_at.emplace(nodes.back(), std::move(nodes));
    }
  }
  for (size_t pos = 0; pos < order.size(); ++pos) {
    ir::NodeId id = order[pos];
    if (auto it = attention_at.find(id); it != attention_at.end()) {
      groups.push_back(grouper.finish(std::move(it->second)));
      continue;
    }
    if (assigned[static_cast<size_t>(id)]) continue;
    const ir::Node& node = graph.node(id);
    if (ir::is_view(node.op)) continue;
    std::vector<ir::NodeId> nodes{id};
    bool chain = ir::is_elementwise(node.op);
    bool epilogue = is_compute_anchor(node.op);
    if (options.fuse && (chain || epilogue) && node.outputs.size() == 1) {
      // Take the following nodes while they extend the group, then keep the longest
      // closed prefix: a value read twice inside the group (x in Mul(x, Sigmoid(x))) does
      // not stop fusion, one read outside does.
      const ir::TensorType& anchor_type = graph.value(node.outputs[0]).type;
      size_t keep = 1;
      for (size_t p = pos + 1; p < order.size(); ++p) {
        ir::NodeId next = order[p];
        if (assigned[static_cast<size_t>(next)] || !grouper.extends(nodes, next)) break;
        if (!options.side.empty() && options.side[static_cast<size_t>(next)] != options.side[static_cast<size_t>(id)]) break;
        if (epilogue && graph.value(graph.node(next).outputs[0]).type.shape != anchor_type.shape) break;
        nodes.push_back(next);
        if (grouper.closed(nodes)) keep = nodes.size();
      }
      nodes.resize(keep);
    }
    for (ir::NodeId n : nodes) assigned[static_cast<size_t>(n)] = true;
    groups.push_back(grouper.finish(std::move(nodes)));
  }
  return groups;
}

std::string describe_group(const ir::Graph& graph, const KernelGroup& group) {
  std::string s = group.name + ":";
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    ir::NodeId id = group.nodes[i];
    s += i == 0 ? " " : " -> ";
    s += graph.has_node(id) ? graph.node(id).name : fmt::format("#{}", id);
  }
  auto list = [&](OperandRole role, std::string_view label) {
    std::string part;
    for (const auto& op : group.operands) {
      if (op.role != role) continue;
      part += part.empty() ? fmt::format(" | {} ", label) : ", ";
      if (op.value == ir::kNoValue) {
        part += role == OperandRole::kScratch ? "scratch" : "handle";
      } else if (graph.has_value(op.value)) {
        const ir::Value& v = graph.value(op.value);
        part += v.name + ":" + v.type.to_string();
      } else {
        part += fmt::format("#{}", op.value);
      }
    }
    return part;
  };
  s += list(OperandRole::kInput, "in");
  s += list(OperandRole::kOutput, "out");
  if (group.scratch_bytes > 0) s += fmt::format(" | scratch {} B", group.scratch_bytes);
  s += fmt::format(" | tiles {}", group.num_tiles);
  return s;
}

}  // namespace carve::jit
