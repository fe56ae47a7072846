// Turns `carve plan`'s INPUT into a planner::Problem: a MiniMalloc CSV directly, or a
// text-format graph through liveness (views, in-place, execution order options).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "carve/planner/parallel_safe.h"
#include "carve/planner/problem.h"
#include "cli/plan_command.h"

namespace carve::cli {

struct PlannedInput {
  std::string source;                       // the path
  planner::Problem problem;
  std::vector<std::string> notes;           // lines printed before the table
  std::map<std::string, int64_t> facts;     // extra figures for --json
  // --parallel-safe: buffer pairs the graph leaves unordered (must not share bytes).
  bool parallel_safe = false;
  std::vector<planner::BufferPair> unordered_pairs;
};

Result<PlannedInput> load_plan_input(const PlanCommandOptions& options);

}  // namespace carve::cli
