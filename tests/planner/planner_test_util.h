// Helpers shared by the planner test files: rapidcheck problem generators and an
// all-pairs reference checker used to cross-check the sweep validator.
#pragma once

#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "carve/planner/problem.h"

namespace carve::planner {

// rapidcheck prints counterexamples through this (found by ADL).
inline void showValue(const Problem& p, std::ostream& os) {
  os << "Problem{" << p.buffers.size() << " buffers:";
  for (const auto& b : p.buffers) {
    os << " " << b.id << "[" << b.start << "," << b.end << ") size " << b.size << " align " << b.alignment << ";";
  }
  os << "}";
}

}  // namespace carve::planner

namespace carve::planner::testing {

inline BufferRequest buf(std::string id, int64_t start, int64_t end, int64_t size,
                         int64_t alignment = 1) {
  BufferRequest b;
  b.id = std::move(id);
  b.start = start;
  b.end = end;
  b.size = size;
  b.alignment = alignment;
  return b;
}

// The Pisarchyk & Lee example, (first, last, size) with inclusive last -> [first, last+1).
inline Problem paper_example() {
  const int64_t t[8][3] = {{0, 1, 32}, {1, 4, 28}, {2, 5, 36}, {3, 5, 16},
                           {4, 5, 8},  {5, 7, 64}, {6, 8, 10}, {7, 8, 40}};
  Problem p;
  for (int i = 0; i < 8; ++i) p.buffers.push_back(buf(fmt::format("t{}", i), t[i][0], t[i][1] + 1, t[i][2]));
  return p;
}

// Random valid problems: 0-40 buffers, sizes incl. 0, alignments incl. non powers of two,
// short and long intervals over a small time range (so many overlap).
inline rc::Gen<Problem> gen_problem(int max_buffers = 40) {
  return rc::gen::exec([max_buffers] {
    Problem p;
    const int n = *rc::gen::inRange(0, max_buffers + 1);
    const int64_t horizon = *rc::gen::inRange<int64_t>(1, 40);
    for (int i = 0; i < n; ++i) {
      const int64_t start = *rc::gen::inRange<int64_t>(0, horizon);
      const int64_t len = *rc::gen::inRange<int64_t>(1, horizon + 1);
      const int kind = *rc::gen::inRange(0, 10);
      int64_t size = kind == 0 ? 0 : kind < 7 ? *rc::gen::inRange<int64_t>(1, 64)
                                              : *rc::gen::inRange<int64_t>(1, 5000);
      const int64_t align = *rc::gen::element<int64_t>(1, 1, 1, 2, 3, 4, 8, 16, 24, 64);
      p.buffers.push_back(buf(fmt::format("b{}", i), start, start + len, size, align));
    }
    return p;
  });
}

// O(n^2) reference: true iff the plan is valid (same rules as validate_plan).
inline bool brute_force_valid(const Problem& p, const MemoryPlan& plan) {
  if (plan.offsets.size() != p.buffers.size() || plan.arena_bytes < 0) return false;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const auto& a = p.buffers[i];
    const int64_t oa = plan.offsets[i];
    if (oa < 0 || oa % a.alignment != 0 || oa + a.size > plan.arena_bytes) return false;
    for (size_t j = i + 1; j < p.buffers.size(); ++j) {
      const auto& b = p.buffers[j];
      const int64_t ob = plan.offsets[j];
      const bool time = a.start < b.end && b.start < a.end;
      const bool space = a.size > 0 && b.size > 0 && oa < ob + b.size && ob < oa + a.size;
      if (time && space) return false;
    }
  }
  return true;
}

// Max over integer times of live bytes (brute force; times are small in generated problems).
inline int64_t brute_force_lower_bound(const Problem& p) {
  int64_t best = 0;
  for (const auto& b : p.buffers) {
    int64_t live = 0;
    for (const auto& c : p.buffers) {
      if (c.start <= b.start && b.start < c.end) live += c.size;
    }
    best = std::max(best, live);
  }
  return best;
}

}  // namespace carve::planner::testing
