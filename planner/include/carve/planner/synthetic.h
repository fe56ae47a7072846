// Deterministic synthetic planner problems for tests, benchmarks and demos.
#pragma once

#include <cstddef>
#include <cstdint>

#include "carve/planner/problem.h"

namespace carve::planner {

// A model-like trace of `buffers` buffers: two buffers start per step (ids "t0", "t1",
// ...), lifetimes are mostly short (70% 1-3 steps, 22% 4-32, 7% 33-512, 1% up to 4096
// steps), sizes log-uniform in [64 B, 1 MiB] rounded to 64, alignment `alignment`.
// The same (buffers, seed, alignment) gives the same problem on every platform
// (own splitmix64 generator; no std distributions).
Problem make_model_like_problem(size_t buffers, uint64_t seed, int64_t alignment = 64);

// Shaped like the real training traces (IOPDDL, SOMAS; see docs/benchmarks.md): about
// 1.1 buffers start per step (ids "t0", ...); lifetimes 75% 1-8 steps, 15% 9-128, 9%
// 129-4096, 1% up to a quarter of the trace; sizes from a palette of 96 values spread
// log-uniformly over six orders of magnitude (16 B .. 16 MiB), drawn with a skew towards
// few values, so many buffers have the same size; alignment 1. Deterministic like above.
Problem make_trace_like_problem(size_t buffers, uint64_t seed);

}  // namespace carve::planner
