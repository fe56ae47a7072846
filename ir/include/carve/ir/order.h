// Execution order and value lifetimes.
//
// Ownership/lifetime: results are returned by value and index into the graph passed in
// (NodeId / ValueId); they go stale if that graph changes.
// Thread-safety: pure functions over a const Graph.
// Errors: kVerifyError for a cycle (naming the nodes on it) or a node input/output id the
// graph does not have; kInvalidArgument when the order given to lifetimes() is not a
// topological order of every node exactly once.
//
// Steps: step i is the execution of order[i]; a graph with n nodes runs steps 0..n-1.
//
// Lifetime conventions (intervals are inclusive: [first, last]):
//  - an intermediate value starts at its producer's step;
//  - graph inputs and constants exist before the first step: first = kBeforeFirstStep (-1);
//  - last = the step of its last consumer;
//  - graph outputs live to the end: last = n - 1 (or -1 in a graph with no nodes);
//  - a value that nothing reads and that is not an output still occupies its producer's
//    step (last = first), because the producer writes it;
//  - an unused input or constant that is not an output gets [-1, -1].
// Lifetimes are per value: views (is_view) get their own interval; folding them into
// their source's buffer is the planner's job.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/status.h"

namespace carve::ir {

// State ops (read_handle, write_handle, write_handle_at) that name the same handle keep
// their node-id order: each depends on the previous one on that handle, because they
// read and write the same persistent memory. result[n] lists those implicit
// predecessors of node n (at most one per handle it touches).
std::vector<std::vector<NodeId>> state_predecessors(const Graph& graph);

// A deterministic topological order of all nodes (data dependences plus the implicit
// state-op order above): among the nodes whose inputs are
// ready, the smallest id runs first, so a graph whose node ids are already topological
// (every builder- or parser-made graph) runs in insertion order. Sinks are included.
Result<std::vector<NodeId>> execution_order(const Graph& graph);

inline constexpr int64_t kBeforeFirstStep = -1;

struct Lifetime {
  int64_t first = kBeforeFirstStep;  // inclusive
  int64_t last = kBeforeFirstStep;   // inclusive

  friend bool operator==(const Lifetime&, const Lifetime&) = default;
};

// One Lifetime per value, indexed by ValueId.
Result<std::vector<Lifetime>> lifetimes(const Graph& graph, std::span<const NodeId> order);

}  // namespace carve::ir
