#include "cli/run_command.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include "carve/runtime/npy.h"
#include "carve/runtime/session.h"
#include "cli/graph_input.h"
#include "cli/run_explain.h"

namespace carve::cli {
namespace {

// Uniform floats in [-1, 1); integers in [0, 4) (safe as indices); random bools.
Status fill_random(runtime::Buffer& buffer, std::mt19937_64& rng) {
  CARVE_ASSIGN_OR_RETURN(auto bytes, buffer.mutable_bytes());
  const int64_t n = buffer.num_elements();
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  auto fill = [&](auto make) {
    using T = decltype(make());
    for (int64_t i = 0; i < n; ++i) {
      T value = make();
      std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
    }
  };
  switch (buffer.dtype()) {
    case ir::DType::kF32: fill([&] { return static_cast<float>(real(rng)); }); break;
    case ir::DType::kF64: fill([&] { return real(rng); }); break;
    case ir::DType::kI8: fill([&] { return static_cast<int8_t>(small(rng)); }); break;
    case ir::DType::kU8: fill([&] { return static_cast<uint8_t>(small(rng)); }); break;
    case ir::DType::kI32: fill([&] { return static_cast<int32_t>(small(rng)); }); break;
    case ir::DType::kI64: fill([&] { return static_cast<int64_t>(small(rng)); }); break;
    case ir::DType::kI16: fill([&] { return static_cast<int16_t>(small(rng)); }); break;
    case ir::DType::kU16: fill([&] { return static_cast<uint16_t>(small(rng)); }); break;
    case ir::DType::kU32: fill([&] { return static_cast<uint32_t>(small(rng)); }); break;
    case ir::DType::kU64: fill([&] { return static_cast<uint64_t>(small(rng)); }); break;
    case ir::DType::kBool: fill([&] { return static_cast<uint8_t>(small(rng) & 1); }); break;
    default:
      return Status(ErrorCode::kUnsupported,
                    fmt::format("--random-inputs cannot generate {}", ir::dtype_name(buffer.dtype())));
  }
  return Status();
}

// "FROM:TO" task indices.
Result<std::pair<int32_t, int32_t>> parse_edge(const std::string& text) {
  int32_t from = -1, to = -1;
  char colon = 0;
  char rest = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &from, &colon, &to, &rest) != 3 || colon != ':' || from < 0 || to < 0)
    return Status(ErrorCode::kInvalidArgument, fmt::format("--drop-edge '{}': expected FROM:TO task indices", text));
  return std::pair{from, to};
}

Result<std::vector<runtime::Buffer>> load_inputs(const runtime::CompiledProgram& program,
                                                 const RunCommandOptions& options, const LoadedGraph& loaded) {
  CARVE_ASSIGN_OR_RETURN(auto files, parse_input_args(options.inputs));
  const auto names = program.input_names();
  const auto types = program.input_types();
  for (const auto& [name, file] : files)
    if (std::find(names.begin(), names.end(), name) == names.end() &&
        std::find(loaded.value_inputs.begin(), loaded.value_inputs.end(), name) == loaded.value_inputs.end())
      return Status(ErrorCode::kNotFound, fmt::format("--input {}: the graph has no input '{}'", name, name));
  std::mt19937_64 rng(options.random_seed.value_or(0));
  std::vector<runtime::Buffer> inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = files.find(names[i]);
    if (it != files.end()) {
      CARVE_ASSIGN_OR_RETURN(runtime::Buffer b, runtime::read_npy(it->second));
      if (types[i].dtype == ir::DType::kBf16 && b.dtype() == ir::DType::kU16) {
        if (!options.bf16_as_u2)
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("--input {}: the input is bf16 and '{}' holds uint16; give --bf16-as-u2 if "
                                    "those are bf16 bit patterns",
                                    names[i], it->second));
        CARVE_ASSIGN_OR_RETURN(b, runtime::bf16_from_u2(b, it->second));
      }
      inputs.push_back(std::move(b));
      continue;
    }
    if (!options.random_seed)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("input '{}' ({}) is missing: give --input {}=FILE.npy or --random-inputs SEED",
                                names[i], types[i].to_string(), names[i]));
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer b,
                           runtime::Buffer::allocate(runtime::cpu_allocator(), types[i].dtype, types[i].shape));
    CARVE_RETURN_IF_ERROR(fill_random(b, rng));
    inputs.push_back(std::move(b));
  }
  return inputs;
}

