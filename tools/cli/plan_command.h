// `carve plan INPUT`: plan a MiniMalloc CSV or a text-format graph with one or all
// strategies, validate every plan, print a table and optionally JSON/CSV/SVG.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace carve::cli {

struct PlanCommandOptions {
  std::string input;
  std::string strategy = "all";
  std::optional<int64_t> capacity;
  double time_limit_seconds = 10.0;
  int64_t align = 1;            // minimum alignment applied to every buffer
  std::string order = "given";  // given | memory (graphs)
  bool no_inplace = false;      // graphs
  bool parallel_safe = false;   // graphs
  bool no_weights = false;      // ONNX models: do not read float initializers
  std::string json_path, csv_path, svg_path;
};

int run_plan_command(const PlanCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace carve::cli
