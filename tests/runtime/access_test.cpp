// Typed host access and whole-buffer copies, with every error path.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <vector>

#include "carve/runtime/buffer.h"
#include "runtime_test_util.h"

namespace rt = carve::runtime;
using carve::ErrorCode;
using carve::ir::DType;

namespace {
rt::Buffer make(DType dtype, carve::ir::Shape shape) { return *rt::Buffer::allocate(rt::cpu_allocator(), dtype, shape); }
}  // namespace

TEST_CASE("runtime/access/typed_span_roundtrip_every_dtype") {
  auto f = make(DType::kF32, {2, 2});
  auto w = f.mutable_span<float>();
  REQUIRE(w.ok());
  CHECK(w->size() == 4);
  for (size_t i = 0; i < 4; ++i) (*w)[i] = 1.5f * static_cast<float>(i);
  auto r = f.span<float>();
  REQUIRE(r.ok());
  CHECK((*r)[3] == 4.5f);

  auto d = make(DType::kF64, {1});
  (*d.mutable_span<double>())[0] = 0.25;
  CHECK(*d.item<double>() == 0.25);
  auto i8 = make(DType::kI8, {1});
  (*i8.mutable_span<int8_t>())[0] = -7;
  CHECK(*i8.item<int8_t>() == -7);
  auto i32 = make(DType::kI32, {1});
  (*i32.mutable_span<int32_t>())[0] = -70000;
  CHECK(*i32.item<int32_t>() == -70000);
  auto i64 = make(DType::kI64, {1});
  (*i64.mutable_span<int64_t>())[0] = int64_t{1} << 40;
  CHECK(*i64.item<int64_t>() == (int64_t{1} << 40));
  auto u8 = make(DType::kU8, {1});
  (*u8.mutable_span<uint8_t>())[0] = 200;
  CHECK(*u8.item<uint8_t>() == 200);
  auto b = make(DType::kBool, {1});
  (*b.mutable_span<bool>())[0] = true;
  CHECK(*b.item<bool>() == true);
  auto h = make(DType::kF16, {1});
  (*h.mutable_span<rt::F16Bits>())[0] = rt::F16Bits{0x3c00};  // 1.0 in f16
  CHECK(h.item<rt::F16Bits>()->bits == 0x3c00);
  auto bh = make(DType::kBf16, {1});
  (*bh.mutable_span<rt::BF16Bits>())[0] = rt::BF16Bits{0x3f80};  // 1.0 in bf16
  CHECK(bh.item<rt::BF16Bits>()->bits == 0x3f80);
  // f16 data is also reachable as raw bytes.
  auto raw = h.bytes();
  REQUIRE(raw.ok());
  uint16_t bits = 0;
  std::memcpy(&bits, raw->data(), 2);
  CHECK(bits == 0x3c00);
}

TEST_CASE("runtime/access/type_mismatch") {
  auto f = make(DType::kF32, {4});
  auto as_int = f.span<int32_t>();  // same width, wrong type
  REQUIRE_FALSE(as_int.ok());
  CHECK(as_int.status().code() == ErrorCode::kTypeMismatch);
  CHECK(as_int.status().message().find("f32") != std::string::npos);
  CHECK(as_int.status().message().find("i32") != std::string::npos);
  CHECK(f.mutable_span<double>().status().code() == ErrorCode::kTypeMismatch);
  CHECK(f.item<double>().status().code() == ErrorCode::kTypeMismatch);
  CHECK(f.at<int32_t>(0).status().code() == ErrorCode::kTypeMismatch);
  auto h = make(DType::kF16, {1});
  CHECK(h.span<rt::BF16Bits>().status().code() == ErrorCode::kTypeMismatch);  // f16 is not bf16
  CHECK(h.span<uint8_t>().status().code() == ErrorCode::kTypeMismatch);
}

