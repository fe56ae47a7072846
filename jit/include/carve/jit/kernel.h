// Kernels: what the JIT compiles and the runtime launches. No LLVM types here.
//
// Kernel ABI (a plain C function over raw pointers; no allocation inside a kernel):
//   void kernel(void* const* operands, int64_t tile_begin, int64_t tile_end);
// operands[i] is the address of KernelGroup::operands[i] (inputs, then outputs, then the
// scratch buffer when scratch_bytes > 0). A kernel computes tiles [tile_begin, tile_end)
// of its iteration space; tiles are independent, so the scheduler may run disjoint tile
// ranges in parallel. Calling it with [0, num_tiles) runs the whole group.
//
// A KernelGroup is one or more graph nodes compiled into one kernel: an elementwise chain,
// or a matmul/gemm/conv with a fused elementwise epilogue, or one node of any other op.
// View nodes (is_view, and contiguous slices the planner folds) get no kernel.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "carve/ir/graph.h"

namespace carve::jit {

using KernelFn = void (*)(void* const* operands, int64_t tile_begin, int64_t tile_end);

enum class OperandRole : uint8_t { kInput, kOutput, kScratch };

struct KernelOperand {
  OperandRole role = OperandRole::kInput;
  ir::ValueId value = ir::kNoValue;  // kNoValue for scratch
};

struct KernelGroup {
  std::string name;                    // e.g. "fused_add_gelu_3" (unique in a program)
  std::vector<ir::NodeId> nodes;       // in execution order; nodes.front() is the anchor
  std::vector<KernelOperand> operands; // the ABI order
  // Values produced inside the group and never stored (fused intermediates).
  std::vector<ir::ValueId> internal_values;
  int64_t num_tiles = 1;               // independent tiles of the iteration space
  int64_t scratch_bytes = 0;           // temporary memory the kernel needs (planned up front)
  // Operand index pairs that may share bytes (the plan put an output in place over an
  // input, or two inputs are the same value). Every operand in no pair gets `noalias`.
  std::vector<std::pair<int32_t, int32_t>> may_alias;
};

}  // namespace carve::jit
