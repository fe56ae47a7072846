#include "carve/planner/memory_order.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "carve/ir/order.h"

namespace carve::planner {
namespace {

using ir::NodeId;
using ir::ValueId;

// The graph reduced to what the cost model needs: per node the arena values it makes
// and the arena values it reads (views resolved to their source).
struct CostGraph {
  int num_nodes = 0;
  std::vector<std::vector<int>> preds;    // node -> nodes it depends on
  std::vector<std::vector<int>> makes;    // node -> arena values produced
  std::vector<std::vector<int>> reads;    // node -> arena values read (deduplicated)
  std::vector<int64_t> bytes;             // per arena value
  std::vector<int> producer;              // per arena value
  std::vector<std::vector<int>> readers;  // per arena value: nodes that read it
};

Result<CostGraph> build_cost_graph(const ir::Graph& graph) {
  CostGraph cg;
  cg.num_nodes = graph.num_nodes();
  std::vector<int> arena_index(static_cast<size_t>(graph.num_values()), -1);
  std::vector<ValueId> source(static_cast<size_t>(graph.num_values()));
  for (const ir::Value& v : graph.values) source[static_cast<size_t>(v.id)] = v.id;
  CARVE_ASSIGN_OR_RETURN(std::vector<NodeId> topo, ir::execution_order(graph));
  // State ops on one handle keep their order: those edges are dependences too.
  cg.preds = ir::state_predecessors(graph);
  cg.makes.resize(static_cast<size_t>(cg.num_nodes));
  cg.reads.resize(static_cast<size_t>(cg.num_nodes));
  for (NodeId id : topo) {
    const ir::Node& node = graph.node(id);
    for (ValueId in : node.inputs) {
      const ir::Value& v = graph.value(in);
      if (v.producer != ir::kNoNode) cg.preds[static_cast<size_t>(id)].push_back(v.producer);
      int a = arena_index[static_cast<size_t>(source[static_cast<size_t>(in)])];
      auto& reads = cg.reads[static_cast<size_t>(id)];
      if (a >= 0 && std::find(reads.begin(), reads.end(), a) == reads.end()) reads.push_back(a);
    }
    for (ValueId out : node.outputs) {
      if (ir::is_view(node.op)) {
        source[static_cast<size_t>(out)] = source[static_cast<size_t>(node.inputs[0])];
        continue;
      }
      if (graph.is_output(out) || node.op == ir::OpKind::kReadHandle) continue;
      CARVE_ASSIGN_OR_RETURN(int64_t bytes, graph.value(out).type.byte_size());
      arena_index[static_cast<size_t>(out)] = static_cast<int>(cg.bytes.size());
      cg.makes[static_cast<size_t>(id)].push_back(static_cast<int>(cg.bytes.size()));
      cg.bytes.push_back(bytes);
      cg.producer.push_back(id);
    }
  }
  cg.readers.resize(cg.bytes.size());
  for (int n = 0; n < cg.num_nodes; ++n)
    for (int a : cg.reads[static_cast<size_t>(n)]) cg.readers[static_cast<size_t>(a)].push_back(n);
  return cg;
}

// Replays an order, returning its modelled peak.
int64_t replay_peak(const CostGraph& cg, std::span<const NodeId> order) {
  std::vector<int> pending(cg.bytes.size());
  for (size_t a = 0; a < cg.bytes.size(); ++a) pending[a] = static_cast<int>(cg.readers[a].size());
  int64_t live = 0, peak = 0;
  for (NodeId n : order) {
    for (int a : cg.makes[static_cast<size_t>(n)]) live += cg.bytes[static_cast<size_t>(a)];
    peak = std::max(peak, live);
    for (int a : cg.reads[static_cast<size_t>(n)])
      if (--pending[static_cast<size_t>(a)] == 0) live -= cg.bytes[static_cast<size_t>(a)];
    for (int a : cg.makes[static_cast<size_t>(n)])
      if (pending[static_cast<size_t>(a)] == 0) live -= cg.bytes[static_cast<size_t>(a)];
  }
  return peak;
}

// Live bytes after exactly the nodes in `done` have run.
int64_t live_after(const CostGraph& cg, uint64_t done) {
  int64_t live = 0;
  for (size_t a = 0; a < cg.bytes.size(); ++a) {
    if (!(done >> cg.producer[a] & 1)) continue;
    for (int r : cg.readers[a])
      if (!(done >> r & 1)) { live += cg.bytes[a]; break; }
  }
  return live;
}

struct DpEntry {
  int64_t peak;
  uint64_t prev;
  int node;
};

// Exact DP over sets of executed nodes, breadth-first by set size. Returns false when
// the number of reachable sets exceeds the budget.
bool exact_order(const CostGraph& cg, int64_t max_states, MemoryOrder& result) {
  const int n = cg.num_nodes;
  std::vector<uint64_t> pred_mask(static_cast<size_t>(n), 0);
  for (int v = 0; v < n; ++v)
    for (int p : cg.preds[static_cast<size_t>(v)]) pred_mask[static_cast<size_t>(v)] |= uint64_t{1} << p;
  std::unordered_map<uint64_t, DpEntry> table{{0, {0, 0, -1}}};
  std::vector<uint64_t> layer{0};
  for (int size = 0; size < n; ++size) {
    std::vector<uint64_t> next;
    for (uint64_t done : layer) {
      const int64_t peak = table[done].peak;
      const int64_t live = live_after(cg, done);
      for (int v = 0; v < n; ++v) {
        if ((done >> v & 1) || (pred_mask[static_cast<size_t>(v)] & ~done)) continue;
        int64_t made = 0;
        for (int a : cg.makes[static_cast<size_t>(v)]) made += cg.bytes[static_cast<size_t>(a)];
        const int64_t cost = std::max(peak, live + made);
        const uint64_t to = done | uint64_t{1} << v;
        auto [it, inserted] = table.try_emplace(to, DpEntry{cost, done, v});
        if (inserted) {
          next.push_back(to);
        } else if (cost < it->second.peak) {
          it->second = DpEntry{cost, done, v};
        }
      }
      if (static_cast<int64_t>(table.size()) > max_states) return false;
    }
    layer = std::move(next);
  }
  const uint64_t all = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  result.peak_bytes = table[all].peak;
  result.order.clear();
  for (uint64_t s = all; s != 0; s = table[s].prev) result.order.push_back(table[s].node);
  std::reverse(result.order.begin(), result.order.end());
  result.exact = true;
  return true;
}

MemoryOrder greedy_order(const CostGraph& cg) {
  const int n = cg.num_nodes;
  std::vector<int> missing(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> succs(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v)
    for (int p : cg.preds[static_cast<size_t>(v)]) {
      ++missing[static_cast<size_t>(v)];
      succs[static_cast<size_t>(p)].push_back(v);
    }
  std::vector<int> pending(cg.bytes.size());
  for (size_t a = 0; a < cg.bytes.size(); ++a) pending[a] = static_cast<int>(cg.readers[a].size());
  std::vector<int> ready;
  for (int v = 0; v < n; ++v)
    if (missing[static_cast<size_t>(v)] == 0) ready.push_back(v);
  MemoryOrder result;
  while (!ready.empty()) {
    size_t best = 0;
    int64_t best_delta = 0;
    for (size_t i = 0; i < ready.size(); ++i) {
      const int v = ready[i];
      int64_t delta = 0;
      for (int a : cg.makes[static_cast<size_t>(v)]) delta += cg.bytes[static_cast<size_t>(a)];
      for (int a : cg.reads[static_cast<size_t>(v)])
        if (pending[static_cast<size_t>(a)] == 1) delta -= cg.bytes[static_cast<size_t>(a)];
      if (i == 0 || delta < best_delta || (delta == best_delta && v < ready[best])) {
        best = i;
        best_delta = delta;
      }
    }
    const int v = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    result.order.push_back(v);
    for (int a : cg.reads[static_cast<size_t>(v)]) --pending[static_cast<size_t>(a)];
    for (int s : succs[static_cast<size_t>(v)])
      if (--missing[static_cast<size_t>(s)] == 0) ready.push_back(s);
  }
  result.peak_bytes = replay_peak(cg, result.order);
  return result;
}

}  // namespace

Result<MemoryOrder> memory_aware_order(const ir::Graph& graph, const MemoryOrderOptions& options) {
  CARVE_ASSIGN_OR_RETURN(CostGraph cg, build_cost_graph(graph));
  MemoryOrder result;
  const int exact_limit = std::min(options.max_exact_nodes, 64);
  if (cg.num_nodes <= exact_limit && exact_order(cg, options.max_exact_states, result)) return result;
  return greedy_order(cg);
}

Result<int64_t> modelled_peak_bytes(const ir::Graph& graph, std::span<const ir::NodeId> order) {
  CARVE_ASSIGN_OR_RETURN(CostGraph cg, build_cost_graph(graph));
  if (static_cast<int>(order.size()) != cg.num_nodes)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("order has {} nodes, graph has {}", order.size(), cg.num_nodes));
  return replay_peak(cg, order);
}

}  // namespace carve::planner
