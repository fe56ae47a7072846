// The offset-assignment problem every planner strategy solves, and its answer.
//
// A Problem is a list of buffers, each with a byte size, an alignment and a live
// interval [start, end) over execution steps (half-open, as in MiniMalloc's CSV).
// Two buffers conflict when their intervals intersect; a MemoryPlan gives each
// buffer a byte offset in one arena so that conflicting buffers share no byte.
// All sizes and offsets are 64-bit. Plain values; no internal synchronisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carve/status.h"

namespace carve::planner {

struct BufferRequest {
  std::string id;          // any string: a value name, or the CSV id ("b1" is fine)
  int64_t size = 0;        // bytes, >= 0 (0-byte buffers are placed at offset 0 and never conflict)
  int64_t alignment = 1;   // offset must be a multiple of this; power of two not required
  int64_t start = 0;       // first step the buffer is live
  int64_t end = 0;         // one past the last live step; start < end
};

struct Problem {
  std::vector<BufferRequest> buffers;
};

// Checks sizes >= 0, alignment >= 1, start < end, unique ids. Names the offending id.
Status check_problem(const Problem& problem);

struct MemoryPlan {
  int64_t arena_bytes = 0;       // max over buffers of offset + size
  std::vector<int64_t> offsets;  // index-parallel to Problem::buffers
};

// Lower bound on any plan's arena: the maximum over steps of the bytes live at that step.
int64_t lower_bound_bytes(const Problem& problem);

// Independent validator: every offset aligned and >= 0; no two buffers whose intervals
// intersect share a byte; arena_bytes covers every buffer. The message names both
// buffers of the first conflict found. Runs in O(n log n + conflicts).
Status validate_plan(const Problem& problem, const MemoryPlan& plan);

}  // namespace carve::planner
