// Arena materialization from a planner MemoryPlan.
#include <doctest/doctest.h>

#include <set>

#include "carve/runtime/arena.h"

namespace rt = carve::runtime;
namespace planner = carve::planner;
using carve::ErrorCode;
using carve::ir::DType;

namespace {

// Three buffers: a and c never overlap in time, so the plan puts them at the same offset.
planner::Problem three_buffers() {
  planner::Problem p;
  p.buffers = {{"a", 64, 16, 0, 2}, {"b", 32, 16, 1, 3}, {"c", 48, 16, 2, 4}};
  return p;
}
planner::MemoryPlan plan_for_three() { return {.arena_bytes = 96, .offsets = {0, 64, 0}}; }

}  // namespace

TEST_CASE("runtime/arena/views_share_storage_at_planned_offsets") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  {
    auto arena = rt::materialize(three_buffers(), plan_for_three(), alloc);
    REQUIRE(arena.ok());
    CHECK(alloc->allocations() == 1);  // one arena, one allocation
    CHECK(arena->arena_bytes() == 96);
    CHECK(arena->num_buffers() == 3);
    CHECK(arena->ids() == std::vector<std::string>{"a", "b", "c"});
    std::set<uint64_t> ids = {arena->arena().id().value};
    const size_t offsets[] = {0, 64, 0}, sizes[] = {64, 32, 48};
    int i = 0;
    for (const char* id : {"a", "b", "c"}) {
      auto b = arena->buffer(id);
      REQUIRE(b.ok());
      CHECK(b->storage_id() == arena->storage_id());
      CHECK(b->offset() == offsets[i]);
      CHECK(b->size() == sizes[i]);
      CHECK(b->total_size() == 96);
      CHECK(b->dtype() == DType::kU8);
      CHECK(b->ownership() == rt::Ownership::kAliased);
      CHECK(b->unsafe_data() == arena->arena().unsafe_data() + offsets[i]);
      ids.insert(b->id().value);
      ++i;
    }
    CHECK(ids.size() == 4);  // every view its own BufferId
    // Lookup is stable: the same handle each time.
    CHECK(arena->buffer("b")->id() == arena->buffer("b")->id());
  }
  CHECK(alloc->deallocations() == 1);
}

TEST_CASE("runtime/arena/writes_visible_through_arena") {
  auto arena = *rt::materialize(three_buffers(), plan_for_three(), *rt::cpu_allocator());
  rt::Buffer* b = arena.find("b");
  REQUIRE(b != nullptr);
  auto w = *b->mutable_span<uint8_t>();
  w[0] = 11;
  w[31] = 12;
  CHECK(*arena.arena().at<uint8_t>(64) == 11);
  CHECK(*arena.arena().at<uint8_t>(95) == 12);
  // a and c share offset 0: a write through one shows through the other.
  (*arena.find("a")->mutable_span<uint8_t>())[5] = 99;
  CHECK(*arena.find("c")->at<uint8_t>(5) == 99);
}

TEST_CASE("runtime/arena/base_is_aligned") {
  planner::Problem p;
  p.buffers = {{"x", 10, 128, 0, 1}, {"y", 10, 128, 0, 1}};
  auto arena = *rt::materialize(p, {.arena_bytes = 138, .offsets = {0, 128}}, rt::cpu_allocator());
  CHECK(reinterpret_cast<uintptr_t>(arena.arena().unsafe_data()) % 128 == 0);
  CHECK(reinterpret_cast<uintptr_t>(arena.find("y")->unsafe_data()) % 128 == 0);
  planner::Problem small;
  small.buffers = {{"z", 4, 1, 0, 1}};
  auto arena2 = *rt::materialize(small, {.arena_bytes = 4, .offsets = {0}}, rt::cpu_allocator());
  CHECK(reinterpret_cast<uintptr_t>(arena2.arena().unsafe_data()) % 64 == 0);
}