TEST_CASE("runtime/access/not_allocated") {
  auto lazy = *rt::Buffer::lazy(rt::cpu_allocator(), DType::kF32, {4});
  CHECK(lazy.bytes().status().code() == ErrorCode::kNotAllocated);
  CHECK(lazy.mutable_bytes().status().code() == ErrorCode::kNotAllocated);
  CHECK(lazy.span<float>().status().code() == ErrorCode::kNotAllocated);
  CHECK(lazy.mutable_span<float>().status().code() == ErrorCode::kNotAllocated);
  CHECK(lazy.item<float>().status().code() == ErrorCode::kInvalidArgument);  // 4 elements: that comes first
  CHECK(lazy.at<float>(0).status().code() == ErrorCode::kNotAllocated);
  std::array<std::byte, 16> out{};
  CHECK(lazy.copy_out(out).code() == ErrorCode::kNotAllocated);
  auto dst = make(DType::kF32, {4});
  auto st = dst.copy_from(lazy);
  CHECK(st.code() == ErrorCode::kNotAllocated);
  CHECK(st.message().find(rt::testing::tagged("#", lazy.id().value)) != std::string::npos);
  CHECK_FALSE(lazy.is_allocated());  // none of that allocated anything
}

TEST_CASE("runtime/access/item_on_multi_element_is_an_error") {
  auto f = make(DType::kF32, {2, 3});
  auto it = f.item<float>();
  REQUIRE_FALSE(it.ok());
  CHECK(it.status().code() == ErrorCode::kInvalidArgument);
  CHECK(it.status().message().find("6 elements") != std::string::npos);
  auto empty = make(DType::kF32, {0});
  CHECK(empty.item<float>().status().code() == ErrorCode::kInvalidArgument);
  auto one = make(DType::kF32, {1, 1, 1});
  (*one.mutable_span<float>())[0] = 3.0f;
  CHECK(*one.item<float>() == 3.0f);
}

TEST_CASE("runtime/access/at_out_of_bounds") {
  auto f = make(DType::kI32, {3});
  auto w = *f.mutable_span<int32_t>();
  w[0] = 10, w[1] = 11, w[2] = 12;
  CHECK(*f.at<int32_t>(2) == 12);
  auto past = f.at<int32_t>(3);
  REQUIRE_FALSE(past.ok());
  CHECK(past.status().code() == ErrorCode::kOutOfBounds);
  CHECK(past.status().message().find("index 3") != std::string::npos);
  CHECK(f.at<int32_t>(-1).status().code() == ErrorCode::kOutOfBounds);
}

TEST_CASE("runtime/access/misaligned_typed_view") {
  auto base = make(DType::kU8, {64});
  auto odd = *base.view(1, DType::kF32, {4});
  auto s = odd.span<float>();
  CHECK(s.status().code() == ErrorCode::kInvalidArgument);
  CHECK(odd.at<float>(0).ok());  // element reads copy, so alignment does not matter
  CHECK(odd.bytes().ok());
}

