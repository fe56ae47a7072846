#include "cli/cuda_dry_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/runtime/cuda/device_program.h"
#include "carve/runtime/session.h"

namespace carve::cli {
namespace {

namespace cu = jit::cuda;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<std::string> node_names(const ir::Graph& graph, const jit::KernelGroup& group) {
  std::vector<std::string> names;
  for (ir::NodeId n : group.nodes)
    names.push_back(fmt::format("{} ({})", graph.node(n).name, ir::op_name(graph.node(n).op)));
  return names;
}

DryRunFailure failure_of(const runtime::Program& p, int32_t kernel, std::string arch, Status status) {
  const jit::KernelGroup& group = p.kernels[static_cast<size_t>(kernel)].group;
  return DryRunFailure{kernel, group.name, node_names(p.graph, group), std::move(arch), "", std::move(status)};
}

// Every kernel launched on the host, node by node, with the reason.
std::vector<DryRunCpuNode> cpu_nodes(const runtime::Program& p, const std::string& reason) {
  std::vector<DryRunCpuNode> out;
  std::vector<bool> listed(p.kernels.size(), false);
  for (const runtime::Launch& l : p.launches) {
    if (!l.on_host || listed[static_cast<size_t>(l.kernel)]) continue;
    listed[static_cast<size_t>(l.kernel)] = true;
    for (ir::NodeId n : p.kernels[static_cast<size_t>(l.kernel)].group.nodes)
      out.push_back({l.kernel, p.graph.node(n).name, std::string(ir::op_name(p.graph.node(n).op)), reason});
  }
  return out;
}

// The distinct sources, and per source the kernels (indices) that use it and what for
// ("" for a group's own kernel, "cuBLASLt im2col"/"cuBLASLt epilogue"), in kernel order.
struct Sources {
  std::vector<std::string> text;
  std::vector<std::vector<std::pair<int32_t, std::string>>> users;
  std::map<std::string, size_t> index;

  void add(std::string source, int32_t kernel, std::string part) {
    auto [it, added] = index.emplace(std::move(source), text.size());
    if (added) {
      text.push_back(it->first);
      users.emplace_back();
    }
    users[it->second].emplace_back(kernel, std::move(part));
  }
};

// Runs job(i) for i in [0, count) on up to `threads` threads (NVRTC is thread-safe and
// each compile is single-threaded, so this is where a multi-core machine gains).
template <typename Job>
void run_jobs(size_t count, int threads, const Job& job) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) job(i);
  };
  std::vector<std::jthread> pool;
  const size_t n = std::min(count, static_cast<size_t>(std::max(threads, 1)));
  for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
}

}  // namespace

Result<DryRunReport> cuda_dry_run(const ir::Graph& graph, const runtime::CompileOptions& compile,
                                  cu::NvrtcCompiler& nvrtc, const DryRunOptions& options) {
  DryRunReport report;
  for (const std::string& arch : options.archs) {
    CARVE_ASSIGN_OR_RETURN(std::string target, nvrtc.resolve_target(arch));
    report.archs.push_back({arch, std::move(target)});
  }
  // The program a cuda Session builds; its arena on the host, since nothing runs.
  auto start = Clock::now();
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Program> program,
                         runtime::build_device_program(graph, compile, runtime::cpu_allocator()));
  const runtime::Program& p = *program;
  report.build_seconds = seconds_since(start);
  report.cpu_nodes = cpu_nodes(p, options.placement_reason);

  start = Clock::now();
  Sources sources;
  const std::vector<bool> on_device = runtime::device_kernels(p);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (!on_device[k]) continue;
    ++report.kernels;
    const auto kernel = static_cast<int32_t>(k);
    const jit::KernelGroup& group = p.kernels[k].group;
    // The generated kernel: what runs without cuBLASLt, or where it declines a GEMM.
    auto src = cu::generate_kernel(p.graph, group);
    if (!src.ok()) {  // a cuda Session's compile fails here too: no automatic CPU fallback
      report.failures.push_back(failure_of(p, kernel, "", src.status()));
      continue;
    }
    sources.add(std::move(src->source), kernel, "");
    // With cuBLASLt (SessionOptions::cuda_gemm), a GEMM group's im2col and epilogue kernels.
    auto gemm = cu::plan_library_gemm(p.graph, group);
    if (!gemm.ok() && gemm.status().code() != ErrorCode::kUnsupported) {
      report.failures.push_back(failure_of(p, kernel, "", gemm.status().with_context("cuBLASLt GEMM plan")));
      continue;
    }
    if (!gemm.ok()) continue;
    ++report.library_gemms;
    if (gemm->im2col) sources.add(std::move(gemm->im2col->source), kernel, "cuBLASLt im2col");
    if (gemm->epilogue) sources.add(std::move(gemm->epilogue->source), kernel, "cuBLASLt epilogue");
  }
  report.generate_seconds = seconds_since(start);
  report.unique_sources = static_cast<int64_t>(sources.text.size());

  // One job per (source, arch); results kept by job so the report is in a fixed order.
  start = Clock::now();
  const size_t archs = report.archs.size();
  std::vector<std::optional<Result<std::shared_ptr<const cu::CudaBinary>>>> results(sources.text.size() * archs);
  run_jobs(results.size(), options.threads, [&](size_t j) {
    results[j].emplace(nvrtc.compile(sources.text[j / archs], report.archs[j % archs].arch));
  });
  report.nvrtc_seconds = seconds_since(start);
  for (size_t j = 0; j < results.size(); ++j) {
    DryRunArch& arch = report.archs[j % archs];
    const auto& result = *results[j];
    if (result.ok()) {
      ++arch.compiled;
      if ((*result)->from_memory_cache || (*result)->from_disk_cache) ++arch.cache_hits;
      continue;
    }
    ++arch.failed;
    const auto& users = sources.users[j / archs];
    const auto& [kernel, part] = users.front();
    report.failures.push_back(failure_of(p, kernel, arch.arch, result.status()));
    report.failures.back().part = part;
    report.failures.back().same_source = static_cast<int32_t>(users.size()) - 1;
  }
  return report;
}

std::string describe_failure(const DryRunFailure& f, int log_lines) {
  // The message's first lines: NVRTC's first errors say what is wrong, the rest repeats.
  std::string text = f.status.to_string();
  size_t end = 0;
  for (int line = 0; line < log_lines && end != std::string::npos; ++line) {
    end = text.find('\n', end);
    if (end != std::string::npos) ++end;
  }
  if (end != std::string::npos) text = text.substr(0, end) + "...";
  std::string nodes;
  for (const std::string& n : f.nodes) nodes += (nodes.empty() ? "" : ", ") + n;
  return fmt::format("kernel {} '{}' [{}]{}{}{}: {}", f.kernel, f.group, nodes,
                     f.part.empty() ? "" : " (" + f.part + ")",
                     f.arch.empty() ? " (code generation)" : " for " + f.arch,
                     f.same_source > 0 ? fmt::format(" (and {} more kernels with this source)", f.same_source) : "",
                     text);
}

}  // namespace carve::cli
