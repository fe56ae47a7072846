// Ownership modes and who may write: Owned, Borrowed, Aliased (inherits), read-only errors.
#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <vector>

#include "carve/runtime/buffer.h"
#include "runtime_test_util.h"

namespace rt = carve::runtime;
using carve::ErrorCode;
using carve::ir::DType;

namespace {

void check_all_writes_refused(rt::Buffer b, const std::string& mode) {
  const std::string id = rt::testing::tagged("buffer #", b.id().value);
  auto mb = b.mutable_bytes();
  REQUIRE_FALSE(mb.ok());
  CHECK(mb.status().code() == ErrorCode::kReadOnly);
  CHECK(mb.status().message().find(id) != std::string::npos);
  CHECK(mb.status().message().find(mode) != std::string::npos);
  CHECK(b.mutable_span<uint8_t>().status().code() == ErrorCode::kReadOnly);
  std::vector<std::byte> src(b.size());
  CHECK(b.copy_in(src).code() == ErrorCode::kReadOnly);
  auto other = *rt::Buffer::allocate(rt::cpu_allocator(), b.dtype(), b.shape());
  CHECK(b.copy_from(other).code() == ErrorCode::kReadOnly);
}

}  // namespace

TEST_CASE("runtime/ownership/owned_is_mutable") {
  auto b = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {8});
  CHECK(b.ownership() == rt::Ownership::kOwned);
  CHECK(b.is_mutable());
  CHECK(b.mutable_bytes().ok());
}

TEST_CASE("runtime/ownership/borrowed_readonly_by_default") {
  std::array<uint8_t, 8> mem = {1, 2, 3, 4, 5, 6, 7, 8};
  auto b = rt::Buffer::borrow(std::as_bytes(std::span(mem)), DType::kU8, {8});
  REQUIRE(b.ok());
  CHECK(b->ownership() == rt::Ownership::kBorrowed);
  CHECK_FALSE(b->is_mutable());
  CHECK(b->bytes()->data() == reinterpret_cast<const std::byte*>(mem.data()));  // zero-copy
  CHECK(*b->at<uint8_t>(7) == 8);
  check_all_writes_refused(*b, "Borrowed");
  // An explicit mutable=false on writable memory is read-only too.
  auto ro = *rt::Buffer::borrow(std::as_writable_bytes(std::span(mem)), DType::kU8, {8}, false);
  check_all_writes_refused(ro, "Borrowed");
  CHECK(mem[0] == 1);
}

TEST_CASE("runtime/ownership/borrowed_mutable_when_caller_allows") {
  std::array<float, 2> mem = {0, 0};
  auto b = *rt::Buffer::borrow(std::as_writable_bytes(std::span(mem)), DType::kF32, {2}, true);
  CHECK(b.is_mutable());
  (*b.mutable_span<float>())[1] = 9.0f;
  CHECK(mem[1] == 9.0f);  // writes land in the caller's memory
}

TEST_CASE("runtime/ownership/borrow_size_must_match") {
  std::array<std::byte, 10> mem{};
  auto b = rt::Buffer::borrow(std::span<std::byte>(mem), DType::kF32, {2}, true);
  CHECK(b.status().code() == ErrorCode::kInvalidArgument);
  CHECK(b.status().message().find("10 bytes") != std::string::npos);
}

TEST_CASE("runtime/ownership/borrowed_memory_outlives_buffers") {
  // The runtime never frees borrowed memory: dropping every handle leaves it intact.
  auto* mem = new std::array<int32_t, 4>{1, 2, 3, 4};
  {
    auto b = *rt::Buffer::borrow(std::as_writable_bytes(std::span(*mem)), DType::kI32, {4}, true);
    auto v = *b.view(4, 8);
    CHECK(v.is_mutable());
  }
  CHECK((*mem)[3] == 4);
  delete mem;  // ASan would report a double free if the runtime had freed it
}

TEST_CASE("runtime/ownership/aliased_view_of_owned_is_writable") {
  auto base = *rt::Buffer::allocate(rt::cpu_allocator(), DType::kU8, {16});
  auto view = *base.view(4, 8);
  CHECK(view.ownership() == rt::Ownership::kAliased);
  CHECK(view.is_mutable());
  (*view.mutable_span<uint8_t>())[0] = 42;
  CHECK(*base.at<uint8_t>(4) == 42);  // visible to both
  (*base.mutable_span<uint8_t>())[5] = 43;
  CHECK(*view.at<uint8_t>(1) == 43);
  auto vv = *view.view(2, 2);  // view of a view: still inherits
  CHECK(vv.ownership() == rt::Ownership::kAliased);
  CHECK(vv.is_mutable());
  CHECK(vv.mutable_bytes().ok());
}

TEST_CASE("runtime/ownership/aliased_view_of_readonly_borrowed_is_readonly") {
  std::array<uint8_t, 16> mem{};
  auto base = *rt::Buffer::borrow(std::as_bytes(std::span(mem)), DType::kU8, {16});
  auto view = *base.view(4, 8);
  CHECK(view.ownership() == rt::Ownership::kAliased);
  CHECK_FALSE(view.is_mutable());
  check_all_writes_refused(view, "Aliased view of Borrowed storage");
  auto vv = *view.view(1, 2);
  CHECK_FALSE(vv.is_mutable());
  check_all_writes_refused(vv, "Aliased");
  CHECK(vv.bytes().ok());  // reading is fine
}

TEST_CASE("runtime/ownership/aliased_view_of_mutable_borrowed_is_writable") {
  std::array<uint8_t, 16> mem{};
  auto base = *rt::Buffer::borrow(std::as_writable_bytes(std::span(mem)), DType::kU8, {16}, true);
  auto vv = *(*base.view(4, 8)).view(2, 2);
  CHECK(vv.is_mutable());
  (*vv.mutable_span<uint8_t>())[1] = 7;
  CHECK(mem[7] == 7);
}

TEST_CASE("runtime/ownership/view_keeps_storage_alive") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  std::optional<rt::Buffer> view;
  {
    auto base = *rt::Buffer::allocate(alloc, DType::kU8, {32});
    (*base.mutable_span<uint8_t>())[31] = 5;
    view = *base.view(16, 16);
  }
  CHECK(alloc->deallocations() == 0);
  CHECK(*view->at<uint8_t>(15) == 5);
  view.reset();
  CHECK(alloc->deallocations() == 1);
}
