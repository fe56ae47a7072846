// SVG picture of a memory plan: time on x, offset on y (0 at the bottom), one rectangle
// per non-empty buffer, and horizontal lines with labels for the lower bound and the arena.
//
// Coordinates are scaled to a fixed canvas (1200 x 700 px plot area), so the file stays
// readable at any size: per-buffer id labels are drawn only for <= 40 buffers, hover
// titles for <= 2000, rectangle outlines for <= 2000; rectangles are at least 0.5 px
// wide/high so tiny buffers stay visible. Buffers without an offset in `plan` (when
// plan.offsets is shorter than the problem) are skipped. Ids are XML-escaped.
#pragma once

#include <cstdint>
#include <string>

#include "carve/planner/problem.h"

namespace carve::planner {

std::string plan_to_svg(const Problem& problem, const MemoryPlan& plan, int64_t lower_bound);

}  // namespace carve::planner
