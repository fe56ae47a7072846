// Internal: graph -> Program (plan, arena, kernels, launches). See session.h.
#pragma once

#include <memory>

#include "carve/jit/jit.h"
#include "carve/runtime/program.h"
#include "carve/runtime/session.h"

namespace carve::runtime::detail {

Result<std::unique_ptr<Program>> build_program(const ir::Graph& graph, const CompileOptions& options,
                                               jit::JitCompiler& jit);

}  // namespace carve::runtime::detail
