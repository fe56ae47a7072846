// Import-time pattern fusion (patterns.cpp): exporters' op-by-op forms of one carve op.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "context.h"

namespace carve::onnx::detail {

// A pattern found in the ONNX graph: its nodes (lowered at the first one's place) and the
// one node that replaces them, writing the last one's output.
struct FusedPattern {
  enum class Kind { kLayerNorm, kPadAvgPool };
  Kind kind;
  std::vector<int> nodes;
  ::onnx::NodeProto fused;
};

// Every pattern of `graph` below, by the index of its first node. Reads constants (eps,
// the exponent, Pad's pads) through ctx; adds nothing to it.
std::map<int, FusedPattern> find_patterns(const ::onnx::GraphProto& graph, Context& ctx);

// Whether `pattern` can be taken once its first node is reached (its inputs known and of
// the form the fused op needs). Otherwise its nodes lower one by one.
bool take_pattern(const FusedPattern& pattern, const Context& ctx);

}  // namespace carve::onnx::detail
