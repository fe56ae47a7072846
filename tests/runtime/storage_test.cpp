// Storage: ids, lazy allocation, reference counting, modes.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "carve/runtime/storage.h"
#include "runtime_test_util.h"

namespace rt = carve::runtime;
using carve::ErrorCode;

TEST_CASE("runtime/storage/ids_never_reused_after_frees") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  std::set<uint64_t> seen;
  for (int round = 0; round < 4; ++round) {
    std::vector<std::shared_ptr<rt::Storage>> live;
    for (int i = 0; i < 250; ++i) {
      auto s = rt::Storage::allocate(alloc, 64);
      REQUIRE(s.ok());
      CHECK(seen.insert((*s)->id().value).second);
      live.push_back(*s);
    }
    // Freed here: the allocator may hand the same addresses back next round, the ids never.
  }
  CHECK(seen.size() == 1000);
  CHECK(alloc->allocations() == 1000);
  CHECK(alloc->deallocations() == 1000);
  CHECK(alloc->live_bytes() == 0);
}

TEST_CASE("runtime/storage/ids_unique_across_threads") {
  constexpr int kThreads = 4, kPer = 500;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ids, t] {
      for (int i = 0; i < kPer; ++i) ids[t].push_back(rt::Storage::lazy(rt::cpu_allocator(), 8)->id().value);
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (auto& v : ids) all.insert(v.begin(), v.end());
  CHECK(all.size() == static_cast<size_t>(kThreads * kPer));
}

TEST_CASE("runtime/storage/lazy_allocates_once_on_ensure") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto s = rt::Storage::lazy(alloc, 128);
  CHECK_FALSE(s->is_allocated());
  CHECK(s->data() == nullptr);
  CHECK(alloc->allocations() == 0);
  const auto id = s->id();
  REQUIRE(s->ensure_allocated().ok());
  CHECK(s->is_allocated());
  CHECK(s->data() != nullptr);
  CHECK(s->id() == id);  // allocating does not change identity
  REQUIRE(s->ensure_allocated().ok());
  CHECK(alloc->allocations() == 1);
  s.reset();
  CHECK(alloc->deallocations() == 1);
}

TEST_CASE("runtime/storage/ensure_allocated_races_allocate_once") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto s = rt::Storage::lazy(alloc, 256);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&s] { CHECK(s->ensure_allocated().ok()); });
  for (auto& th : threads) th.join();
  CHECK(alloc->allocations() == 1);
}

TEST_CASE("runtime/storage/owned_freed_when_last_reference_drops") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto s = *rt::Storage::allocate(alloc, 32);
  CHECK(s->ownership() == rt::Ownership::kOwned);
  CHECK(s->is_mutable());
  CHECK(s->is_cpu_accessible());
  auto second = s;
  s.reset();
  CHECK(alloc->deallocations() == 0);
  second.reset();
  CHECK(alloc->deallocations() == 1);
  CHECK(alloc->live_bytes() == 0);
}

TEST_CASE("runtime/storage/lazy_oom_leaves_storage_unallocated") {
  auto alloc = std::make_shared<rt::FailingAllocator>(rt::FailingAllocatorOptions{.max_live_bytes = 16});
  auto s = rt::Storage::lazy(alloc, 17);
  auto st = s->ensure_allocated();
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == ErrorCode::kOutOfMemory);
  CHECK(st.message().find(rt::testing::tagged("storage #", s->id().value)) != std::string::npos);
  CHECK_FALSE(s->is_allocated());
  auto immediate = rt::Storage::allocate(alloc, 17);
  CHECK(immediate.status().code() == ErrorCode::kOutOfMemory);
  s.reset();
  CHECK(alloc->allocations() == 0);
  CHECK(alloc->deallocations() == 0);
}

TEST_CASE("runtime/storage/borrowed_is_never_freed") {
  std::vector<std::byte> mem(40);
  {
    auto s = rt::Storage::borrow(mem.data(), mem.size(), /*is_mutable=*/false);
    REQUIRE(s.ok());
    CHECK((*s)->ownership() == rt::Ownership::kBorrowed);
    CHECK_FALSE((*s)->is_mutable());
    CHECK((*s)->data() == mem.data());
    CHECK((*s)->allocator() == nullptr);
  }
  // Still ours (ASan would flag a free of vector memory).
  mem[0] = std::byte{1};
  auto null_borrow = rt::Storage::borrow(nullptr, 4, true);
  CHECK(null_borrow.status().code() == ErrorCode::kInvalidArgument);
  CHECK(rt::Storage::borrow(nullptr, 0, true).ok());
}

TEST_CASE("runtime/storage/device_allocator_gives_device_resident") {
  auto s = rt::Storage::allocate(rt::testing::fake_device(), 64);
  REQUIRE(s.ok());
  CHECK((*s)->ownership() == rt::Ownership::kDeviceResident);
  CHECK_FALSE((*s)->is_cpu_accessible());
  CHECK((*s)->device_type() == rt::DeviceType::kCuda);
  CHECK((*s)->device_id() == 3);
}

TEST_CASE("runtime/storage/ownership_names") {
  CHECK(rt::ownership_name(rt::Ownership::kOwned) == "Owned");
  CHECK(rt::ownership_name(rt::Ownership::kBorrowed) == "Borrowed");
  CHECK(rt::ownership_name(rt::Ownership::kAliased) == "Aliased");
  CHECK(rt::ownership_name(rt::Ownership::kFileBacked) == "FileBacked");
  CHECK(rt::ownership_name(rt::Ownership::kDeviceResident) == "DeviceResident");
}