// CPU seconds of the whole process, all threads (benchmarks on a shared machine).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The command's flags as compile options; the graph's handles start as zeros.
Result<runtime::CompileOptions> compile_options(const RunCommandOptions& options, const LoadedGraph& loaded) {
  CARVE_ASSIGN_OR_RETURN(runtime::CompileOptions compile, loaded_compile_options(loaded));
  compile.strategy = options.strategy;
  compile.order = options.order;
  compile.inplace = !options.no_inplace;
  compile.concat_views = !options.no_concat_views;
  compile.fuse = !options.no_fuse;
  compile.library_kernels = !options.no_library;
  compile.schedule.sequential = options.sequential;
  for (const std::string& edge : options.drop_edges) {
    CARVE_ASSIGN_OR_RETURN(auto pair, parse_edge(edge));
    compile.schedule.drop_edges.push_back(pair);
  }
  return compile;
}

}  // namespace

Result<std::string> output_file_name(std::string_view name) {
  if (name.empty()) return Status(ErrorCode::kInvalidArgument, "output with an empty name: no file name for it");
  if (name.find('\0') != std::string_view::npos)
    return Status(ErrorCode::kInvalidArgument, fmt::format("output name '{}' contains NUL", name.substr(0, name.find('\0'))));
  const bool only_dots = name.find_first_not_of('.') == std::string_view::npos;  // "." and ".." are directories
  std::string file;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    const bool keep = std::isalnum(u) || c == '_' || c == '-' || c == '~' || (c == '.' && !only_dots);
    file += keep ? std::string(1, c) : fmt::format("%{:02X}", u);
  }
  return file + ".npy";
}

