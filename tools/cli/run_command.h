// `carve run GRAPH`: compile, plan, run; inputs from .npy files or random; outputs to
// DIR/<output file name> (output_file_name); latency over --iters runs; --explain prints kernels, the plan and
// the hazard DAG. Runs in parallel on --threads (sequential fallback for tiny programs),
// or --sequential; --check-hazards reports races and fails the command when it finds any;
// --trace FILE writes the last run's timeline. Kernels are cached on disk unless --no-cache;
// cache warnings (a bad entry recompiled, a failed write) go to the error stream.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "carve/status.h"

namespace carve::cli {

struct RunCommandOptions {
  std::string graph;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string output_dir;
  std::optional<uint64_t> random_seed;
  bool bf16_as_u2 = false;  // bf16 inputs and outputs as '<u2' .npy bit patterns (npy.h)
  int iters = 1;
  bool explain = false;
  std::string strategy = "greedy-size";
  std::string order = "given";
  bool no_inplace = false;
  bool no_concat_views = false;
  bool no_fuse = false;
  bool no_library = false;  // CompileOptions::library_kernels = false
  int compile_threads = 0;  // 0 = hardware concurrency
  bool no_cache = false;  // no kernel disk cache (jit/kernel_cache.h); its warnings go to `err`
  int threads = 0;  // 0 = hardware concurrency
  bool sequential = false;
  bool check_hazards = false;
  std::string trace;  // Chrome/Perfetto JSON of the last run
  std::vector<std::string> drop_edges;  // debug: "FROM:TO" task edges to remove
};

int run_run_command(const RunCommandOptions& options, std::ostream& out, std::ostream& err);

// The .npy file name of an output: the name with every byte outside [A-Za-z0-9._~-]
// percent-encoded ("/head/y" -> "%2Fhead%2Fy.npy"; a name of only dots has its dots
// encoded), so distinct names get distinct files and the name can be read back
// (urllib.parse.unquote). kInvalidArgument for an empty name or one containing NUL.
Result<std::string> output_file_name(std::string_view name);

}  // namespace carve::cli
