// Turns `carve plan`'s INPUT into a planner::Problem: a MiniMalloc CSV directly, or a
// text-format graph through liveness (views, in-place, execution order options).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "carve/planner/problem.h"
#include "cli/plan_command.h"

namespace carve::cli {

struct PlannedInput {
  std::string source;                       // the path
  planner::Problem problem;
  std::vector<std::string> notes;           // lines printed before the table
  std::map<std::string, int64_t> facts;     // extra figures for --json
};

Result<PlannedInput> load_plan_input(const PlanCommandOptions& options);

}  // namespace carve::cli