namespace {

// DIR/<output name>.npy for every output (output_file_name).
Status write_outputs(const runtime::CompiledProgram& program, const std::vector<runtime::Buffer>& outputs,
                     const std::string& dir, bool bf16_as_u2, std::ostream& out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(ErrorCode::kIoError, fmt::format("cannot create '{}': {}", dir, ec.message()));
  const auto names = program.output_names();
  for (size_t i = 0; i < outputs.size(); ++i) {
    CARVE_ASSIGN_OR_RETURN(std::string file, output_file_name(names[i]));
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (outputs[i].dtype() == ir::DType::kBf16 && !bf16_as_u2)
      return Status(ErrorCode::kUnsupported,
                    fmt::format("output '{}' is bf16, which numpy has no dtype for: give --bf16-as-u2 to write "
                                "its bit patterns as <u2",
                                names[i]));
    CARVE_RETURN_IF_ERROR(runtime::write_npy(path, outputs[i], {.bf16_as_u2 = bf16_as_u2}));
    fmt::print(out, "wrote {}\n", path);
  }
  return Status();
}

Status run_graph(const RunCommandOptions& options, std::ostream& out, std::ostream& err) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); };
  const auto command_start = Clock::now();
  StartupTimes times;
  RssSamples rss;
  if (options.threads < 0) return Status(ErrorCode::kInvalidArgument, "--threads must be >= 0");
  if (options.compile_threads < 0) return Status(ErrorCode::kInvalidArgument, "--compile-threads must be >= 0");
  if (options.sequential && options.check_hazards)
    return Status(ErrorCode::kInvalidArgument, "--check-hazards needs a parallel run: drop --sequential");
  LoadGraphOptions load;
  // Unreadable --input files are reported by load_inputs, which names the input.
  if (auto files = input_files(options.graph, options.inputs); files.ok()) load.inputs = std::move(*files);
  auto step = Clock::now();
  CARVE_ASSIGN_OR_RETURN(LoadedGraph loaded, load_graph_file(options.graph, load));
  times.import = seconds(step);
  rss.after_import = read_rss();
  const std::string graph_name = loaded.graph.name;
  runtime::SessionOptions session_options;
  session_options.threads = options.threads;
  session_options.jit.disk_cache = !options.no_cache;
  session_options.jit.compile_threads = options.compile_threads;
  // Cache warnings (a bad entry recompiled, a failed write) on the command's error stream.
  auto log_mutex = std::make_shared<std::mutex>();
  session_options.jit.log = [&err, log_mutex](const std::string& line) {
    std::lock_guard<std::mutex> lock(*log_mutex);
    fmt::print(err, "carve: {}\n", line);
  };
  step = Clock::now();
  CARVE_ASSIGN_OR_RETURN(auto session, runtime::Session::create(session_options));
  times.session = seconds(step);
  CARVE_ASSIGN_OR_RETURN(runtime::CompileOptions compile, compile_options(options, loaded));
  step = Clock::now();
  // Moved: the program keeps the only copy of the graph's constants. (--explain compiles
  // again from a second import, after the memory report.)
  CARVE_ASSIGN_OR_RETURN(auto program, session->compile(std::move(loaded.graph), compile));
  times.compile = seconds(step);
  rss.after_compile = read_rss();
  step = Clock::now();
  CARVE_ASSIGN_OR_RETURN(auto inputs, load_inputs(*program, options, loaded));
  times.inputs = seconds(step);
  runtime::RunOptions run_options;
  run_options.check_hazards = options.check_hazards;
  run_options.record_trace = !options.trace.empty();
  // A dropped edge races only if the two tasks overlap in time: hold each task 2 ms.
  // Long enough that the two ends of a dropped edge overlap even on a loaded machine.
  if (!options.drop_edges.empty()) run_options.stretch_us = 20000;
  runtime::RunRecord record;
  std::vector<double> latencies, cpu_times;  // wall, and CPU time of the whole process
  std::vector<runtime::Buffer> outputs;
  size_t hazards = 0;
  for (int i = 0; i < std::max(options.iters, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    // Runs after the first write into the first run's outputs, as an embedder binding its
    // output buffers does: fresh ones each run would time the allocator's page faults.
    // Outputs with a data-dependent extent (ir/extent.h) come back at each run's shape.
    const auto& extents = program->program().output_extents;
    const bool dynamic = std::any_of(extents.begin(), extents.end(), [](const auto& e) { return e.axis >= 0; });
    if (i == 0 || dynamic) {
      CARVE_ASSIGN_OR_RETURN(outputs, program->run(inputs, run_options, &record));
    } else {
      CARVE_RETURN_IF_ERROR(program->run(inputs, outputs, run_options, &record));
    }
    latencies.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cpu_times.push_back(process_cpu_seconds() - cpu_start);
    for (const runtime::Hazard& h : record.hazards) fmt::print(out, "hazard: {}\n", h.to_string());
    hazards += record.hazards.size();
    if (i == 0) {
      times.first_run = latencies.back();
      times.total = seconds(command_start);
      rss.after_first_run = read_rss();
    }
  }
  if (options.explain) {
    rss.end = read_rss();
    fmt::print(out, "{}", program->explain());
    times.compile_threads = session->compile_threads();
    fmt::print(out, "{}", explain_startup(*program, times));
    fmt::print(out, "{}", explain_memory(*program, session->jit_stats(), rss));
    // A second compile of the same graph in this session: what the memory cache leaves.
    CARVE_ASSIGN_OR_RETURN(LoadedGraph reloaded, load_graph_file(options.graph, load));
    const auto again_start = Clock::now();
    CARVE_ASSIGN_OR_RETURN(auto again, session->compile(std::move(reloaded.graph), compile));
    fmt::print(out, "compile again in this session: {:.1f} ms ({} of {} kernels from the memory cache)\n",
               seconds(again_start) * 1e3, again->program().kernels_from_memory, again->program().kernels.size());
  }
  std::sort(latencies.begin(), latencies.end());
  fmt::print(out, "ran '{}' {} time(s) {}: min {:.3f} ms, median {:.3f} ms\n", graph_name, latencies.size(),
             record.parallel ? fmt::format("in parallel on {} threads", record.threads)
                             : fmt::format("sequentially ({})", record.fallback_reason),
             latencies.front() * 1e3, latencies[latencies.size() / 2] * 1e3);
  std::sort(cpu_times.begin(), cpu_times.end());
  fmt::print(out, "process CPU time per run: min {:.3f} ms, median {:.3f} ms\n", cpu_times.front() * 1e3,
             cpu_times[cpu_times.size() / 2] * 1e3);
  if (options.check_hazards) fmt::print(out, "hazard check: {} race(s)\n", hazards);
  if (!options.trace.empty()) {
    CARVE_RETURN_IF_ERROR(program->write_trace(options.trace, record));
    fmt::print(out, "wrote trace {}\n", options.trace);
  }
  if (hazards > 0)
    return Status(ErrorCode::kInternal, fmt::format("hazard checker found {} race(s)", hazards));
  if (options.output_dir.empty()) return Status();
  return write_outputs(*program, outputs, options.output_dir, options.bf16_as_u2, out);
}

}  // namespace

int run_run_command(const RunCommandOptions& options, std::ostream& out, std::ostream& err) {
  Status s = run_graph(options, out, err);
  if (s.ok()) return 0;
  fmt::print(err, "carve run: {}\n", s.to_string());
  return 1;
}

}  // namespace carve::cli
