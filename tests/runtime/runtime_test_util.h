// Helpers for the runtime tests.
//  - FakeDeviceAllocator: a stand-in backend, host memory that claims to live on device 3,
//    so the runtime must treat it as DeviceResident (no host access) without a GPU.
//  - tagged("buffer #", id): the text an error message uses to name a buffer or storage.
//  - cpu_session_or_skip(threads): a CPU Session, or the test marked skipped (and null)
//    when the build has no CPU JIT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include "carve/jit/host_target.h"
#include "carve/runtime/allocator.h"
#include "carve/runtime/session.h"
#include "test_support.h"

namespace carve::runtime::testing {

class FakeDeviceAllocator final : public Allocator {
 public:
  Result<void*> allocate(size_t bytes, size_t alignment) override { return inner_.allocate(bytes, alignment); }
  void deallocate(void* ptr, size_t bytes, size_t alignment) override { inner_.deallocate(ptr, bytes, alignment); }
  std::string_view name() const override { return "fake-device"; }
  DeviceType device_type() const override { return DeviceType::kCuda; }
  int device_id() const override { return 3; }

 private:
  CpuAllocator inner_;
};

// Built with += : g++ 12 gives a bogus -Wrestrict for "literal" + std::string at -O2.
inline std::string tagged(std::string_view prefix, uint64_t id) {
  std::string s(prefix);
  s += std::to_string(id);
  return s;
}

inline std::unique_ptr<Session> cpu_session_or_skip(int threads = 1) {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return nullptr;
  }
  auto s = Session::create({.threads = threads});
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  return std::move(*s);
}

inline std::shared_ptr<Allocator> fake_device() { return std::make_shared<FakeDeviceAllocator>(); }

}  // namespace carve::runtime::testing
