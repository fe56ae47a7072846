// Internal: graph -> Program (plan, arena, kernels, launches). See session.h.
#pragma once

#include <memory>

#include "carve/jit/jit.h"
#include "carve/runtime/program.h"
#include "carve/runtime/session.h"

namespace carve::runtime::detail {

// `jit` null: a device program (Program::on_device; kernels without CPU code, arena on
// `arena_allocator`, transfers not yet added: device_program.h).
Result<std::unique_ptr<Program>> build_program(ir::Graph graph, const CompileOptions& options,
                                               jit::JitCompiler* jit,
                                               std::shared_ptr<Allocator> arena_allocator = cpu_allocator());

}  // namespace carve::runtime::detail
