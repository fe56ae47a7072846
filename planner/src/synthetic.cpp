// Deterministic model-like problem generator (see synthetic.h).
#include "carve/planner/synthetic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace carve::planner {

namespace {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (inclusive); slight modulo bias is irrelevant here.
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

}  // namespace

Problem make_model_like_problem(size_t buffers, uint64_t seed, int64_t alignment) {
  Problem p;
  p.buffers.reserve(buffers);
  SplitMix64 rng{seed * 0x2545f4914f6cdd1dULL + 1};
  for (size_t i = 0; i < buffers; ++i) {
    BufferRequest b;
    b.id = fmt::format("t{}", i);
    b.start = static_cast<int64_t>(i / 2);
    const int64_t kind = rng.uniform(0, 99);
    int64_t len;
    if (kind < 70) len = rng.uniform(1, 3);
    else if (kind < 92) len = rng.uniform(4, 32);
    else if (kind < 99) len = rng.uniform(33, 512);
    else len = rng.uniform(513, 4096);
    b.end = b.start + len;
    const double bytes = 64.0 * std::exp2(rng.unit() * 14.0);  // 64 B .. 1 MiB
    b.size = (static_cast<int64_t>(bytes) + 63) / 64 * 64;
    b.alignment = alignment < 1 ? 1 : alignment;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

Problem make_trace_like_problem(size_t buffers, uint64_t seed) {
  SplitMix64 rng{seed * 0x9e3779b97f4a7c15ULL + 7};
  constexpr int kPalette = 96;
  std::vector<int64_t> palette(kPalette);
  for (int64_t& s : palette) s = static_cast<int64_t>(16.0 * std::exp2(rng.unit() * 20.0));  // 16 B..16 MiB
  const int64_t horizon = static_cast<int64_t>(buffers) * 10 / 11 + 1;
  Problem p;
  p.buffers.reserve(buffers);
  for (size_t i = 0; i < buffers; ++i) {
    BufferRequest b;
    b.id = fmt::format("t{}", i);
    b.start = static_cast<int64_t>(i) * 10 / 11;
    const int64_t kind = rng.uniform(0, 99);
    int64_t len;
    if (kind < 75) len = rng.uniform(1, 8);
    else if (kind < 90) len = rng.uniform(9, 128);
    else if (kind < 99) len = rng.uniform(129, 4096);
    else len = rng.uniform(1, std::max<int64_t>(1, horizon / 4));
    b.end = b.start + len;
    // unit()^3 favours the first palette entries: a few sizes cover most buffers.
    const double u = rng.unit();
    b.size = palette[static_cast<size_t>(u * u * u * kPalette) % kPalette];
    b.alignment = 1;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

}  // namespace carve::planner
