// For tests: host memory that says it is CUDA device memory, with a backend's hooks (copies,
// fills, and check_device_range over the blocks it handed out), so the device-memory paths
// run without a GPU. `ordinal` is the device it claims to be.
#pragma once

#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "carve/runtime/allocator.h"

namespace carve::test {

class FakeDevice final : public runtime::Allocator {
 public:
  explicit FakeDevice(int ordinal = 0) : ordinal_(ordinal) {}

  Result<void*> allocate(size_t bytes, size_t alignment) override {
    CARVE_ASSIGN_OR_RETURN(void* p, inner_.allocate(bytes, alignment));
    std::lock_guard lock(mu_);
    blocks_[static_cast<const std::byte*>(p)] = bytes;
    return p;
  }
  void deallocate(void* ptr, size_t bytes, size_t alignment) override {
    {
      std::lock_guard lock(mu_);
      blocks_.erase(static_cast<const std::byte*>(ptr));
    }
    inner_.deallocate(ptr, bytes, alignment);
  }
  std::string_view name() const override { return "fake-device"; }
  runtime::DeviceType device_type() const override { return runtime::DeviceType::kCuda; }
  int device_id() const override { return ordinal_; }
  Status copy_to_device(void* dst, const void* src, size_t bytes) override { return copy(dst, src, bytes); }
  Status copy_from_device(void* dst, const void* src, size_t bytes) override { return copy(dst, src, bytes); }
  Status copy_within_device(void* dst, const void* src, size_t bytes) override { return copy(dst, src, bytes); }
  Status fill_device(void* dst, uint8_t value, size_t bytes) override {
    std::memset(dst, value, bytes);
    return Status();
  }
  Status check_device_range(const void* ptr, size_t bytes) const override {
    const auto* p = static_cast<const std::byte*>(ptr);
    std::lock_guard lock(mu_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return Status(ErrorCode::kInvalidArgument, "not device memory");
    --it;
    if (p >= it->first + it->second) return Status(ErrorCode::kInvalidArgument, "not device memory");
    if (static_cast<size_t>(p - it->first) + bytes > it->second)
      return Status(ErrorCode::kInvalidArgument, fmt::format("{} bytes run past the end of its {}-byte allocation",
                                                             bytes, it->second));
    return Status();
  }

 private:
  static Status copy(void* dst, const void* src, size_t bytes) {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return Status();
  }

  int ordinal_;
  runtime::CpuAllocator inner_;
  mutable std::mutex mu_;
  std::map<const std::byte*, size_t> blocks_;
};

}  // namespace carve::test
