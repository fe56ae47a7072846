// Caller device memory (Storage/Buffer::import_device), device-to-device copy_from and
// reset() of device handles: on an emulated device (test::FakeDevice, host memory with a
// backend's hooks) everywhere, and on a real GPU in the cuda/gpu/memory cases (skipped
// without one).
#include <doctest/doctest.h>

#include <vector>

#include "carve/ir/builder.h"
#include "carve/runtime/buffer.h"
#include "carve/runtime/cuda/cuda_allocator.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/handle.h"
#include "carve/runtime/session.h"
#include "fake_device.h"
#include "test_support.h"

using namespace carve;
using ir::DType;
namespace rt = carve::runtime;

namespace {

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::vector<float> read_floats(const rt::Buffer& b) {
  std::vector<float> out(static_cast<size_t>(b.num_elements()));
  REQUIRE(b.copy_out(std::as_writable_bytes(std::span(out))).ok());
  return out;
}

}  // namespace

TEST_CASE("cuda/memory/imported device memory is DeviceResident and never freed by carve") {
  auto device = std::make_shared<test::FakeDevice>();
  auto block = device->allocate(256, 64);
  REQUIRE(block.ok());
  {
    auto b = rt::Buffer::import_device(device, *block, 256, DType::kF32, {8, 8}, true);
    REQUIRE_MESSAGE(b.ok(), b.status().to_string());
    CHECK(b->ownership() == rt::Ownership::kDeviceResident);
    CHECK(!b->is_cpu_accessible());
    CHECK(!b->storage()->owns_memory());
    CHECK(b->device_type() == rt::DeviceType::kCuda);
    CHECK(b->unsafe_data() == static_cast<std::byte*>(*block));
    CHECK(b->bytes().status().code() == ErrorCode::kNotCpuAccessible);
    const auto values = iota(64, 1.0f);
    REQUIRE(b->copy_in(std::as_bytes(std::span(values))).ok());
    CHECK(read_floats(*b) == values);
  }
  // The buffer is gone; the block is still the caller's.
  CHECK(device->check_device_range(*block, 256).ok());
  device->deallocate(*block, 256, 64);
}

TEST_CASE("cuda/memory/import errors name the pointer and say what is wrong") {
  auto device = std::make_shared<test::FakeDevice>();
  auto block = device->allocate(1024, 64);
  REQUIRE(block.ok());
  auto* p = static_cast<std::byte*>(*block);
  std::vector<float> host(256);
  auto message = [](const Result<rt::Buffer>& r) { return r.ok() ? std::string("ok") : r.status().to_string(); };

  auto cpu = rt::Buffer::import_device(rt::cpu_allocator(), p, 1024, DType::kF32, {256}, true);
  CHECK(cpu.status().code() == ErrorCode::kInvalidArgument);
  CHECK(message(cpu).find("not a device allocator") != std::string::npos);
  auto none = rt::Buffer::import_device(nullptr, p, 1024, DType::kF32, {256}, true);
  CHECK(none.status().code() == ErrorCode::kInvalidArgument);
  auto null = rt::Buffer::import_device(device, nullptr, 1024, DType::kF32, {256}, true);
  CHECK(message(null).find("null pointer") != std::string::npos);
  auto on_host = rt::Buffer::import_device(device, host.data(), 1024, DType::kF32, {256}, true);
  CHECK(on_host.status().code() == ErrorCode::kInvalidArgument);
  CHECK(message(on_host).find("not device memory") != std::string::npos);
  auto too_small = rt::Buffer::import_device(device, p, 512, DType::kF32, {256}, true);
  CHECK(too_small.status().code() == ErrorCode::kInvalidArgument);
  CHECK(message(too_small).find("512 bytes at") != std::string::npos);
  auto misaligned = rt::Buffer::import_device(device, p + 2, 1000, DType::kF32, {16}, true);
  CHECK(misaligned.status().code() == ErrorCode::kInvalidArgument);
  CHECK(message(misaligned).find("not aligned to 4 bytes") != std::string::npos);
  auto past_end = rt::Buffer::import_device(device, p + 512, 1024, DType::kF32, {256}, true);
  CHECK(past_end.status().code() == ErrorCode::kInvalidArgument);
  CHECK(message(past_end).find("past the end") != std::string::npos);
  // Inside the allocation, at an offset: fine.
  auto inside = rt::Buffer::import_device(device, p + 512, 512, DType::kF32, {128}, false);
  CHECK_MESSAGE(inside.ok(), message(inside));
  device->deallocate(*block, 1024, 64);
}

TEST_CASE("cuda/memory/copy_from moves bytes device to device, and refuses across devices") {
  auto device0 = std::make_shared<test::FakeDevice>(0);
  auto device1 = std::make_shared<test::FakeDevice>(1);
  auto a = rt::Buffer::allocate(device0, DType::kF32, {32});
  auto b = rt::Buffer::allocate(device0, DType::kF32, {32});
  auto c = rt::Buffer::allocate(device1, DType::kF32, {32});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  const auto values = iota(32, -5.0f);
  REQUIRE(a->copy_in(std::as_bytes(std::span(values))).ok());
  REQUIRE(b->copy_from(*a).ok());  // device -> device
  CHECK(read_floats(*b) == values);
  auto host = rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {32});
  REQUIRE(host.ok());
  REQUIRE(host->copy_from(*b).ok());  // device -> host
  CHECK(read_floats(*host) == values);
  Status across = c->copy_from(*a);
  CHECK(across.code() == ErrorCode::kUnsupported);
  CHECK(across.message().find("cuda:0") != std::string::npos);
  CHECK(across.message().find("cuda:1") != std::string::npos);
  // Read-only imported memory cannot be written.
  auto read_only = rt::Buffer::import_device(device0, a->unsafe_data(), 128, DType::kF32, {32}, false);
  REQUIRE(read_only.ok());
  CHECK(read_only->copy_from(*b).code() == ErrorCode::kReadOnly);
}

