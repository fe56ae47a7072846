#include "cli/compile_command.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "carve/file.h"
#include "carve/jit/cuda/nvrtc.h"
#include "carve/runtime/session.h"
#include "cli/cuda_dry_run.h"
#include "cli/graph_input.h"

namespace carve::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// --place NODE=cpu|cuda as CompileOptions::placement.
Result<std::map<std::string, runtime::DeviceType>> parse_placement(const std::vector<std::string>& args) {
  std::map<std::string, runtime::DeviceType> placement;
  for (const std::string& arg : args) {
    const auto eq = arg.rfind('=');
    const std::string device = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (eq == 0 || (device != "cpu" && device != "cuda"))
      return Status(ErrorCode::kInvalidArgument, fmt::format("--place '{}': expected NODE=cpu or NODE=cuda", arg));
    placement[arg.substr(0, eq)] = device == "cpu" ? runtime::DeviceType::kCpu : runtime::DeviceType::kCuda;
  }
  return placement;
}

// One model read and bound as a cuda Session would compile it.
struct Model {
  LoadedGraph loaded;
  runtime::CompileOptions compile;
  double import_seconds = 0;
};

Result<Model> load_model(const std::string& path, const CompileCommandOptions& options) {
  const auto start = Clock::now();
  Model model;
  LoadGraphOptions load;
  CARVE_ASSIGN_OR_RETURN(load.inputs, input_files(path, options.inputs));
  CARVE_ASSIGN_OR_RETURN(model.loaded, load_graph_file(path, load));
  CARVE_ASSIGN_OR_RETURN(model.compile, loaded_compile_options(model.loaded));
  CARVE_ASSIGN_OR_RETURN(model.compile.placement, parse_placement(options.place));
  model.import_seconds = seconds_since(start);
  return model;
}

void print_report(std::ostream& out, const std::string& path, const DryRunReport& r, double seconds) {
  fmt::print(out, "model {}: {} GPU kernels generated ({} GEMM groups also as cuBLASLt im2col/epilogue), {} unique "
             "sources, {} nodes on the CPU\n", path, r.kernels, r.library_gemms, r.unique_sources, r.cpu_nodes.size());
  for (const DryRunArch& a : r.archs)
    fmt::print(out, "  {}: {} compiled{} ({} from cache){}\n", a.arch, a.compiled,
               a.target == a.arch ? "" : fmt::format(" as {}", a.target), a.cache_hits,
               a.failed > 0 ? fmt::format(", {} FAILED", a.failed) : "");
  for (const DryRunCpuNode& c : r.cpu_nodes)
    fmt::print(out, "  on the CPU: node '{}' ({}), kernel {}: {}\n", c.node, c.op, c.kernel, c.reason);
  fmt::print(out, "  time: {:.2f} s (build {:.2f} s, generate {:.2f} s, NVRTC {:.2f} s)\n", seconds, r.build_seconds,
             r.generate_seconds, r.nvrtc_seconds);
}

nlohmann::json report_json(const std::string& path, const DryRunReport& r, double seconds) {
  nlohmann::json j{{"model", path},
                   {"ok", r.ok()},
                   {"kernels", r.kernels},
                   {"library_gemms", r.library_gemms},
                   {"unique_sources", r.unique_sources},
                   {"seconds", seconds},
                   {"nvrtc_seconds", r.nvrtc_seconds}};
  j["archs"] = nlohmann::json::array();
  for (const DryRunArch& a : r.archs)
    j["archs"].push_back({{"arch", a.arch}, {"target", a.target}, {"compiled", a.compiled},
                          {"cache_hits", a.cache_hits}, {"failed", a.failed}});
  j["cpu_nodes"] = nlohmann::json::array();
  for (const DryRunCpuNode& c : r.cpu_nodes)
    j["cpu_nodes"].push_back({{"node", c.node}, {"op", c.op}, {"kernel", c.kernel}, {"reason", c.reason}});
  j["failures"] = nlohmann::json::array();
  for (const DryRunFailure& f : r.failures)
    j["failures"].push_back({{"kernel", f.kernel}, {"group", f.group}, {"nodes", f.nodes}, {"part", f.part},
                             {"arch", f.arch}, {"same_source", f.same_source}, {"message", f.status.to_string()}});
  return j;
}

