#include "carve/ir/extent.h"

#include <algorithm>

namespace carve::ir {

std::optional<DynamicExtent> dynamic_extent(const Graph& graph, ValueId value) {
  const Value& v = graph.value(value);
  if (v.producer == kNoNode) return std::nullopt;
  const Node& node = graph.node(v.producer);
  const auto at = std::find(node.outputs.begin(), node.outputs.end(), value) - node.outputs.begin();
  switch (node.op) {
    case OpKind::kNonZero:
      if (at == 0) return DynamicExtent{1, node.outputs[1]};
      break;
    case OpKind::kUnique: {
      if (at == 2 || at == 4) break;  // inverse_indices has x's length; 4 is the extent
      int axis = 0;
      if (at == 0 && node.attrs.contains("axis")) {
        const int64_t raw = node.attrs.at("axis").as_int();
        axis = static_cast<int>(raw < 0 ? raw + v.type.shape.rank() : raw);
      }
      return DynamicExtent{axis, node.outputs[4]};
    }
    case OpKind::kNonMaxSuppression:
      if (at == 0) return DynamicExtent{0, node.outputs[1]};
      break;
    default: break;
  }
  return std::nullopt;
}

Shape actual_shape(const Shape& shape, const DynamicExtent& extent, int64_t actual) {
  std::vector<int64_t> dims = shape.dims();
  dims[static_cast<size_t>(extent.axis)] = actual;
  return Shape(std::move(dims));
}

}  // namespace carve::ir