TEST_CASE("cuda/memory/reset gives a device handle zeros") {
  auto device = std::make_shared<test::FakeDevice>();
  auto handle = rt::BufferHandle::create("state", DType::kF32, {16}, device);
  REQUIRE_MESSAGE(handle.ok(), handle.status().to_string());
  auto value = rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {16});
  REQUIRE(value.ok());
  const auto values = iota(16, 3.0f);
  REQUIRE(value->copy_in(std::as_bytes(std::span(values))).ok());
  REQUIRE((*handle)->set(*value).ok());
  REQUIRE((*handle)->reset().ok());
  auto read = (*handle)->read();
  REQUIRE_MESSAGE(read.ok(), read.status().to_string());
  auto host = rt::Buffer::allocate(rt::cpu_allocator(), DType::kF32, {16});
  REQUIRE(host->copy_from(*read).ok());
  CHECK(read_floats(*host) == std::vector<float>(16, 0.0f));
}

TEST_CASE("cuda/gpu/memory/an imported cuMemAlloc block is used in place and checked") {
  Status gpu = rt::cuda::driver_status();
  if (!gpu.ok()) {
    test::skip(gpu.message());
    return;
  }
  auto session = rt::Session::create({.device = {rt::DeviceType::kCuda, 0}});
  REQUIRE_MESSAGE(session.ok(), session.status().to_string());
  auto alloc = std::static_pointer_cast<rt::cuda::CudaAllocator>((*session)->allocator());
  const auto& ctx = alloc->context();
  auto x_block = ctx->allocate(4096);
  auto y_block = ctx->allocate(4096);
  REQUIRE(x_block.ok());
  REQUIRE(y_block.ok());
  auto* xp = reinterpret_cast<void*>(static_cast<uintptr_t>(*x_block));
  auto* yp = reinterpret_cast<void*>(static_cast<uintptr_t>(*y_block));
  {
    ir::GraphBuilder gb;
    auto xv = gb.input("x", DType::kF32, {1024});
    gb.output(gb.rename(gb.mul(xv, xv), "y"));
    auto program = (*session)->compile(*gb.build(), {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const auto values = iota(1024, -512.0f);
    {
      // The caller fills its block through a writable import; the run reads it read-only.
      auto fill = rt::Buffer::import_device(alloc, xp, 4096, DType::kF32, {1024}, true);
      REQUIRE_MESSAGE(fill.ok(), fill.status().to_string());
      Status filled = fill->copy_in(std::as_bytes(std::span(values)));
      REQUIRE_MESSAGE(filled.ok(), filled.to_string());
    }
    auto x = rt::Buffer::import_device(alloc, xp, 4096, DType::kF32, {1024}, false);
    auto y = rt::Buffer::import_device(alloc, yp, 4096, DType::kF32, {1024}, true);
    REQUIRE_MESSAGE(x.ok(), x.status().to_string());
    REQUIRE_MESSAGE(y.ok(), y.status().to_string());
    CHECK(x->copy_in(std::as_bytes(std::span(values))).code() == ErrorCode::kReadOnly);
    std::vector<rt::Buffer> inputs{*x}, outputs{*y};
    Status ran = (*program)->run(inputs, outputs);
    REQUIRE_MESSAGE(ran.ok(), ran.to_string());
    const auto got = read_floats(*y);
    int wrong = 0;
    for (size_t i = 0; i < values.size(); ++i) wrong += got[i] != values[i] * values[i] ? 1 : 0;
    CHECK(wrong == 0);
    // Device to device on the GPU, and a device handle reset.
    auto copy = rt::Buffer::allocate(alloc, DType::kF32, {1024});
    REQUIRE(copy.ok());
    Status copied = copy->copy_from(*y);
    REQUIRE_MESSAGE(copied.ok(), copied.to_string());
    CHECK(read_floats(*copy) == got);
    std::vector<float> host(1024);
    auto on_host = rt::Buffer::import_device(alloc, host.data(), 4096, DType::kF32, {1024}, true);
    CHECK(on_host.status().code() == ErrorCode::kInvalidArgument);
    auto past_end = rt::Buffer::import_device(alloc, static_cast<std::byte*>(xp) + 2048, 4096, DType::kF32, {1024}, true);
    CHECK(past_end.status().code() == ErrorCode::kInvalidArgument);
    auto handle = rt::BufferHandle::create("h", DType::kF32, {1024}, alloc);
    REQUIRE(handle.ok());
    CHECK((*handle)->reset().ok());
  }
  CHECK(ctx->free(*x_block).ok());
  CHECK(ctx->free(*y_block).ok());
}
