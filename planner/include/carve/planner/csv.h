// MiniMalloc CSV I/O for planner problems and plans.
//
// Input format: a header row naming the columns, then one buffer per row:
//   id,lower,upper,size[,alignment]
// Columns are found by header name (any order); unknown extra columns (offset, hint,
// gaps, ...) are ignored. `lower`/`upper` are the half-open live interval [lower, upper).
// `id` is any string without commas. Blank lines are skipped; CRLF is accepted; fields
// are trimmed of spaces and tabs. No quoting.
//
// Errors are kParseError with "line N:" (1-based, header = line 1): missing header or
// required column, wrong field count, non-numeric lower/upper/size/alignment, negative
// size, lower >= upper, alignment < 1, duplicate id (naming the first line). A file that
// cannot be read is kIoError naming the path.
#pragma once

#include <string>
#include <string_view>

#include "carve/planner/problem.h"
#include "carve/status.h"

namespace carve::planner {

Result<Problem> parse_minimalloc_csv(std::string_view text);
Result<Problem> read_minimalloc_csv(const std::string& path);

// "id,lower,upper,size[,alignment],offset" with one row per buffer, in problem order;
// the alignment column is written only when some buffer has alignment != 1.
// kInvalidArgument when the plan does not have one offset per buffer, or an id holds a
// comma, quote, CR or LF (it could not be read back).
Result<std::string> write_minimalloc_csv(const Problem& problem, const MemoryPlan& plan);
Status write_minimalloc_csv_file(const std::string& path, const Problem& problem,
                                 const MemoryPlan& plan);

}  // namespace carve::planner
