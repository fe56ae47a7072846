// emit_group: dispatch a KernelGroup to its emitter family; operand_ptr.
#include <fmt/format.h>

#include "carve/jit/tiles.h"
#include "emit.h"

namespace carve::jit::detail {

llvm::Value* operand_ptr(EmitContext& ec, ir::ValueId v) {
  for (size_t i = 0; i < ec.group.operands.size() && i < ec.operand_ptrs.size(); ++i) {
    if (ec.group.operands[i].value == v) return ec.operand_ptrs[i];
  }
  return nullptr;
}

Status emit_group(EmitContext& ec) {
  const KernelGroup& group = ec.group;
  if (group.nodes.empty()) return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}' has no nodes", group.name));
  for (ir::NodeId id : group.nodes) {
    if (!ec.graph.has_node(id)) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}' names node id {}, which the graph lacks", group.name, id));
    }
  }
  const ir::Node& anchor = ec.graph.node(group.nodes.front());
  if (ir::is_elementwise(anchor.op)) return emit_elementwise_group(ec);
  if (tiling::attention_shape(ec.graph, group.nodes).valid) return emit_attention(ec);

  bool epilogue_anchor = anchor.op == ir::OpKind::kMatmul || anchor.op == ir::OpKind::kGemm ||
                         anchor.op == ir::OpKind::kConv2d;
  if (group.nodes.size() > 1) {
    if (!epilogue_anchor) {
      return Status(ErrorCode::kUnsupported,
                    fmt::format("group '{}': {} cannot take fused nodes", group.name, ir::describe_node(ec.graph, anchor.id)));
    }
    for (size_t i = 1; i < group.nodes.size(); ++i) {
      const ir::Node& n = ec.graph.node(group.nodes[i]);
      if (!ir::is_elementwise(n.op) || n.outputs.size() != 1) {
        return Status(ErrorCode::kUnsupported,
                      fmt::format("group '{}': fused {} is not elementwise", group.name,
                                  ir::describe_node(ec.graph, group.nodes[i])));
      }
      // every epilogue input is produced in the group or is an operand
      for (ir::ValueId v : n.inputs) {
        bool produced = false;
        for (size_t j = 0; j < i; ++j) {
          for (ir::ValueId o : ec.graph.node(group.nodes[j]).outputs) produced = produced || o == v;
        }
        if (!produced && !operand_ptr(ec, v)) {
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("group '{}': {} reads {}, which is not an operand", group.name,
                                    ir::describe_node(ec.graph, n.id), ir::describe_value(ec.graph, v)));
        }
      }
    }
  }
  Epilogue epilogue = group.nodes.size() > 1 ? make_epilogue(ec) : Epilogue();
  switch (anchor.op) {
    case ir::OpKind::kMatmul:
    case ir::OpKind::kGemm:
      return emit_matmul(ec, anchor, epilogue);
    case ir::OpKind::kConv2d:
      return emit_conv(ec, anchor, epilogue);
    case ir::OpKind::kMaxPool:
    case ir::OpKind::kAvgPool:
      return emit_pool(ec, anchor);
    case ir::OpKind::kReduceSum:
    case ir::OpKind::kReduceMean:
    case ir::OpKind::kReduceMax:
    case ir::OpKind::kReduceProd:
    case ir::OpKind::kArgMax:
    case ir::OpKind::kArgMin:
    case ir::OpKind::kSoftmax:
    case ir::OpKind::kLayerNorm:
    case ir::OpKind::kGlobalAvgPool:
    case ir::OpKind::kBatchNorm:
      return emit_reduction(ec, anchor);
    case ir::OpKind::kGatherNd:
    case ir::OpKind::kScatterNd:
    case ir::OpKind::kTopK:
      return emit_index(ec, anchor);
    case ir::OpKind::kNonZero:
    case ir::OpKind::kUnique:
    case ir::OpKind::kNonMaxSuppression:
      return emit_dynamic(ec, anchor);
    default:
      return emit_layout(ec, anchor);
  }
}

}  // namespace carve::jit::detail
