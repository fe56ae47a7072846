#include "carve/runtime/allocator.h"

#include <cstring>
#include <new>

#include <fmt/format.h>

namespace carve::runtime {

Status Allocator::copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  if (device_type() != DeviceType::kCpu) {
    return Status(ErrorCode::kNotCpuAccessible,
                  fmt::format("allocator '{}' provides no host-to-device copy", name()));
  }
  if (bytes != 0) std::memmove(device_dst, host_src, bytes);
  return Status();
}

Status Allocator::copy_from_device(void* host_dst, const void* device_src, size_t bytes) {
  if (device_type() != DeviceType::kCpu) {
    return Status(ErrorCode::kNotCpuAccessible,
                  fmt::format("allocator '{}' provides no device-to-host copy", name()));
  }
  if (bytes != 0) std::memmove(host_dst, device_src, bytes);
  return Status();
}

Status Allocator::copy_within_device(void* device_dst, const void* device_src, size_t bytes) {
  if (device_type() != DeviceType::kCpu)
    return Status(ErrorCode::kUnsupported, fmt::format("allocator '{}' provides no device-to-device copy", name()));
  if (bytes != 0) std::memmove(device_dst, device_src, bytes);
  return Status();
}

Status Allocator::fill_device(void* device_dst, uint8_t value, size_t bytes) {
  if (device_type() != DeviceType::kCpu)
    return Status(ErrorCode::kUnsupported, fmt::format("allocator '{}' cannot fill device memory", name()));
  if (bytes != 0) std::memset(device_dst, value, bytes);
  return Status();
}

Status Allocator::check_device_range(const void*, size_t) const {
  return Status(ErrorCode::kUnsupported, fmt::format("allocator '{}' cannot check imported device memory", name()));
}

static bool is_power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

Result<void*> CpuAllocator::allocate(size_t bytes, size_t alignment) {
  if (alignment == 0) alignment = alignment_;
  if (!is_power_of_two(alignment)) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("cpu allocator: alignment {} is not a power of two", alignment));
  }
  // Never hand out less than the configured alignment: callers rely on the default.
  if (alignment < alignment_) alignment = alignment_;
  void* p = ::operator new(bytes, std::align_val_t(alignment), std::nothrow);
  if (p == nullptr) {
    return Status(ErrorCode::kOutOfMemory,
                  fmt::format("cpu allocator: cannot allocate {} bytes (alignment {})", bytes, alignment));
  }
  return p;
}

void CpuAllocator::deallocate(void* ptr, size_t /*bytes*/, size_t alignment) {
  if (ptr == nullptr) return;
  if (alignment == 0 || alignment < alignment_) alignment = alignment_;
  ::operator delete(ptr, std::align_val_t(alignment));
}

std::shared_ptr<Allocator> cpu_allocator() {
  static const std::shared_ptr<Allocator> instance = std::make_shared<CpuAllocator>();
  return instance;
}

Result<void*> FailingAllocator::allocate(size_t bytes, size_t alignment) {
  std::lock_guard<std::mutex> lock(mu_);
  if (allocations_.load() >= options_.fail_after_allocations) {
    failures_.fetch_add(1);
    return Status(ErrorCode::kOutOfMemory,
                  fmt::format("failing allocator: refused allocation #{} of {} bytes (limit: {} allocations)",
                              allocations_.load() + 1, bytes, options_.fail_after_allocations));
  }
  size_t live = live_bytes_.load();
  if (bytes > options_.max_live_bytes || live > options_.max_live_bytes - bytes) {
    failures_.fetch_add(1);
    return Status(ErrorCode::kOutOfMemory,
                  fmt::format("failing allocator: refused {} bytes ({} live, limit {} bytes)", bytes, live,
                              options_.max_live_bytes));
  }
  CARVE_ASSIGN_OR_RETURN(void* p, inner_.allocate(bytes, alignment));
  allocations_.fetch_add(1);
  live_bytes_.fetch_add(bytes);
  return p;
}

void FailingAllocator::deallocate(void* ptr, size_t bytes, size_t alignment) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  inner_.deallocate(ptr, bytes, alignment);
  deallocations_.fetch_add(1);
  live_bytes_.fetch_sub(bytes);
}

}  // namespace carve::runtime
