// The graph verifier.
//
// Ownership/lifetime: reads the graph; keeps nothing.
// Thread-safety: pure function over a const Graph.
// Errors: the first problem found, as a Status whose message names the node (name and
// op), the value and the reason:
//   kVerifyError  ids not equal to indices, empty or duplicate names, a value defined
//                 twice (two nodes, or a declaration and a node), a value used but never
//                 defined (dangling) or an input id the graph lacks, a producer field that
//                 disagrees with the nodes, an unknown op, wrong input/output count, a
//                 missing/mistyped/out-of-range/unknown attribute, a cycle, a graph
//                 output never produced or listed twice, a state op naming an undeclared
//                 handle, constant data of the wrong size;
//   kTypeMismatch a dtype the op rejects, or a stored output dtype that differs from
//                 inference;
//   kShapeError   a bad or overflowing shape, or a stored output shape that differs from
//                 inference (including a value that does not match its handle).
// A graph passing verify() has an execution_order() and lifetimes().
#pragma once

#include "carve/ir/graph.h"
#include "carve/status.h"

namespace carve::ir {

Status verify(const Graph& graph);

}  // namespace carve::ir
