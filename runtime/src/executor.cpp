#include "carve/runtime/executor.h"

#include <cstring>

namespace carve::runtime {

std::byte* RegionBases::address(const MemoryRef& ref) const {
  const auto slot = static_cast<size_t>(ref.slot);
  std::byte* base = nullptr;
  switch (ref.region) {
    case Region::kArena: base = arena; break;
    case Region::kInput: base = inputs[slot]; break;
    case Region::kOutput: base = outputs[slot]; break;
    case Region::kConstant: base = constants[slot]; break;
    case Region::kHandle: base = handles[slot]; break;
    case Region::kHostInput: base = host_inputs[slot]; break;
    case Region::kHostOutput: base = host_outputs[slot]; break;
    case Region::kHostHandle: base = host_handles[slot]; break;
    case Region::kHostArena: base = host_arena; break;
    case Region::kHostConstant: base = host_constants[slot]; break;
  }
  return base + ref.offset;
}

void execute_launch(const Program& program, const Launch& launch, const RegionBases& bases, int64_t tile_begin,
                    int64_t tile_end) {
  if (launch.kind != LaunchKind::kKernel) {  // on the CPU every copy is a memmove
    std::memmove(bases.address(launch.operands[1]), bases.address(launch.operands[0]),
                 static_cast<size_t>(launch.operands[0].bytes));
    return;
  }
  // Kernel ABI: one address per operand. Small groups fit on the stack.
  constexpr size_t kInline = 16;
  void* inline_operands[kInline];
  std::vector<void*> heap_operands;
  void** operands = inline_operands;
  if (launch.operands.size() > kInline) {
    heap_operands.resize(launch.operands.size());
    operands = heap_operands.data();
  }
  for (size_t i = 0; i < launch.operands.size(); ++i) operands[i] = bases.address(launch.operands[i]);
  program.kernels[static_cast<size_t>(launch.kernel)].fn(operands, tile_begin, tile_end);
}

void execute_sequential(const Program& program, const RegionBases& bases) {
  for (const Launch& launch : program.launches) execute_launch(program, launch, bases, launch.tile_begin, launch.tile_end);
}

}  // namespace carve::runtime
