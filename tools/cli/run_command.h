// `carve run GRAPH`: compile, plan, run; inputs from .npy files or random; outputs to
// DIR/<output name>.npy; latency over --iters runs; --explain prints kernels, the plan and
// the hazard DAG. Runs in parallel on --threads (sequential fallback for tiny programs),
// or --sequential; --check-hazards reports races and fails the command when it finds any;
// --trace FILE writes the last run's timeline.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace carve::cli {

struct RunCommandOptions {
  std::string graph;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string output_dir;
  std::optional<uint64_t> random_seed;
  int iters = 1;
  bool explain = false;
  std::string strategy = "greedy-size";
  std::string order = "given";
  bool no_inplace = false;
  bool no_fuse = false;
  int threads = 0;  // 0 = hardware concurrency
  bool sequential = false;
  bool check_hazards = false;
  std::string trace;  // Chrome/Perfetto JSON of the last run
  std::vector<std::string> drop_edges;  // debug: "FROM:TO" task edges to remove
};

int run_run_command(const RunCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace carve::cli
