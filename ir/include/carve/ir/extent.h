// Data-dependent extents: outputs whose size along one dim depends on the input data
// (non_zero, unique, non_max_suppression; op.h).
//
// Contract
//  - Planning: such a value's type (inference, verify, the planner, every buffer) holds
//    the dim at its static upper bound: non_zero [rank, numel], unique numel (or the axis
//    length) along the axis, non_max_suppression batches*classes*boxes rows.
//  - Contents: the producer writes the result packed at its actual shape (the actual
//    extent `e` in place of the bound) from the value's first byte, zeroes the rest, and
//    writes e to its last output (the extent: an i64 scalar, an ordinary value).
//  - Graph outputs: a CPU runtime::Session keeps the extent until the end of the run and
//    returns the output as a view of its actual shape over the planned bytes (session.h).
//  - Consumers inside the graph: not supported yet. Reading the bound would read the
//    padding, a wrong answer, so runtime::Session::compile refuses any node that reads such
//    a value, naming both (kUnsupported "data-dependent extent of ... consumed by ...").
//    The extent output itself is an ordinary i64 scalar and may be read freely.
#pragma once

#include <optional>

#include "carve/ir/graph.h"

namespace carve::ir {

struct DynamicExtent {
  int axis = 0;                // the dim planned at its upper bound
  ValueId extent = kNoValue;   // i64 scalar with the actual extent (written by the same node)
};

// The data-dependent extent of `value` (an output of one of those ops), or nullopt.
// Precondition: `value` is a value of a verified `graph`.
std::optional<DynamicExtent> dynamic_extent(const Graph& graph, ValueId value);

// `shape` with dim `extent.axis` replaced by `actual`.
Shape actual_shape(const Shape& shape, const DynamicExtent& extent, int64_t actual);

}  // namespace carve::ir
