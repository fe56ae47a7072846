// Buffer: identity, views and their bounds, sizes, lazy vs immediate allocation.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "carve/runtime/buffer.h"
#include "runtime_test_util.h"

namespace rt = carve::runtime;
using carve::ErrorCode;
using carve::ir::DType;

TEST_CASE("runtime/buffer/ids_distinct_for_views_of_views") {
  auto base = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {4, 4});
  auto v1 = *base.view(0, 32);
  auto v2 = *v1.view(8, 16);
  auto v3 = *v2.view(0, 16);  // same window as v2, still a new buffer
  auto v1_again = *base.view(0, 32);
  std::set<uint64_t> ids = {base.id().value, v1.id().value, v2.id().value, v3.id().value, v1_again.id().value};
  CHECK(ids.size() == 5);
  for (const auto* b : {&v1, &v2, &v3, &v1_again}) CHECK(b->storage_id() == base.storage_id());
  // A copy is the same handle: same id.
  rt::Buffer copy = v2;
  CHECK(copy.id() == v2.id());
  auto other = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {4, 4});
  CHECK(other.storage_id() != base.storage_id());
}

TEST_CASE("runtime/buffer/total_size_vs_size") {
  auto base = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kI32, {10});
  CHECK(base.size() == 40);
  CHECK(base.total_size() == 40);
  CHECK(base.num_elements() == 10);
  CHECK_FALSE(base.is_view());
  auto v = *base.view(8, 12);
  CHECK(v.size() == 12);
  CHECK(v.total_size() == 40);
  CHECK(v.offset() == 8);
  CHECK(v.dtype() == DType::kU8);
  CHECK(v.shape() == carve::ir::Shape{12});
  CHECK(v.is_view());
  auto vv = *v.view(4, 4);
  CHECK(vv.offset() == 12);  // offsets accumulate, relative to the storage
  CHECK(vv.total_size() == 40);
}

TEST_CASE("runtime/buffer/view_bounds") {
  auto base = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {100});
  CHECK(base.view(0, 100).ok());
  CHECK(base.view(100, 0).ok());   // empty view at the end
  CHECK(base.view(99, 1).ok());
  auto past = base.view(99, 2);
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == ErrorCode::kOutOfBounds);
  CHECK(past.status().message().find(rt::testing::tagged("buffer #", base.id().value)) != std::string::npos);
  CHECK(base.view(101, 0).status().code() == ErrorCode::kOutOfBounds);
  auto v = *base.view(50, 20);
  CHECK(v.view(0, 20).ok());
  CHECK(v.view(1, 20).status().code() == ErrorCode::kOutOfBounds);  // within base, not within v
}

TEST_CASE("runtime/buffer/view_bounds_overflow") {
  auto base = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {64});
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  // offset + size wraps around to a small number: must still be rejected.
  CHECK(base.view(8, kMax - 3).status().code() == ErrorCode::kOutOfBounds);
  CHECK(base.view(kMax, 2).status().code() == ErrorCode::kOutOfBounds);
  CHECK(base.view(kMax, 0).status().code() == ErrorCode::kOutOfBounds);
  // A typed view whose byte size overflows int64 is a shape error, not a wrap.
  auto huge = base.view(0, DType::kF64, {int64_t{1} << 40, int64_t{1} << 40});
  CHECK_FALSE(huge.ok());
}

TEST_CASE("runtime/buffer/typed_view") {
  auto base = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {64});
  auto f = base.view(16, DType::kF32, {2, 3});
  REQUIRE(f.ok());
  CHECK(f->size() == 24);
  CHECK(f->dtype() == DType::kF32);
  CHECK(f->shape() == carve::ir::Shape{2, 3});
  CHECK(f->storage_id() == base.storage_id());
  CHECK(base.view(48, DType::kF32, {2, 3}).status().code() == ErrorCode::kOutOfBounds);
  CHECK(base.view(0, DType::kF32, {-1}).status().code() == ErrorCode::kShapeError);
}

