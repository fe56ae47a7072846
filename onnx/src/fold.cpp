// Constant folding: an IR op whose inputs are all known is evaluated at import with the
// reference interpreter (the project's numerical oracle), on a one-node graph. This is
// what turns Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains into constants.
#include "carve/reference/reference.h"
#include "context.h"

namespace carve::onnx::detail {

Result<std::vector<Tensor>> fold(ir::OpKind op, std::span<const Tensor> inputs, const ir::Attrs& attrs,
                                 const std::string& name, int64_t max_bytes) {
  ir::GraphBuilder b("fold");
  std::vector<ir::ValueId> ids;
  for (size_t i = 0; i < inputs.size(); ++i)
    ids.push_back(b.constant(fmt::format("in{}", i), inputs[i].type.dtype, inputs[i].type.shape));
  b.op(op, ids, attrs, "fold");
  CARVE_ASSIGN_OR_RETURN(ir::Graph graph, b.build());
  const ir::Node& node = graph.nodes.front();

  std::vector<const void*> in_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(t.bytes().data());
  std::vector<std::vector<uint8_t>> out_bytes;
  std::vector<void*> out_ptrs;
  for (ir::ValueId v : node.outputs) {
    CARVE_RETURN_IF_ERROR(check_folded_size(graph.value(v).type, max_bytes));
    CARVE_ASSIGN_OR_RETURN(int64_t bytes, graph.value(v).type.byte_size());
    out_bytes.emplace_back(static_cast<size_t>(bytes));
  }
  for (auto& bytes : out_bytes) out_ptrs.push_back(bytes.data());
  CARVE_RETURN_IF_ERROR(reference::reference_node(graph, node, in_ptrs, out_ptrs, nullptr));

  std::vector<Tensor> result;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    std::string out_name = node.outputs.size() == 1 ? name : fmt::format("{}_{}", name, k);
    result.push_back(known_tensor(std::move(out_name), graph.value(node.outputs[k]).type, std::move(out_bytes[k])));
  }
  return result;
}

Status check_folded_size(const ir::TensorType& type, int64_t max_bytes, int64_t min_element_bytes) {
  CARVE_ASSIGN_OR_RETURN(int64_t elements, type.shape.num_elements());
  const int64_t element_bytes = std::max<int64_t>(ir::dtype_size(type.dtype), min_element_bytes);
  int64_t bytes = 0;
  if (!ir::checked_mul(elements, element_bytes, &bytes))  // past int64 is past any cap
    return Status(ErrorCode::kOutOfMemory,
                  fmt::format("folding {} at import needs more bytes than int64 counts, over "
                              "ImportOptions::max_folded_bytes ({})", type.to_string(), max_bytes));
  if (bytes > max_bytes)
    return Status(ErrorCode::kOutOfMemory,
                  fmt::format("folding {} at import needs {} bytes, over ImportOptions::max_folded_bytes ({})",
                              type.to_string(), bytes, max_bytes));
  return Status();
}

}  // namespace carve::onnx::detail