Status dry_run(const CompileCommandOptions& options, std::ostream& out, std::ostream& err) {
  const auto start = Clock::now();
  jit::cuda::NvrtcOptions nvrtc_options;
  nvrtc_options.disk_cache = !options.no_cache;
  nvrtc_options.extra = options.nvrtc_options;
  auto nvrtc = jit::cuda::NvrtcCompiler::create(nvrtc_options);
  if (!nvrtc.ok()) return nvrtc.status().with_context("--dry-run compiles with NVRTC (the CUDA toolkit's libnvrtc)");
  DryRunOptions dry;
  dry.archs = options.archs.empty() ? std::vector<std::string>{"sm_80", "sm_90"} : options.archs;
  dry.threads = options.compile_threads > 0 ? options.compile_threads
                                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  dry.placement_reason = "placed on cpu by --place (a cuda Session compiles it with the CPU JIT)";
  for (const std::string& arch : dry.archs)  // a bad arch is the command's error, before any model
    if (auto target = (*nvrtc)->resolve_target(arch); !target.ok()) return target.status().with_context("--arch");
  CARVE_ASSIGN_OR_RETURN(std::string version, jit::cuda::nvrtc_version());
  const std::string& cache = (*nvrtc)->cache_dir();
  fmt::print(out, "carve compile --dry-run: NVRTC {}, archs {}, {} threads, {}\n", version, fmt::join(dry.archs, ", "),
             dry.threads, cache.empty() ? std::string("no disk cache") : "disk cache " + cache);

  nlohmann::json json{{"nvrtc_version", version}, {"archs", dry.archs}, {"models", nlohmann::json::array()}};
  int64_t kernels = 0, sources = 0, cpu_nodes = 0;
  std::vector<std::string> failures;
  for (const std::string& path : options.models) {
    const auto model_start = Clock::now();
    auto model = load_model(path, options);
    if (!model.ok()) return model.status().with_context(path);
    auto report = cuda_dry_run(model->loaded.graph, model->compile, **nvrtc, dry);
    if (!report.ok()) return report.status().with_context(path);
    const double seconds = seconds_since(model_start);
    print_report(out, path, *report, seconds);
    json["models"].push_back(report_json(path, *report, seconds));
    kernels += report->kernels;
    sources += report->unique_sources;
    cpu_nodes += static_cast<int64_t>(report->cpu_nodes.size());
    for (const DryRunFailure& f : report->failures) failures.push_back(fmt::format("{}: {}", path, describe_failure(f)));
  }
  const jit::cuda::NvrtcStats stats = (*nvrtc)->stats();
  const double seconds = seconds_since(start);
  fmt::print(out,
             "total: {} models, {} GPU kernels ({} unique sources), {} nodes on the CPU; NVRTC: {} compiles, {} from "
             "the memory cache, {} from the disk cache, {} failed; {:.2f} s\n",
             options.models.size(), kernels, sources, cpu_nodes, stats.compiles, stats.memory_hits, stats.disk_hits,
             failures.size(), seconds);
  json["ok"] = failures.empty();
  json["seconds"] = seconds;
  if (!options.json_path.empty()) CARVE_RETURN_IF_ERROR(write_file(options.json_path, json.dump(2) + "\n"));
  if (failures.empty()) return Status();
  for (const std::string& f : failures) fmt::print(err, "carve compile: FAILED {}\n", f);
  return Status(ErrorCode::kInternal, fmt::format("{} kernel compile(s) failed (named above); first: {}",
                                                  failures.size(), failures.front().substr(0, failures.front().find('\n'))));
}

// Without --dry-run: the kernels compiled for and loaded on device 0 by a cuda Session.
Status device_compile(const CompileCommandOptions& options, std::ostream& out) {
  if (!options.archs.empty())
    return Status(ErrorCode::kInvalidArgument, "--arch goes with --dry-run (a device compiles for its own arch)");
  runtime::SessionOptions session_options;
  session_options.device = {runtime::DeviceType::kCuda, 0};
  auto session = runtime::Session::create(session_options);
  if (!session.ok() && session.status().code() == ErrorCode::kUnavailable)
    return Status(ErrorCode::kUnavailable,
                  fmt::format("{}; pass --dry-run to generate and compile the kernels without a GPU",
                              session.status().message()));
  if (!session.ok()) return session.status();
  for (const std::string& path : options.models) {
    const auto start = Clock::now();
    CARVE_ASSIGN_OR_RETURN(Model model, load_model(path, options));
    auto program = (*session)->compile(model.loaded.graph, model.compile);
    if (!program.ok()) return program.status().with_context(path);
    fmt::print(out, "model {}: {} kernels compiled and loaded on {} in {:.2f} s\n", path,
               (*program)->program().kernels.size(), (*session)->device().to_string(), seconds_since(start));
  }
  return Status();
}

Status compile_models(const CompileCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (options.device == "cpu")
    return Status(ErrorCode::kUnsupported,
                  "--device cpu is not supported: `carve run MODEL --explain` compiles for the CPU and reports it");
  if (options.device != "cuda")
    return Status(ErrorCode::kInvalidArgument, fmt::format("--device '{}': expected cuda or cpu", options.device));
  if (options.compile_threads < 0) return Status(ErrorCode::kInvalidArgument, "--compile-threads must be >= 0");
  return options.dry_run ? dry_run(options, out, err) : device_compile(options, out);
}

}  // namespace

int run_compile_command(const CompileCommandOptions& options, std::ostream& out, std::ostream& err) {
  Status s = compile_models(options, out, err);
  if (s.ok()) return 0;
  fmt::print(err, "carve compile: {}\n", s.to_string());
  return 1;
}

}  // namespace carve::cli