TEST_CASE("runtime/arena/unknown_id") {
  auto arena = *rt::materialize(three_buffers(), plan_for_three(), rt::cpu_allocator());
  auto missing = arena.buffer("nope");
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message().find("nope") != std::string::npos);
  CHECK(arena.find("nope") == nullptr);
}

TEST_CASE("runtime/arena/typed_view") {
  auto arena = *rt::materialize(three_buffers(), plan_for_three(), rt::cpu_allocator());
  auto t = arena.typed_view("a", DType::kF32, {4, 4});
  REQUIRE(t.ok());
  CHECK(t->storage_id() == arena.storage_id());
  CHECK(t->offset() == 0);
  (*t->mutable_span<float>())[15] = 1.0f;
  auto bigger = arena.typed_view("b", DType::kF32, {9});  // 36 bytes > 32 planned
  CHECK(bigger.status().code() == ErrorCode::kOutOfBounds);
  CHECK(bigger.status().message().find("'b'") != std::string::npos);
  CHECK(arena.typed_view("zz", DType::kF32, {1}).status().code() == ErrorCode::kNotFound);
}

TEST_CASE("runtime/arena/rejects_offsets_count_mismatch") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto r = rt::materialize(three_buffers(), {.arena_bytes = 96, .offsets = {0, 64}}, alloc);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message().find("2 offsets for 3 buffers") != std::string::npos);
  CHECK(alloc->allocations() == 0);  // checked before allocating
}

TEST_CASE("runtime/arena/rejects_view_past_arena") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto r = rt::materialize(three_buffers(), {.arena_bytes = 90, .offsets = {0, 64, 0}}, alloc);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kOutOfBounds);
  CHECK(r.status().message().find("'b'") != std::string::npos);
  // An offset so large that offset + size would overflow int64.
  auto wrap = rt::materialize(three_buffers(), {.arena_bytes = 96, .offsets = {0, INT64_MAX - 8, 0}}, alloc);
  CHECK(wrap.status().code() == ErrorCode::kOutOfBounds);
  CHECK(alloc->allocations() == 0);
}

TEST_CASE("runtime/arena/rejects_malformed_entries") {
  auto p = three_buffers();
  CHECK(rt::materialize(p, {.arena_bytes = 96, .offsets = {0, -8, 0}}, rt::cpu_allocator()).status().code() ==
        ErrorCode::kInvalidArgument);
  CHECK(rt::materialize(p, {.arena_bytes = -1, .offsets = {0, 64, 0}}, rt::cpu_allocator()).status().code() ==
        ErrorCode::kInvalidArgument);
  auto dup = p;
  dup.buffers[2].id = dup.buffers[0].id;  // "c" renamed to "a"
  auto r = rt::materialize(dup, plan_for_three(), rt::cpu_allocator());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message().find("'a'") != std::string::npos);
}

TEST_CASE("runtime/arena/allocation_failure_leaks_nothing") {
  auto alloc = std::make_shared<rt::FailingAllocator>(rt::FailingAllocatorOptions{.max_live_bytes = 95});
  auto r = rt::materialize(three_buffers(), plan_for_three(), alloc);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kOutOfMemory);
  CHECK(alloc->allocations() == 0);
  CHECK(alloc->live_bytes() == 0);
}

TEST_CASE("runtime/arena/empty_problem_and_zero_sized_buffers") {
  auto empty = rt::materialize(planner::Problem{}, planner::MemoryPlan{}, rt::cpu_allocator());
  REQUIRE(empty.ok());
  CHECK(empty->num_buffers() == 0);
  CHECK(empty->arena_bytes() == 0);
  planner::Problem p;
  p.buffers = {{"z", 0, 1, 0, 1}};
  auto r = rt::materialize(p, {.arena_bytes = 0, .offsets = {0}}, rt::cpu_allocator());
  REQUIRE(r.ok());
  CHECK(r->buffer("z")->size() == 0);
}