TEST_CASE("runtime/access/copy_in_and_out") {
  auto f = make(DType::kF32, {3});
  const std::array<float, 3> src = {1.0f, 2.0f, 3.0f};
  REQUIRE(f.copy_in(std::as_bytes(std::span(src))).ok());
  std::array<float, 3> dst{};
  REQUIRE(f.copy_out(std::as_writable_bytes(std::span(dst))).ok());
  CHECK(dst == src);

  const std::array<float, 2> small = {1.0f, 2.0f};
  auto st = f.copy_in(std::as_bytes(std::span(small)));
  CHECK(st.code() == ErrorCode::kInvalidArgument);
  CHECK(st.message().find("8 bytes") != std::string::npos);
  std::array<float, 4> big{};
  CHECK(f.copy_out(std::as_writable_bytes(std::span(big))).code() == ErrorCode::kInvalidArgument);
  CHECK(f.copy_in(std::as_bytes(std::span(big))).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("runtime/access/copy_in_allocates_lazy_buffer") {
  auto alloc = std::make_shared<rt::FailingAllocator>();
  auto lazy = *rt::Buffer::lazy(alloc, DType::kI32, {2});
  const std::array<int32_t, 2> src = {5, 6};
  REQUIRE(lazy.copy_in(std::as_bytes(std::span(src))).ok());
  CHECK(lazy.is_allocated());
  CHECK(*lazy.at<int32_t>(1) == 6);
  CHECK(alloc->allocations() == 1);
  // Failing allocation surfaces as kOutOfMemory and leaves the buffer lazy.
  auto refusing = std::make_shared<rt::FailingAllocator>(rt::FailingAllocatorOptions{.fail_after_allocations = 0});
  auto lazy2 = *rt::Buffer::lazy(refusing, DType::kI32, {2});
  CHECK(lazy2.copy_in(std::as_bytes(std::span(src))).code() == ErrorCode::kOutOfMemory);
  CHECK_FALSE(lazy2.is_allocated());
}

TEST_CASE("runtime/access/copy_from_checks") {
  auto a = make(DType::kF32, {4});
  auto b = make(DType::kF32, {4});
  const std::array<float, 4> src = {1, 2, 3, 4};
  REQUIRE(a.copy_in(std::as_bytes(std::span(src))).ok());
  REQUIRE(b.copy_from(a).ok());
  CHECK(*b.at<float>(3) == 4.0f);

  auto ints = make(DType::kI32, {4});  // same size, other dtype
  auto st = ints.copy_from(a);
  CHECK(st.code() == ErrorCode::kTypeMismatch);
  CHECK(st.message().find(rt::testing::tagged("#", a.id().value)) != std::string::npos);
  auto shorter = make(DType::kF32, {3});
  CHECK(shorter.copy_from(a).code() == ErrorCode::kInvalidArgument);
  CHECK(a.copy_from(shorter).code() == ErrorCode::kInvalidArgument);
  auto reshaped = make(DType::kF32, {2, 2});  // same dtype and bytes: shape may differ
  CHECK(reshaped.copy_from(a).ok());
}

TEST_CASE("runtime/access/copy_from_overlapping_views") {
  auto base = make(DType::kU8, {8});
  auto w = *base.mutable_span<uint8_t>();
  for (uint8_t i = 0; i < 8; ++i) w[i] = i;
  auto lo = *base.view(0, 6);
  auto hi = *base.view(2, 6);
  REQUIRE(hi.copy_from(lo).ok());  // memmove semantics
  const std::vector<uint8_t> expect = {0, 1, 0, 1, 2, 3, 4, 5};
  CHECK(std::vector<uint8_t>(w.begin(), w.end()) == expect);
}

TEST_CASE("runtime/access/synchronize_is_ok_on_cpu") {
  auto f = make(DType::kF32, {1});
  CHECK(f.synchronize().ok());
  std::array<std::byte, 4> mem{};
  auto borrowed = *rt::Buffer::borrow(std::span<std::byte>(mem), DType::kF32, {1}, true);
  CHECK(borrowed.synchronize().ok());
}

TEST_CASE("runtime/access/device_resident_host_access_errors") {
  auto dev = rt::Buffer::allocate(rt::testing::fake_device(), DType::kF32, {4});
  REQUIRE(dev.ok());
  CHECK(dev->ownership() == rt::Ownership::kDeviceResident);
  CHECK_FALSE(dev->is_cpu_accessible());
  CHECK(dev->device_type() == rt::DeviceType::kCuda);
  CHECK(dev->device_id() == 3);
  CHECK(dev->is_mutable());
  auto bytes = dev->bytes();
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().code() == ErrorCode::kNotCpuAccessible);
  CHECK(bytes.status().message().find(rt::testing::tagged("#", dev->id().value)) != std::string::npos);
  CHECK(dev->mutable_bytes().status().code() == ErrorCode::kNotCpuAccessible);
  CHECK(dev->span<float>().status().code() == ErrorCode::kNotCpuAccessible);
  CHECK(dev->mutable_span<float>().status().code() == ErrorCode::kNotCpuAccessible);
  CHECK(dev->item<float>().status().code() == ErrorCode::kInvalidArgument);
  CHECK(dev->at<float>(0).status().code() == ErrorCode::kNotCpuAccessible);
  // Copies go to the backend's hooks; this backend has none.
  std::array<float, 4> host{};
  CHECK(dev->copy_in(std::as_bytes(std::span(host))).code() == ErrorCode::kNotCpuAccessible);
  CHECK(dev->copy_out(std::as_writable_bytes(std::span(host))).code() == ErrorCode::kNotCpuAccessible);
  auto cpu = make(DType::kF32, {4});
  CHECK(cpu.copy_from(*dev).code() == ErrorCode::kNotCpuAccessible);
  CHECK(dev->copy_from(cpu).code() == ErrorCode::kNotCpuAccessible);
  auto dev2 = *rt::Buffer::allocate(rt::testing::fake_device(), DType::kF32, {4});
  CHECK(dev2.copy_from(*dev).code() == ErrorCode::kUnsupported);
  // Views of device memory are device memory too.
  auto view = *dev->view(0, 4);
  CHECK(view.bytes().status().code() == ErrorCode::kNotCpuAccessible);
  CHECK(dev->synchronize().ok());
  CHECK(dev->unsafe_data() != nullptr);  // the device address a kernel would get
}
