// A runtime::Allocator for CUDA device memory (cuMemAlloc/cuMemFree through the dlopen'ed
// driver): device_type() is kCuda, so runtime Storages over it are DeviceResident, and the
// copy/synchronize hooks move bytes with cuMemcpy. Built into carve_runtime (it needs
// runtime::Allocator); no CUDA headers here.
//
// Blocks are at least 256-byte aligned (cuMemAlloc's guarantee); a larger alignment request
// is kInvalidArgument, a non-power-of-two one too. 0 bytes yields a unique 1-byte block.
// Errors: create() returns kUnavailable "no CUDA device: ..." without a driver/device;
// allocate() kOutOfMemory when the device is full. Thread-safety: all methods may be
// called concurrently (the driver is thread-safe; the context is made current per call).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/allocator.h"

namespace carve::runtime::cuda {

class CudaAllocator final : public runtime::Allocator {
 public:
  static Result<std::shared_ptr<CudaAllocator>> create(int device = 0);
  explicit CudaAllocator(std::shared_ptr<CudaContext> context);

  Result<void*> allocate(size_t bytes, size_t alignment) override;
  void deallocate(void* ptr, size_t bytes, size_t alignment) override;
  std::string_view name() const override { return name_; }
  runtime::DeviceType device_type() const override { return runtime::DeviceType::kCuda; }
  int device_id() const override { return context_->info().ordinal; }
  size_t default_alignment() const override { return 256; }
  Status copy_to_device(void* device_dst, const void* host_src, size_t bytes) override;
  Status copy_from_device(void* host_dst, const void* device_src, size_t bytes) override;
  Status copy_within_device(void* device_dst, const void* device_src, size_t bytes) override;
  Status fill_device(void* device_dst, uint8_t value, size_t bytes) override;
  // cuPointerGetAttribute / cuMemGetAddressRange: device memory of this device, in range.
  Status check_device_range(const void* ptr, size_t bytes) const override;
  Status synchronize() override;

  const std::shared_ptr<CudaContext>& context() const { return context_; }
  int64_t live_bytes() const { return live_.load(); }

 private:
  std::shared_ptr<CudaContext> context_;
  std::string name_;
  std::atomic<int64_t> live_{0};
};

}  // namespace carve::runtime::cuda
