// Allocators: where a Storage's bytes come from.
//
// Contract
//  - Ownership: an Allocator hands out raw blocks; the caller (a Storage) returns each
//    block with deallocate(ptr, bytes, alignment) using the same bytes/alignment it asked
//    for. Storages hold their allocator by shared_ptr, so an allocator outlives every
//    block it handed out unless the caller wraps a borrowed one (see materialize()).
//  - Device type (device.h): kCpu blocks are host memory. Any other type is backend memory
//    (kCuda: the CUDA backend); buffers on it are DeviceResident and not CPU-accessible. A
//    backend moves bytes across through the copy_to_device/copy_from_device/synchronize hooks.
//  - Errors: allocate() returns kOutOfMemory when no block can be had and kInvalidArgument
//    for an alignment that is not a power of two. Nothing throws.
//  - Thread-safety: every allocator here is safe to call from many threads at once;
//    a backend allocator must be as well.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "carve/runtime/device.h"
#include "carve/status.h"

namespace carve::runtime {

// The alignment CPU buffers get unless a caller asks for more: one cache line, and
// enough for any AVX-512 load.
inline constexpr size_t kDefaultAlignment = 64;

class Allocator {
 public:
  virtual ~Allocator() = default;

  // A block of `bytes` (0 is allowed and yields a valid, unique pointer) aligned to
  // `alignment`, a power of two.
  virtual Result<void*> allocate(size_t bytes, size_t alignment) = 0;
  virtual void deallocate(void* ptr, size_t bytes, size_t alignment) = 0;

  virtual std::string_view name() const = 0;
  // Where the blocks live: Device{device_type(), device_id()} (device.h).
  virtual DeviceType device_type() const = 0;
  virtual int device_id() const { return 0; }
  // Alignment used when a caller passes 0 ("the allocator's default").
  virtual size_t default_alignment() const { return kDefaultAlignment; }

  // Backend hooks for memory the host cannot touch. The defaults memcpy for kCpu and
  // report kNotCpuAccessible for any other type (a backend that can copy overrides them).
  virtual Status copy_to_device(void* device_dst, const void* host_src, size_t bytes);
  virtual Status copy_from_device(void* host_dst, const void* device_src, size_t bytes);
  // Within the backend's memory (device to device, ranges may overlap) and filling it; both
  // complete before they return. Defaults: memmove/memset for kCpu, kUnsupported otherwise.
  virtual Status copy_within_device(void* device_dst, const void* device_src, size_t bytes);
  virtual Status fill_device(void* device_dst, uint8_t value, size_t bytes);
  // For memory a caller imports (Storage::import_device): OK when [ptr, ptr + bytes) is
  // memory of this allocator's device; else kInvalidArgument saying what it is instead
  // (host memory, another device, past the end of its allocation). Default: kUnsupported
  // (the backend cannot tell).
  virtual Status check_device_range(const void* ptr, size_t bytes) const;
  // Waits for outstanding work on the device. CPU: nothing to wait for.
  virtual Status synchronize() { return Status(); }
};

// Host memory from aligned operator new. `alignment` is the default alignment (64).
class CpuAllocator final : public Allocator {
 public:
  explicit CpuAllocator(size_t alignment = kDefaultAlignment) : alignment_(alignment) {}

  Result<void*> allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* ptr, size_t bytes, size_t alignment) override;
  std::string_view name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::kCpu; }
  size_t default_alignment() const override { return alignment_; }

 private:
  size_t alignment_;
};

// The process-wide CPU allocator with 64-byte alignment.
std::shared_ptr<Allocator> cpu_allocator();

// For tests: a CPU allocator that fails on purpose, and counts, so a test can prove that
// an error path leaks nothing (allocations() == deallocations(), live_bytes() == 0).
struct FailingAllocatorOptions {
  // Fail every allocate() once this many have succeeded (SIZE_MAX: never).
  size_t fail_after_allocations = SIZE_MAX;
  // Fail an allocate() that would take live bytes above this (SIZE_MAX: no limit).
  size_t max_live_bytes = SIZE_MAX;
};

class FailingAllocator final : public Allocator {
 public:
  explicit FailingAllocator(FailingAllocatorOptions options = {}) : options_(options) {}

  Result<void*> allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* ptr, size_t bytes, size_t alignment) override;
  std::string_view name() const override { return "failing-cpu"; }
  DeviceType device_type() const override { return DeviceType::kCpu; }

  size_t allocations() const { return allocations_.load(); }      // successful allocate()s
  size_t deallocations() const { return deallocations_.load(); }
  size_t failures() const { return failures_.load(); }
  size_t live_bytes() const { return live_bytes_.load(); }

 private:
  FailingAllocatorOptions options_;
  CpuAllocator inner_;
  std::mutex mu_;  // makes check-then-allocate one step
  std::atomic<size_t> allocations_{0};
  std::atomic<size_t> deallocations_{0};
  std::atomic<size_t> failures_{0};
  std::atomic<size_t> live_bytes_{0};
};

}  // namespace carve::runtime
