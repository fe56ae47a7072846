// Executors: run a Program's launches given the base address of every memory region.
// The sequential executor runs launches in program order, each over its whole tile range.
// Thread-safety: an executor call owns the program's arena for its duration; the caller
// (CompiledProgram::run) serialises calls.
#pragma once

#include <cstddef>
#include <vector>

#include "carve/runtime/program.h"

namespace carve::runtime {

// Base addresses, per region and slot, for one run.
struct RegionBases {
  std::byte* arena = nullptr;
  std::vector<std::byte*> inputs, outputs, constants, handles;
  std::vector<std::byte*> host_inputs, host_outputs, host_handles;  // device programs only
  std::byte* host_arena = nullptr;                                    // mixed programs only
  std::vector<std::byte*> host_constants;                             // mixed programs only

  std::byte* address(const MemoryRef& ref) const;
};

// Runs one launch over tiles [tile_begin, tile_end) (a kernel) or its copy.
void execute_launch(const Program& program, const Launch& launch, const RegionBases& bases, int64_t tile_begin,
                    int64_t tile_end);

void execute_sequential(const Program& program, const RegionBases& bases);

}  // namespace carve::runtime
