// Allocators: CPU alignment, argument checks, and the failing allocator's counters.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "carve/runtime/allocator.h"

namespace rt = carve::runtime;
using carve::ErrorCode;

namespace {
bool aligned_to(const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }
}  // namespace

TEST_CASE("runtime/allocator/cpu_default_alignment_is_64") {
  rt::CpuAllocator cpu;
  CHECK(cpu.default_alignment() == 64);
  CHECK(cpu.device_type() == rt::DeviceType::kCpu);
  CHECK(cpu.name() == "cpu");
  for (size_t bytes : {1u, 3u, 63u, 64u, 65u, 1000u, 4097u}) {
    // alignment 0 = the allocator's default; asking for less still yields 64.
    for (size_t alignment : {0u, 1u, 8u}) {
      auto p = cpu.allocate(bytes, alignment);
      REQUIRE(p.ok());
      CHECK(aligned_to(*p, 64));
      cpu.deallocate(*p, bytes, alignment);
    }
  }
  auto shared = rt::cpu_allocator();
  auto p = shared->allocate(10, 0);
  REQUIRE(p.ok());
  CHECK(aligned_to(*p, 64));
  shared->deallocate(*p, 10, 0);
}

TEST_CASE("runtime/allocator/cpu_alignment_is_configurable") {
  rt::CpuAllocator cpu(256);
  CHECK(cpu.default_alignment() == 256);
  auto p = cpu.allocate(100, 0);
  REQUIRE(p.ok());
  CHECK(aligned_to(*p, 256));
  cpu.deallocate(*p, 100, 0);
  // A larger per-call alignment wins over the default.
  auto q = cpu.allocate(100, 4096);
  REQUIRE(q.ok());
  CHECK(aligned_to(*q, 4096));
  cpu.deallocate(*q, 100, 4096);
}

TEST_CASE("runtime/allocator/rejects_non_power_of_two_alignment") {
  rt::CpuAllocator cpu;
  auto p = cpu.allocate(16, 48);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == ErrorCode::kInvalidArgument);
  CHECK(p.status().message().find("48") != std::string::npos);
}

TEST_CASE("runtime/allocator/zero_bytes_gives_distinct_pointers") {
  rt::CpuAllocator cpu;
  auto a = cpu.allocate(0, 0);
  auto b = cpu.allocate(0, 0);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a != nullptr);
  CHECK(*a != *b);
  cpu.deallocate(*a, 0, 0);
  cpu.deallocate(*b, 0, 0);
}

TEST_CASE("runtime/allocator/failing_after_n_allocations") {
  rt::FailingAllocator alloc({.fail_after_allocations = 2});
  std::vector<void*> blocks;
  for (int i = 0; i < 2; ++i) {
    auto p = alloc.allocate(32, 0);
    REQUIRE(p.ok());
    blocks.push_back(*p);
  }
  auto third = alloc.allocate(32, 0);
  REQUIRE_FALSE(third.ok());
  CHECK(third.status().code() == ErrorCode::kOutOfMemory);
  CHECK(third.status().message().find("#3") != std::string::npos);
  CHECK(alloc.allocations() == 2);
  CHECK(alloc.failures() == 1);
  CHECK(alloc.live_bytes() == 64);
  for (void* p : blocks) alloc.deallocate(p, 32, 0);
  CHECK(alloc.deallocations() == 2);
  CHECK(alloc.live_bytes() == 0);
}

TEST_CASE("runtime/allocator/failing_above_byte_limit") {
  rt::FailingAllocator alloc({.max_live_bytes = 100});
  auto a = alloc.allocate(60, 0);
  REQUIRE(a.ok());
  auto b = alloc.allocate(60, 0);  // 120 live would pass the limit
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == ErrorCode::kOutOfMemory);
  CHECK(b.status().message().find("limit 100") != std::string::npos);
  auto huge = alloc.allocate(SIZE_MAX, 0);  // no overflow in the limit check
  CHECK(huge.status().code() == ErrorCode::kOutOfMemory);
  auto c = alloc.allocate(40, 0);  // exactly at the limit is fine
  REQUIRE(c.ok());
  alloc.deallocate(*a, 60, 0);
  alloc.deallocate(*c, 40, 0);
  CHECK(alloc.allocations() == alloc.deallocations());
  CHECK(alloc.live_bytes() == 0);
}

TEST_CASE("runtime/allocator/default_copy_hooks") {
  rt::CpuAllocator cpu;
  char src[4] = {'a', 'b', 'c', 'd'};
  char dst[4] = {};
  CHECK(cpu.copy_to_device(dst, src, 4).ok());
  CHECK(dst[3] == 'd');
  CHECK(cpu.synchronize().ok());
}
