#include "cli/run_explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace carve::cli {
namespace {

std::string ms(double seconds) { return fmt::format("{:9.1f} ms", seconds * 1e3); }
std::string mb(int64_t bytes) { return fmt::format("{:9.1f} MB", static_cast<double>(bytes) / 1e6); }

}  // namespace

RssSample read_rss() {
  RssSample s;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string name;
    int64_t kb = 0;
    fields >> name >> kb;
    if (name == "VmRSS:") s.rss = kb * 1024;
    if (name == "VmHWM:") s.peak = kb * 1024;
  }
  return s;
}

std::string explain_startup(const runtime::CompiledProgram& program, const StartupTimes& t) {
  const runtime::Program& p = program.program();
  const runtime::CompileTimes& c = p.times;
  const double compile_parts = c.prepare + c.plan + c.materialise + c.jit + c.schedule;
  std::string text = fmt::format("time to first result: {:.1f} ms\n", t.total * 1e3);
  text += fmt::format("  import        {}  (read the graph file; ONNX: import, fold constants)\n", ms(t.import));
  text += fmt::format("  session       {}  (JIT target, kernel cache folder)\n", ms(t.session));
  text += fmt::format("  compile       {}\n", ms(t.compile));
  text += fmt::format("    prepare     {}  (verify, copy the graph, order, constants, kernel groups)\n", ms(c.prepare));
  text += fmt::format("    plan        {}  (arena: {})\n", ms(c.plan), p.plan_summary.strategy);
  text += fmt::format("    materialise {}  (arena storage, views, launches)\n", ms(c.materialise));
  text += fmt::format("    kernels     {}  ({} kernels: {} compiled, {} from the memory cache, {} from the disk cache; "
                      "on {} threads)\n",
                      ms(c.jit), p.kernels.size(), p.kernels_compiled, p.kernels_from_memory, p.kernels_from_disk,
                      t.compile_threads);
  text += fmt::format("    schedule    {}  (hazard DAG, kernel operands)\n", ms(c.schedule));
  if (t.compile > compile_parts) text += fmt::format("    rest        {}\n", ms(t.compile - compile_parts));
  text += fmt::format("  inputs        {}\n", ms(t.inputs));
  text += fmt::format("  first run     {}\n", ms(t.first_run));
  return text;
}

std::string explain_memory(const runtime::CompiledProgram& program, const jit::JitStats& jit, const RssSamples& rss) {
  const runtime::Program& p = program.program();
  const int64_t arena = p.arena ? static_cast<int64_t>(p.arena->arena_bytes()) : 0;
  int64_t scratch_sum = 0, scratch_max = 0, scratch_count = 0;
  for (const runtime::ProgramKernel& k : p.kernels) {
    if (k.group.scratch_bytes <= 0) continue;
    scratch_sum += k.group.scratch_bytes;
    scratch_max = std::max(scratch_max, k.group.scratch_bytes);
    ++scratch_count;
  }
  int64_t constants = 0, handles = 0;
  for (const auto& b : p.constant_buffers) constants += b ? static_cast<int64_t>(b->size()) : 0;
  for (const auto& h : p.handles) handles += static_cast<int64_t>(h->memory().size());
  const int64_t known = arena + constants + handles + jit.object_bytes;
  const int64_t peak = rss.end.peak;
  std::string text = fmt::format("memory: peak RSS {:.1f} MB (VmHWM at the end)\n", static_cast<double>(peak) / 1e6);
  text += fmt::format("  arena            {}  (planned values and kernel scratch)\n", mb(arena));
  text += fmt::format("    scratch        {}  ({} kernels' scratch buffers, largest {:.1f} MB; planned in the arena, "
                      "sharing bytes with values)\n",
                      mb(scratch_sum), scratch_count, static_cast<double>(scratch_max) / 1e6);
  text += fmt::format("  constants        {}  (the program's", mb(constants));
  if (p.released_constant_bytes > 0)
    text += fmt::format("; {:.1f} MB more freed once library kernels copied them into their layout",
                        static_cast<double>(p.released_constant_bytes) / 1e6);
  text += ")\n";
  text += fmt::format("  handles          {}\n", mb(handles));
  text += fmt::format("  JIT objects      {}  (object files of the {} distinct kernels linked: code and data)\n",
                      mb(jit.object_bytes), jit.codegen_count + jit.disk_hits);
  text += fmt::format("  other            {}  (peak RSS minus the above: LLVM, libraries, heap)\n", mb(peak - known));
  text += fmt::format("  RSS after import {:.1f} MB, after compile {:.1f} MB, after the first run {:.1f} MB\n",
                      static_cast<double>(rss.after_import.rss) / 1e6, static_cast<double>(rss.after_compile.rss) / 1e6,
                      static_cast<double>(rss.after_first_run.rss) / 1e6);
  return text;
}

}  // namespace carve::cli