TEST_CASE("runtime/buffer/lazy_then_ensure_allocated") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  {
    auto lazy = rt::Buffer::lazy(alloc, DType::kF32, {8});
    REQUIRE(lazy.ok());
    CHECK_FALSE(lazy->is_allocated());
    CHECK(alloc->allocations() == 0);
    CHECK(lazy->size() == 32);
    auto view = *lazy->view(4, DType::kF32, {2});  // views of a lazy buffer are fine
    CHECK_FALSE(view.is_allocated());
    CHECK(view.bytes().status().code() == ErrorCode::kNotAllocated);
    REQUIRE(lazy->ensure_allocated().ok());
    // The view shares the storage, so it sees the allocation.
    CHECK(view.is_allocated());
    CHECK(view.unsafe_data() == lazy->unsafe_data() + 4);
    auto w = view.mutable_span<float>();
    REQUIRE(w.ok());
    (*w)[0] = 2.5f;
    CHECK(*lazy->at<float>(1) == 2.5f);
    CHECK(alloc->allocations() == 1);
  }
  CHECK(alloc->deallocations() == 1);
}

TEST_CASE("runtime/buffer/view_allocates_lazy_parent") {
  auto lazy = *rt::Buffer::lazy(rt::cpu_allocator(), DType::kU8, {16});
  auto view = *lazy.view(4, 4);
  REQUIRE(view.ensure_allocated().ok());  // from the view side
  CHECK(lazy.is_allocated());
}

TEST_CASE("runtime/buffer/immediate_allocation") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto b = rt::Buffer::allocate(alloc, DType::kI64, {3});
  REQUIRE(b.ok());
  CHECK(b->is_allocated());
  CHECK(alloc->allocations() == 1);
  CHECK(b->ownership() == rt::Ownership::kOwned);
  CHECK(b->bytes().ok());
}

TEST_CASE("runtime/buffer/default_alignment_64") {
  for (int i = 0; i < 16; ++i) {
    auto b = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {1 + i * 7});
    CHECK(reinterpret_cast<uintptr_t>(b.unsafe_data()) % 64 == 0);
  }
  auto big = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {10}, 1024);
  CHECK(reinterpret_cast<uintptr_t>(big.unsafe_data()) % 1024 == 0);
  CHECK(rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {10}, 3).status().code() ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("runtime/buffer/scalar_and_empty_shapes") {
  auto scalar = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kF64, {});
  CHECK(scalar.num_elements() == 1);
  CHECK(scalar.size() == 8);
  auto empty = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {0, 5});
  CHECK(empty.size() == 0);
  CHECK(empty.bytes().ok());
  CHECK(empty.bytes()->empty());
  CHECK(rt::Buffer::lazy(rt::cpu_allocator(), DType::kF32, {-2}).status().code() == ErrorCode::kShapeError);
  CHECK(rt::Buffer::lazy(nullptr, DType::kF32, {2}).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("runtime/buffer/immediate_oom_leaks_nothing") {
  auto alloc = std::make_shared<rt::FailingAllocator>(rt::FailingAllocatorOptions{.fail_after_allocations = 3});
  std::vector<rt::Buffer> kept;
  int failures = 0;
  for (int i = 0; i < 6; ++i) {
    auto b = rt::Buffer::allocate(alloc, DType::kF32, {16});
    if (!b.ok()) {
      CHECK(b.status().code() == ErrorCode::kOutOfMemory);
      CHECK(b.status().message().find("failing allocator") != std::string::npos);
      ++failures;
      continue;
    }
    kept.push_back(*b);
    kept.push_back(*b->view(0, 16));  // views hold the storage too
  }
  CHECK(failures == 3);
  CHECK(alloc->allocations() == 3);
  CHECK(alloc->live_bytes() == 3 * 64);
  kept.clear();
  CHECK(alloc->deallocations() == 3);
  CHECK(alloc->live_bytes() == 0);
}

TEST_CASE("runtime/buffer/over_storage_and_describe") {
  auto storage = *rt::Storage::allocate(rt::cpu_allocator(), 24);
  auto b = rt::Buffer::over(storage, DType::kF32, {2, 3});
  REQUIRE(b.ok());
  CHECK(b->storage_id() == storage->id());
  CHECK(rt::Buffer::over(storage, DType::kF32, {2, 2}).status().code() == ErrorCode::kInvalidArgument);
  auto v = *b->view(4, 8);
  const std::string d = v.describe();
  CHECK(d.find(rt::testing::tagged("buffer #", v.id().value)) != std::string::npos);
  CHECK(d.find("Aliased") != std::string::npos);
  CHECK(d.find("u8[8]") != std::string::npos);
  CHECK(d.find(rt::testing::tagged("storage #", storage->id().value)) != std::string::npos);
}
