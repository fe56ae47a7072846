// Shape and dtype inference for every op, including its attribute checks.
//
// Ownership/lifetime: pure functions; results are returned by value.
// Thread-safety: safe to call concurrently.
// Errors (messages say what is wrong but not which node; callers prefix describe_node):
//   kVerifyError  wrong number of inputs, unknown/missing/mistyped/out-of-range attribute,
//                 undeclared handle;
//   kTypeMismatch an input has a dtype the op does not accept or operands disagree;
//   kShapeError   ranks/dims do not fit (broadcast, matmul K, conv window, reshape count,
//                 an output over kMaxRank or whose byte size overflows int64).
// Inference is the single source of truth: GraphBuilder calls it for each node and
// verify() re-runs it and compares with the stored output types.
#pragma once

#include <span>
#include <vector>

#include "carve/ir/attr.h"
#include "carve/ir/graph.h"
#include "carve/ir/op.h"
#include "carve/ir/shape.h"
#include "carve/status.h"

namespace carve::ir {

// Output types of `op` applied to `inputs` with `attrs`. `handles` are the graph's
// declared handles (only state ops look at them). The result has one entry per output:
// none for sinks, sizes.size() for split.
Result<std::vector<TensorType>> infer_types(OpKind op, std::span<const TensorType> inputs,
                                            const Attrs& attrs,
                                            std::span<const Handle> handles = {});

// Numpy broadcasting of two or more shapes (right-aligned; dims equal or one of them 1).
Result<Shape> broadcast_shapes(std::span<const Shape> shapes);
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace carve::ir
