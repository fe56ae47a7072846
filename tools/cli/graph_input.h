// `carve plan GRAPH`: read a text-format graph, verify it, choose the execution order
// and turn it into a planner Problem (views, in-place), adding notes and facts.
#pragma once

#include "carve/ir/graph.h"
#include "cli/plan_input.h"

namespace carve::cli {

Result<ir::Graph> read_graph_file(const std::string& path);
Status load_graph_plan_input(const PlanCommandOptions& options, PlannedInput& input);

}  // namespace carve::cli
