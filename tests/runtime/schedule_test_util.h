// Synthetic Programs for the scheduler tests: hand-made launches over byte ranges and
// plain C++ kernels with the Kernel ABI. No JIT.
//
// Kernels work on bytes, kTileBytes per tile: tile t touches bytes [t*8, t*8+8) of every
// operand, so tiles never touch each other's bytes. The last operand is the output.
//  - k_set:   out[i] = i * 13 + 5                                    (writes only)
//  - k_copy:  out[i] = in0[i] + 1                                    (reads in0, writes out)
//  - k_mix1:  out[i] = out[i] * 31 + in0[i] * 7 + i + 1              (read-modify-write)
//  - k_mix2:  out[i] = out[i] * 29 + in0[i] * 7 + in1[i] * 3 + i     (read-modify-write)
//  - k_empty: nothing (dispatch cost)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "carve/runtime/arena.h"
#include "carve/runtime/executor.h"
#include "carve/runtime/program.h"

namespace carve::runtime::testing {

inline constexpr int64_t kTileBytes = 8;

inline uint8_t* bytes_of(void* p) { return static_cast<uint8_t*>(p); }

inline void k_set(void* const* ops, int64_t b, int64_t e) {
  uint8_t* out = bytes_of(ops[0]);
  for (int64_t i = b * kTileBytes; i < e * kTileBytes; ++i) out[i] = static_cast<uint8_t>(i * 13 + 5);
}
inline void k_copy(void* const* ops, int64_t b, int64_t e) {
  const uint8_t* in = bytes_of(ops[0]);
  uint8_t* out = bytes_of(ops[1]);
  for (int64_t i = b * kTileBytes; i < e * kTileBytes; ++i) out[i] = static_cast<uint8_t>(in[i] + 1);
}
inline void k_mix1(void* const* ops, int64_t b, int64_t e) {
  const uint8_t* in = bytes_of(ops[0]);
  uint8_t* out = bytes_of(ops[1]);
  for (int64_t i = b * kTileBytes; i < e * kTileBytes; ++i)
    out[i] = static_cast<uint8_t>(out[i] * 31 + in[i] * 7 + i + 1);
}
inline void k_mix2(void* const* ops, int64_t b, int64_t e) {
  const uint8_t* in0 = bytes_of(ops[0]);
  const uint8_t* in1 = bytes_of(ops[1]);
  uint8_t* out = bytes_of(ops[2]);
  for (int64_t i = b * kTileBytes; i < e * kTileBytes; ++i)
    out[i] = static_cast<uint8_t>(out[i] * 29 + in0[i] * 7 + in1[i] * 3 + i);
}
inline void k_empty(void* const*, int64_t, int64_t) {}

enum TestKernel : int32_t { kSet = 0, kCopy = 1, kMix1 = 2, kMix2 = 3, kEmpty = 4 };

inline MemoryRef arena_ref(int64_t offset, int64_t bytes, int32_t buffer = -1) {
  return MemoryRef{Region::kArena, 0, offset, bytes, buffer};
}
inline MemoryRef ref(Region region, int32_t slot, int64_t offset, int64_t bytes) {
  return MemoryRef{region, slot, offset, bytes, -1};
}

// A Program plus the memory it runs on. Like a compiled Program, every arena range a
// launch touches is reached through a view of program.arena (one per distinct range).
struct TestProgram {
  Program program;
  std::vector<std::vector<uint8_t>> inputs, outputs;

  TestProgram(int64_t arena_bytes, std::vector<int64_t> input_bytes, std::vector<int64_t> output_bytes) {
    for (jit::KernelFn fn : {&k_set, &k_copy, &k_mix1, &k_mix2, &k_empty}) {
      ProgramKernel k;
      k.fn = fn;
      program.kernels.push_back(std::move(k));
    }
    program.arena = std::make_unique<Arena>(*Arena::create(cpu_allocator(), static_cast<size_t>(arena_bytes)));
    std::ranges::fill(arena(), uint8_t{0});
    for (int64_t b : input_bytes) inputs.emplace_back(static_cast<size_t>(b), 0);
    for (int64_t b : output_bytes) outputs.emplace_back(static_cast<size_t>(b), 0);
  }

  std::span<uint8_t> arena() const {
    return {reinterpret_cast<uint8_t*>(program.arena->arena().unsafe_data()), program.arena->arena_bytes()};
  }

  // Names the view of every arena ref (added on first use of a range).
  void name_views(std::vector<MemoryRef>& refs) {
    for (MemoryRef& r : refs) {
      if (r.region != Region::kArena) continue;
      auto [it, added] = views_.try_emplace({r.offset, r.bytes}, -1);
      if (added)
        it->second = *program.arena->add_view(fmt::format("arena[{},{})", r.offset, r.offset + r.bytes), r.offset,
                                              ir::DType::kU8, ir::Shape{r.bytes});
      r.view = it->second;
    }
  }

  // A kernel launch; reads/writes follow the kernel's semantics above. `operands` in ABI
  // order (inputs, then the output).
  int32_t kernel(std::string name, TestKernel kernel, int64_t tiles, std::vector<MemoryRef> operands) {
    name_views(operands);
    Launch l;
    l.name = std::move(name);
    l.kind = LaunchKind::kKernel;
    l.kernel = kernel;
    l.tile_begin = 0;
    l.tile_end = tiles;
    const MemoryRef out = operands.back();
    for (size_t i = 0; i + 1 < operands.size(); ++i) l.reads.push_back(operands[i]);
    if (kernel == kMix1 || kernel == kMix2) l.reads.push_back(out);
    if (kernel != kEmpty) l.writes.push_back(out);
    l.operands = std::move(operands);
    program.launches.push_back(std::move(l));
    return static_cast<int32_t>(program.launches.size() - 1);
  }
  int32_t copy(std::string name, MemoryRef src, MemoryRef dst) {
    std::vector<MemoryRef> refs{src, dst};
    name_views(refs);
    src = refs[0];
    dst = refs[1];
    Launch l;
    l.name = std::move(name);
    l.kind = LaunchKind::kCopy;
    l.operands = {src, dst};
    l.reads = {src};
    l.writes = {dst};
    program.launches.push_back(std::move(l));
    return static_cast<int32_t>(program.launches.size() - 1);
  }

  RegionBases bases() {
    RegionBases b;
    for (auto& v : inputs) b.inputs.push_back(reinterpret_cast<std::byte*>(v.data()));
    for (auto& v : outputs) b.outputs.push_back(reinterpret_cast<std::byte*>(v.data()));
    return b;
  }
  LaunchOperands operands() { return LaunchOperands(program, bases()); }

  // Deterministic initial contents of every storage.
  void fill(uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&] {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      return static_cast<uint8_t>(x);
    };
    for (auto& b : arena()) b = next();
    for (auto& v : inputs)
      for (auto& b : v) b = next();
    for (auto& v : outputs)
      for (auto& b : v) b = next();
  }

  // Everything, for bit-for-bit comparison.
  std::vector<uint8_t> snapshot() const {
    std::vector<uint8_t> s(arena().begin(), arena().end());
    for (const auto& v : inputs) s.insert(s.end(), v.begin(), v.end());
    for (const auto& v : outputs) s.insert(s.end(), v.begin(), v.end());
    return s;
  }

 private:
  std::map<std::pair<int64_t, int64_t>, int32_t> views_;  // (offset, bytes) -> view
};

}  // namespace carve::runtime::testing
