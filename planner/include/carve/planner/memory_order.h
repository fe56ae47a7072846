// A memory-aware execution order: a topological order chosen to lower peak live bytes.
//
// Cost model: an arena value (an intermediate that is not a graph output or a handle
// read; views are folded into their source, so reading a view reads its source) is live
// from its producer until its last reader has run; while a node runs, its inputs and its
// new outputs are live. In-place reuse is not modelled (it depends on the order).
// Small graphs (<= max_exact_nodes, and at most max_exact_states reachable prefixes) are
// solved exactly by dynamic programming over executed-node sets; larger ones greedily:
// among ready nodes run the one that frees most bytes net of what it allocates
// (ties: smallest node id).
// Thread-safety: pure functions. Errors: kVerifyError for a cyclic graph.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/status.h"

namespace carve::planner {

struct MemoryOrderOptions {
  int max_exact_nodes = 24;
  int64_t max_exact_states = 200000;
};

struct MemoryOrder {
  std::vector<ir::NodeId> order;
  int64_t peak_bytes = 0;  // under the cost model above
  bool exact = false;      // true: no topological order has a lower modelled peak
};

Result<MemoryOrder> memory_aware_order(const ir::Graph& graph, const MemoryOrderOptions& options = {});

// The modelled peak of a given order (the same model the search minimises).
Result<int64_t> modelled_peak_bytes(const ir::Graph& graph, std::span<const ir::NodeId> order);

}  // namespace carve::planner
