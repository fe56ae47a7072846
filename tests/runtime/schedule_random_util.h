// Random synthetic Programs for scheduler property tests (rapidcheck generators; call
// inside rc::check): random launches over random byte ranges of a small arena, two
// inputs and one output, random tile counts, read-modify-write kernels (schedule_test_util.h).
#pragma once

#include <rapidcheck.h>

#include <string>

#include "schedule_test_util.h"

namespace rt = carve::runtime;

namespace carve::runtime::testing {

constexpr int64_t kArena = 192, kInput = 64, kOutput = 64;

inline int64_t storage_bytes(Region region) {
  switch (region) {
    case rt::Region::kArena: return kArena;
    case rt::Region::kInput: return kInput;
    default: return kOutput;
  }
}

// A random range of `bytes` in `region`/`slot`; arena ranges get a buffer id in 0..3.
inline rt::MemoryRef random_range(Region region, int32_t slot, int64_t bytes) {
  const int64_t offset = *rc::gen::inRange<int64_t>(0, storage_bytes(region) - bytes + 1);
  const int32_t buffer = region == rt::Region::kArena ? *rc::gen::inRange(0, 4) : -1;
  return rt::MemoryRef{region, slot, offset, bytes, buffer};
}

inline rt::MemoryRef random_writable(int64_t bytes) {
  return *rc::gen::inRange(0, 4) == 0 ? random_range(rt::Region::kOutput, 0, bytes) : random_range(rt::Region::kArena, 0, bytes);
}

inline rt::MemoryRef random_readable(int64_t bytes) {
  switch (*rc::gen::inRange(0, 5)) {
    case 0: return random_range(rt::Region::kInput, 0, bytes);
    case 1: return random_range(rt::Region::kInput, 1, bytes);
    case 2: return random_range(rt::Region::kOutput, 0, bytes);
    default: return random_range(rt::Region::kArena, 0, bytes);
  }
}

// A kernel input: the output's own bytes (in place) or a range that does not overlap the
// output, so that tiles stay independent (a tile reads only what no other tile writes).
inline rt::MemoryRef random_input(const rt::MemoryRef& out) {
  if (*rc::gen::inRange(0, 5) == 0) return out;
  for (int attempt = 0; attempt < 16; ++attempt) {
    rt::MemoryRef in = random_readable(out.bytes);
    if (!in.overlaps(out)) return in;
  }
  return out;
}

inline TestProgram random_program() {
  TestProgram tp(kArena, {kInput, kInput}, {kOutput});
  const int launches = *rc::gen::inRange(1, 15);
  for (int i = 0; i < launches; ++i) {
    std::string name = "l";  // += : g++ 12 warns (-Wrestrict) on "l" + std::string
    name += std::to_string(i);
    if (*rc::gen::inRange(0, 6) == 0) {
      const int64_t bytes = *rc::gen::inRange<int64_t>(1, 33);
      rt::MemoryRef dst = random_writable(bytes);
      rt::MemoryRef src = random_readable(bytes);
      // A copy's source and destination never share bytes (build_schedule rejects it).
      for (int attempt = 0; attempt < 16 && src.overlaps(dst); ++attempt) src = random_readable(bytes);
      if (!src.overlaps(dst)) tp.copy(name, src, dst);
      continue;
    }
    const int64_t tiles = *rc::gen::inRange<int64_t>(1, 5);
    const rt::MemoryRef out = random_writable(tiles * kTileBytes);
    switch (*rc::gen::inRange(0, 4)) {
      case 0: tp.kernel(name, rt::testing::kSet, tiles, {out}); break;
      case 1: tp.kernel(name, rt::testing::kCopy, tiles, {random_input(out), out}); break;
      case 2: tp.kernel(name, rt::testing::kMix1, tiles, {random_input(out), out}); break;
      default: tp.kernel(name, rt::testing::kMix2, tiles, {random_input(out), random_input(out), out}); break;
    }
  }
  return tp;
}

inline rt::ScheduleOptions random_options() {
  rt::ScheduleOptions o;
  o.threads = *rc::gen::inRange(1, 5);
  o.chunks_per_launch = *rc::gen::inRange(0, 5);
  o.allow_fallback = false;
  return o;
}

}  // namespace carve::runtime::testing
