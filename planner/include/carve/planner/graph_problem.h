// From a graph and an execution order to a planner Problem: liveness with views folded
// into their source and in-place reuse of dying inputs.
//
// Rules (TFLite/ggml):
//  - View ops (reshape, flatten, squeeze, unsqueeze, identity, and slices whose result is
//    one contiguous byte range) get no memory: they alias their source's buffer, at a
//    byte offset for slices, and the source lives until the last use of every alias.
//    A view that is itself a graph output is materialised (the caller owns that memory).
//  - An elementwise op's output takes over an input's buffer in place when that input's
//    buffer dies at this op, has the output's byte size and element count, starts at
//    offset 0, and is not a graph input, output or constant (GraphPlanOptions::inplace).
//  - Fused kernels (GraphPlanOptions::fused_groups) run all their nodes at once: every
//    value a group produces is live from the group's first step, every value it reads
//    until its last step. In place inside a group needs more than the per-node rule: the
//    group must be all elementwise and each of the input's readers in it must produce
//    the input's shape, so a kernel reads exactly the elements it overwrites (a matmul
//    reading the input, or broadcasting it, would read bytes another element's write
//    already replaced; and a matmul/conv epilogue over its own residual would stop the
//    kernel from accumulating K blocks in the output).
//  - Concat as views (GraphPlanOptions::concat_views): when a concat's inputs are each one
//    contiguous byte range of its output (every axis before the concat axis has extent 1)
//    at offsets that keep the arena alignment, each input's producer writes straight into
//    its slice and the concat gets no kernel (its output is a view, the reverse of a
//    slice view). Its output then lives from the first input's producer. Each input must
//    be an arena intermediate written by a node that is no view or concat, read by no other
//    such concat, and appear once; the output must be an arena intermediate.
//  - Graph inputs, constants (weights), graph outputs and handle reads are not in the
//    arena by default (caller memory / weights / handle region); plan_inputs and
//    plan_outputs put inputs/outputs in the arena (inputs live from step 0, outputs to the end).
// Steps: problem step = execution step + 1, so step 0 is "before the first node"; a value
// produced at execution step s and last read at step t has interval [s+1, t+2).
// Thread-safety: pure function of its arguments. Errors: kInvalidArgument for an order
// that is not a topological order of the graph; kShapeError for byte-size overflow.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/planner/problem.h"

namespace carve::planner {

struct GraphPlanOptions {
  bool inplace = true;
  bool concat_views = true;
  bool plan_inputs = false;
  bool plan_outputs = false;
  int64_t alignment = 64;  // every arena buffer's offset alignment
  // Values that are never stored (kept in registers inside a fused kernel), by ValueId;
  // empty = none. They get Placement::kNone and no memory.
  std::vector<bool> unstored{};
  // Nodes that run as one kernel (fusion groups); a node in no group runs alone.
  std::vector<std::vector<ir::NodeId>> fused_groups{};
  // Arena values kept until the end of the run, by ValueId; empty = none. The runtime
  // reads a data-dependent extent (ir/extent.h) after the run.
  std::vector<bool> live_to_end{};
};

enum class Placement : uint8_t {
  kArena,     // in problem.buffers[buffer] at byte_offset
  kInput,     // caller-provided input memory (root value = the input)
  kOutput,    // caller-provided output memory
  kConstant,  // weights region
  kHandle,    // handle region: a read_handle output in the handle's own bytes (the arena holds a
              // copy instead when the handle is written while the value is still read)
  kNone,      // never stored (GraphPlanOptions::unstored)
};

struct ValuePlacement {
  Placement placement = Placement::kArena;
  ir::ValueId root = ir::kNoValue;  // the value that owns the memory this one aliases (itself if none)
  int32_t buffer = -1;              // index into problem.buffers when placement == arena
  int64_t byte_offset = 0;          // offset inside the root's memory (slice views)
  bool is_view = false;             // aliases its source via a view op
  bool is_inplace = false;          // took over a dying input's buffer
};

// A concat whose inputs are written straight into its output (GraphPlanOptions::concat_views).
struct ConcatView {
  ir::NodeId concat = ir::kNoNode;
  std::vector<int64_t> input_offsets;  // byte offset of each input inside the output
};

struct GraphProblem {
  Problem problem;                        // buffer ids are root value names
  std::vector<ValuePlacement> values;     // indexed by ValueId
  std::vector<ir::ValueId> buffer_root;   // problem.buffers[i] belongs to this root value (kNoValue: scratch)
  std::vector<std::vector<ir::NodeId>> scratch_nodes;  // per buffer: the nodes using a scratch buffer
  std::vector<ConcatView> concat_views;  // in execution order
  int64_t num_views = 0;                  // views, concat outputs folded into their inputs included
  int64_t num_inplace = 0;
};

// The concat node whose output is the view `root` gathers (concat_views), or nullptr.
const ConcatView* concat_view_of(const ir::Graph& graph, const GraphProblem& problem, ir::ValueId root);

Result<GraphProblem> build_graph_problem(const ir::Graph& graph, std::span<const ir::NodeId> order,
                                         const GraphPlanOptions& options = {});

// Adds a kernel's temporary buffer, live while `nodes` (consecutive in `order`) run.
// Returns its index in problem.buffers. kInvalidArgument for nodes not in the order.
Result<int32_t> add_scratch_buffer(GraphProblem& problem, std::string id, int64_t bytes, int64_t alignment,
                                   std::span<const ir::NodeId> nodes, std::span<const ir::NodeId> order);

// Byte offset of a slice result inside its source when that result is one contiguous
// range of the source (every step 1; the axes before the last cut axis keep one index,
// the axes after it are whole); nullopt otherwise.
std::optional<int64_t> contiguous_slice_offset(const ir::Graph& graph, const ir::Node& slice);

}  // namespace carve::planner
