// Helpers for the runtime tests.
//  - FakeDeviceAllocator: a stand-in backend, host memory that claims to live on device 3,
//    so the runtime must treat it as DeviceResident (no host access) without a GPU.
//  - tagged("buffer #", id): the text an error message uses to name a buffer or storage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "carve/runtime/allocator.h"

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

inline std::shared_ptr<Allocator> fake_device() { return std::make_shared<FakeDeviceAllocator>(); }

}  // namespace carve::runtime::testing
