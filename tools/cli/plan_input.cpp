#include "cli/plan_input.h"

#include <fmt/format.h>

#include <algorithm>

#include "carve/planner/csv.h"
#include "cli/graph_input.h"

namespace carve::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<PlannedInput> load_plan_input(const PlanCommandOptions& options) {
  PlannedInput input;
  input.source = options.input;
  if (ends_with(options.input, ".csv")) {
    if (options.order != "given" || options.no_inplace || options.parallel_safe || options.no_weights)
      return Status(ErrorCode::kInvalidArgument,
                    "--order, --no-inplace, --parallel-safe and --no-weights apply to graphs, not to a CSV of buffers");
    CARVE_ASSIGN_OR_RETURN(input.problem, planner::read_minimalloc_csv(options.input));
  } else {
    CARVE_RETURN_IF_ERROR(load_graph_plan_input(options, input));
  }
  if (options.align > 1)
    for (auto& buffer : input.problem.buffers) buffer.alignment = std::max(buffer.alignment, options.align);
  return input;
}

}  // namespace carve::cli
