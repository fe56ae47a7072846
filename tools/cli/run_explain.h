// `carve run --explain`: where the time to the first result went, and what the peak RSS is
// made of. Only measured figures are shown: the parts carve knows the size of (arena,
// constants, handles, JIT objects) and "other" = peak RSS minus those parts (LLVM, the
// libraries, heap, page-cache slack); RSS is read from /proc/self/status.
#pragma once

#include <cstdint>
#include <string>

#include "carve/jit/jit.h"
#include "carve/runtime/session.h"

namespace carve::cli {

// Seconds of the steps `carve run` takes before the first result (compile's own steps are
// in Program::times).
struct StartupTimes {
  double import = 0;     // reading the graph file (ONNX: import and folding)
  double session = 0;    // Session::create: the JIT's target setup and cache folder
  double compile = 0;    // Session::compile, all of it
  double inputs = 0;     // reading or generating the inputs
  double first_run = 0;
  double total = 0;      // from the command's start to the first result
  int compile_threads = 1;  // threads the kernels were compiled on
};

// Resident set size now and its peak so far (VmRSS, VmHWM), bytes; 0 when unreadable.
struct RssSample {
  int64_t rss = 0;
  int64_t peak = 0;
};
RssSample read_rss();

struct RssSamples {
  RssSample after_import, after_compile, after_first_run, end;
};

std::string explain_startup(const runtime::CompiledProgram& program, const StartupTimes& times);
std::string explain_memory(const runtime::CompiledProgram& program, const jit::JitStats& jit, const RssSamples& rss);

}  // namespace carve::cli
