// `carve run GRAPH`: compile, plan, run; inputs from .npy files or random; outputs to
// DIR/<output name>.npy; latency over --iters runs; --explain prints kernels and the plan.
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
};

int run_run_command(const RunCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace carve::cli
