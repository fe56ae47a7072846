// Import-time pattern fusion (patterns.cpp): exporters' op-by-op forms of one carve op.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "context.h"

namespace carve::onnx::detail {

// A decomposed LayerNorm found in the ONNX graph: its nodes (the first is the ReduceMean
// of x) and the LayerNormalization node that replaces them, writing the last one's output.
struct LayerNormPattern {
  std::vector<int> nodes;
  ::onnx::NodeProto fused;  // inputs x, gamma[, beta]
};

// Every decomposed LayerNorm of `graph`, by the index of its first node. Reads constant
// scalars (eps, the exponent) through ctx; adds nothing to it.
std::map<int, LayerNormPattern> find_layer_norms(const ::onnx::GraphProto& graph, Context& ctx);

// Whether `pattern` can be taken once its first node is reached: x, gamma and beta are
// known, float, gamma/beta 1-D of x's last dim. Otherwise its nodes lower one by one.
bool take_layer_norm(const LayerNormPattern& pattern, const Context& ctx);

}  // namespace carve::onnx::detail
