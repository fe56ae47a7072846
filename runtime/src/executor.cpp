#include "carve/runtime/executor.h"

#include <cstring>

namespace carve::runtime {

namespace {

bool is_bound_region(Region region) { return region != Region::kArena; }

}  // namespace

std::byte* operand_address(const Program& program, const RegionBases& bases, const MemoryRef& ref) {
  const auto slot = static_cast<size_t>(ref.slot);
  std::byte* base = nullptr;
  switch (ref.region) {
    case Region::kArena: {
      const Buffer& view = program.arena->views()[static_cast<size_t>(ref.view)].buffer;
      return view.unsafe_data() + (ref.offset - static_cast<int64_t>(view.offset()));
    }
    case Region::kInput: base = bases.inputs[slot]; break;
    case Region::kOutput: base = bases.outputs[slot]; break;
    case Region::kConstant: base = bases.constants[slot]; break;
    case Region::kHandle: base = bases.handles[slot]; break;
    case Region::kHostInput: base = bases.host_inputs[slot]; break;
    case Region::kHostOutput: base = bases.host_outputs[slot]; break;
    case Region::kHostHandle: base = bases.host_handles[slot]; break;
    case Region::kHostArena: base = bases.host_arena; break;
    case Region::kHostConstant: base = bases.host_constants[slot]; break;
  }
  return base + ref.offset;
}

LaunchOperands::LaunchOperands(const Program& program, const RegionBases& bases) {
  first_.reserve(program.launches.size());
  for (size_t l = 0; l < program.launches.size(); ++l) {
    first_.push_back(pointers_.size());
    const std::vector<MemoryRef>& refs = program.launches[l].operands;
    for (size_t i = 0; i < refs.size(); ++i) {
      if (is_bound_region(refs[i].region))
        bound_.push_back({pointers_.size(), static_cast<int32_t>(l), static_cast<int32_t>(i)});
      pointers_.push_back(operand_address(program, bases, refs[i]));
    }
  }
}

void LaunchOperands::bind(const Program& program, const RegionBases& bases) {
  for (const BoundOperand& b : bound_) {
    const MemoryRef& ref = program.launches[static_cast<size_t>(b.launch)].operands[static_cast<size_t>(b.operand)];
    pointers_[b.position] = operand_address(program, bases, ref);
  }
}

void execute_launch(const Program& program, const LaunchOperands& operands, int32_t launch, int64_t tile_begin,
                    int64_t tile_end) {
  const Launch& l = program.launches[static_cast<size_t>(launch)];
  void* const* ptrs = operands.operands(launch);
  if (l.kind != LaunchKind::kKernel) {  // on the CPU every copy is a memmove
    std::memmove(ptrs[1], ptrs[0], static_cast<size_t>(l.operands[0].bytes));
    return;
  }
  program.kernels[static_cast<size_t>(l.kernel)].fn(ptrs, tile_begin, tile_end);
}

void execute_sequential(const Program& program, const LaunchOperands& operands) {
  for (size_t i = 0; i < program.launches.size(); ++i) {
    const Launch& l = program.launches[i];
    execute_launch(program, operands, static_cast<int32_t>(i), l.tile_begin, l.tile_end);
  }
}

}  // namespace carve::runtime
