// Internal contract between the JIT engine (engine.cpp: modules, ORC, cache) and the
// per-op IR emitters (emit_*.cpp). LLVM headers are allowed here: this file is private
// to jit/llvm.
//
// The engine creates, for each KernelGroup, an llvm::Function with the Kernel ABI
// (see carve/jit/kernel.h), loads every operand pointer from `operands`, and calls
// emit_group(). Emitters write straight-line IR + loops into the function using the
// builder, reading/writing element memory through the operand pointers.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <span>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/jit/kernel.h"
#include "carve/status.h"

namespace carve::jit::detail {

// A module flag an emitter sets when the module must be optimised without the SLP
// vectorizer (engine.cpp reads it; the flag is in the IR, so the cache key covers it).
inline constexpr const char* kNoSlpFlag = "carve.no_slp";

struct EmitContext {
  llvm::LLVMContext& ctx;
  llvm::Module& module;
  llvm::IRBuilder<>& b;
  llvm::Function* fn;
  const ir::Graph& graph;
  const KernelGroup& group;
  // Operand base pointers (ptr, address space 0), index-parallel to group.operands.
  std::vector<llvm::Value*> operand_ptrs;
  llvm::Value* tile_begin;  // i64
  llvm::Value* tile_end;    // i64
  int vector_width_f32 = 8; // lanes of f32 per vector register on the host (4/8/16)
};

// Applies a fused elementwise epilogue to one computed element (or vector of lanes) of
// the anchor node's output. `value` has the anchor output's element type (scalar or
// <N x T>); `linear_index` is the i64 linear (row-major) index of the first element in
// the anchor's output; `last_dim_index`, when the caller knows it (a GEMM: the column),
// that element's index along the output's last dim, with all lanes in that row; else
// null. Operands broadcast along the leading dims (a bias) are then loaded at that index,
// without a division or a row-crossing check. Returns the value
// to store (the group's final output type). Produced by the elementwise emitter from
// group.nodes[1..]; absent when nothing is fused.
using Epilogue = std::function<llvm::Value*(EmitContext&, llvm::Value* value, llvm::Value* linear_index,
                                            llvm::Value* last_dim_index)>;

// Dispatch: emits the body of the whole group.
Status emit_group(EmitContext& ec);

// Pointer to value `v`'s memory: the operand pointer whose operand.value == v.
// Precondition: v is an operand of the group.
llvm::Value* operand_ptr(EmitContext& ec, ir::ValueId v);

// Families (each in its own emit_<family>.cpp). `epilogue` may be null.
Status emit_elementwise_group(EmitContext& ec);                              // elementwise chains
Status emit_layout(EmitContext& ec, const ir::Node& node);                   // transpose, concat, split, slice, pad, gather, copies
Status emit_reduction(EmitContext& ec, const ir::Node& node);                // reduce_*, softmax, layer_norm, global_avg_pool, batch_norm
Status emit_matmul(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue);  // matmul, gemm
Status emit_conv(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue);    // conv2d
Status emit_pool(EmitContext& ec, const ir::Node& node);                     // max_pool, avg_pool
Status emit_index(EmitContext& ec, const ir::Node& node);                    // gather_nd, scatter_nd, top_k (emit_layout.cpp)
Status emit_dynamic(EmitContext& ec, const ir::Node& node);  // non_zero, unique, non_max_suppression (emit_dynamic.cpp)

Status emit_attention(EmitContext& ec);  // [matmul, chain..., softmax, matmul] (tiling::attention_shape)

// Built from group.nodes[1..] (all elementwise, each consuming the previous result).
Epilogue make_epilogue(EmitContext& ec);
// The same for chain[1..] over chain[0]'s output (the epilogue of part of a group).
Epilogue make_chain_epilogue(EmitContext& ec, std::span<const ir::NodeId> chain);

}  // namespace carve::jit::detail
