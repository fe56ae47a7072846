// Parallelism-aware reuse: two arena buffers may share bytes only if every access of
// one happens-before (in the graph's dependency DAG) every access of the other. Plain
// interval reuse also lets buffers share bytes when their intervals are merely disjoint
// in the chosen execution order; a parallel executor must then serialise nodes the graph
// leaves independent. Parallel-safe planning forbids those pairs, so reuse never removes
// parallelism the graph allows.
//
// Thread-safety: pure functions. Errors: kUnsupported for graphs above kMaxNodes nodes
// (reachability is kept as one bitset per node), kInvalidArgument for mismatched inputs.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/planner/graph_problem.h"

namespace carve::planner {

using BufferPair = std::pair<int32_t, int32_t>;  // indices into Problem::buffers, first < second

struct ParallelSafeLimits {
  static constexpr int32_t kMaxNodes = 50000;
};

// Pairs of arena buffers with disjoint intervals whose accesses are not ordered by the DAG.
Result<std::vector<BufferPair>> unordered_buffer_pairs(const ir::Graph& graph, const GraphProblem& problem);

// Greedy by size with best fit (the greedy-size rule) where a buffer conflicts with
// every placed buffer whose interval overlaps it and with its `extra` pairs. O(n^2).
Result<MemoryPlan> plan_with_conflicts(const Problem& problem, std::span<const BufferPair> extra);

// validate_plan plus: no pair in `extra` shares a byte.
Status validate_with_conflicts(const Problem& problem, const MemoryPlan& plan, std::span<const BufferPair> extra);

// How many pairs in `extra` share at least one byte in `plan` (pairs a parallel
// executor would have to serialise).
int64_t count_sharing_pairs(const Problem& problem, const MemoryPlan& plan, std::span<const BufferPair> extra);

}  // namespace carve::planner
