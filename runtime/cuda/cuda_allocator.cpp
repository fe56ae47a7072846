// CudaAllocator (cuda_allocator.h): device memory for runtime Storages.
#include "carve/runtime/cuda/cuda_allocator.h"

#include <fmt/format.h>

namespace carve::runtime::cuda {

Result<std::shared_ptr<CudaAllocator>> CudaAllocator::create(int device) {
  CARVE_ASSIGN_OR_RETURN(std::shared_ptr<CudaContext> ctx, CudaContext::create(device));
  return std::make_shared<CudaAllocator>(std::move(ctx));
}

CudaAllocator::CudaAllocator(std::shared_ptr<CudaContext> context)
    : context_(std::move(context)), name_(fmt::format("cuda:{}", context_ ? context_->info().ordinal : -1)) {}

Result<void*> CudaAllocator::allocate(size_t bytes, size_t alignment) {
  if (alignment != 0 && (alignment & (alignment - 1)) != 0) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("{}: alignment {} is not a power of two", name_, alignment));
  }
  if (alignment > 256) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("{}: alignment {} exceeds the device's 256", name_, alignment));
  }
  CARVE_ASSIGN_OR_RETURN(DevicePtr p, context_->allocate(bytes));
  live_.fetch_add(static_cast<int64_t>(bytes));
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

void CudaAllocator::deallocate(void* ptr, size_t bytes, size_t) {
  if (ptr == nullptr) return;
  (void)context_->free(static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(ptr)));
  live_.fetch_sub(static_cast<int64_t>(bytes));
}

Status CudaAllocator::copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  return context_->copy_to_device(static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(device_dst)), host_src, bytes);
}

Status CudaAllocator::copy_from_device(void* host_dst, const void* device_src, size_t bytes) {
  return context_->copy_from_device(host_dst, static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(device_src)), bytes);
}

Status CudaAllocator::copy_within_device(void* device_dst, const void* device_src, size_t bytes) {
  CARVE_RETURN_IF_ERROR(context_->copy_device(static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(device_dst)),
                                              static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(device_src)), bytes));
  return context_->synchronize();  // copy_device may return early (cuda_device.h)
}

Status CudaAllocator::fill_device(void* device_dst, uint8_t value, size_t bytes) {
  return context_->memset(static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(device_dst)), value, bytes);
}

Status CudaAllocator::check_device_range(const void* ptr, size_t bytes) const {
  return context_->check_range(static_cast<DevicePtr>(reinterpret_cast<uintptr_t>(ptr)), bytes);
}

Status CudaAllocator::synchronize() { return context_->synchronize(); }

}  // namespace carve::runtime::cuda
