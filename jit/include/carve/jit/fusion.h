// Kernel grouping: which graph nodes are compiled together into one kernel.
//
//   auto order = ir::execution_order(graph);
//   auto groups = jit::form_kernel_groups(graph, *order, {});
//   for (const auto& g : *groups) std::puts(jit::describe_group(graph, g).c_str());
//
// Rules (form_kernel_groups):
//  - view nodes (ir::is_view) get no kernel: their output aliases their input's memory. A
//    view whose copy the runtime needs (e.g. a view that is a graph output over a graph
//    input) gets one from make_single_node_group(), which the layout emitter compiles to a
//    copy kernel.
//  - elementwise chains: the nodes that follow an elementwise node A in `order` join its
//    group while each is elementwise with one output and reads the previous node's
//    output; the group is then cut back to its longest closed prefix: every value
//    produced before the last node is read only inside the group and is not a graph
//    output (so a group stores exactly its last node's output). A value read by two group
//    nodes is fine: Mul(x, Sigmoid(x)) (SiLU as ONNX exports it) after x's producer is one
//    group. Broadcasting is allowed anywhere in the chain: every external operand is
//    indexed against the chain's final output shape, so an intermediate that is smaller
//    than the output is recomputed per output element.
//  - epilogues: elementwise nodes after a matmul, gemm or conv2d join the anchor's group
//    under the same rule when each has exactly the anchor output's shape (so the epilogue
//    maps one anchor element to one output element): bias, relu, clip, sigmoid, SiLU,
//    hard-sigmoid/hard-swish (x * HardSigmoid(x)), gelu, a residual add. Their other
//    operands (a bias, a residual) become extra inputs of the group.
//  - attention (FusionOptions::fuse_attention): a matmul whose output flows, through
//    elementwise nodes of its shape (scale, mask), into a softmax over the last axis whose
//    output is the first operand of a second matmul, every value in between read by the
//    next node only: [matmul, chain..., softmax, matmul] is one group when
//    tiling::attention_shape accepts it. The group runs at its last node's place in
//    `order` (the second matmul's V may be computed after the first matmul).
//  - every other node is its own group.
//  FusionOptions::fuse = false turns chains and epilogues off (one group per non-view node);
//  FusionOptions::side keeps nodes of different sides in different groups.
//
// Operands (the Kernel ABI order, see kernel.h): the external values the group's nodes
// read, deduplicated, in first-use order; then the values the group stores (its nodes'
// outputs that are not internal). State ops bind the handle's storage as one operand whose
// value is ir::kNoValue: role input for read_handle (the handle is read), role output for
// write_handle and write_handle_at (the handle is written); the runtime binds it to the
// handle named by the node's "handle" attribute. write_handle_at's `pos` is read at run
// time and clamped to [0, handle_dim - value_dim] along the axis (no out-of-bounds write).
//
// Tiles: elementwise and layout groups split their output elements (the sum over outputs
// for split; the copied elements for concat and handle writes) into num_tiles contiguous
// chunks of ceil(total / num_tiles) elements, about FusionOptions::elements_per_tile each;
// those emitters accept any num_tiles >= 1. Compute groups (matmul, conv, pools,
// reductions) use the compute emitters' rules (tiles.h), see tiles_for().
//
// Thread-safety: pure functions over a const Graph.
// Errors: kInvalidArgument when `order` is not a permutation of the graph's nodes or names
// a node that does not exist; kVerifyError for a node with bad input/output ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/jit/kernel.h"
#include "carve/status.h"

namespace carve::jit {

struct FusionOptions {
  bool fuse = true;                    // false: one group per non-view node
  int64_t elements_per_tile = 32768;   // elementwise/layout tile size target (>= 1)
  // Attention groups (above): for the host CPU's emitter only.
  bool fuse_attention = false;
  // Per node id (or empty): nodes with different values never share a group (a mixed
  // CPU/GPU program fuses within each side, never across the boundary).
  std::vector<uint8_t> side{};
};

Result<std::vector<KernelGroup>> form_kernel_groups(const ir::Graph& graph,
                                                    std::span<const ir::NodeId> order,
                                                    const FusionOptions& options = {});

// One group holding exactly `node` (any op, views included: a view becomes a copy kernel).
// Operands and num_tiles follow the rules above. kInvalidArgument for an unknown node.
Result<KernelGroup> make_single_node_group(const ir::Graph& graph, ir::NodeId node,
                                           const FusionOptions& options = {});

// One group of exactly `nodes`, in order (a chain form_kernel_groups could have formed: an
// anchor and elementwise nodes each reading the one before). kInvalidArgument for an
// unknown node or none.
Result<KernelGroup> make_group(const ir::Graph& graph, std::vector<ir::NodeId> nodes,
                               const FusionOptions& options = {});

// Tile count for a group whose operands are set. Elementwise and layout anchors:
// ceil(elements / elements_per_tile), at least 1. Compute anchors: compute_op_tiles
// (tiles.h), at least 1, which the compute emitters split by. Compute groups also get scratch_bytes = compute_op_scratch_bytes and,
// when that is > 0, a last operand {scratch, kNoValue}.
int64_t tiles_for(const ir::Graph& graph, const KernelGroup& group,
                  const FusionOptions& options = {});

// One line for the CLI, e.g.
// "fused_add_gelu_3: add_3 -> gelu_4 | in x:f32[4,8], b:f32[8] | out gelu_4:f32[4,8] | tiles 1"
std::string describe_group(const ir::Graph& graph, const KernelGroup& group);

}  // namespace carve::jit
