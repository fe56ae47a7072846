#include "carve/runtime/handle.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace carve::runtime {

Result<std::shared_ptr<BufferHandle>> BufferHandle::create(std::string name, ir::DType dtype, ir::Shape shape,
                                                           std::shared_ptr<Allocator> allocator) {
  if (name.empty()) return Status(ErrorCode::kInvalidArgument, "a handle needs a non-empty name");
  ir::TensorType type{dtype, shape};
  CARVE_RETURN_IF_ERROR(type.validate().with_context(fmt::format("handle '{}'", name)));
  CARVE_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(std::move(allocator), dtype, std::move(shape)));
  if (buffer.is_cpu_accessible()) {
    CARVE_ASSIGN_OR_RETURN(auto bytes, buffer.mutable_bytes());
    std::memset(bytes.data(), 0, bytes.size());
  } else {  // device memory (e.g. a Session's CudaAllocator): zeroed through the backend
    std::vector<std::byte> zeros(buffer.size());
    CARVE_RETURN_IF_ERROR(buffer.copy_in(zeros).with_context(fmt::format("handle '{}'", name)));
  }
  return std::shared_ptr<BufferHandle>(new BufferHandle(std::move(name), std::move(type), std::move(buffer)));
}

Status BufferHandle::check_value(const ir::TensorType& type) const {
  if (type.dtype != type_.dtype)
    return Status(ErrorCode::kTypeMismatch, fmt::format("handle '{}' holds {}, the value is {}", name_,
                                                        type_.to_string(), type.to_string()));
  if (type.shape != type_.shape)
    return Status(ErrorCode::kShapeError, fmt::format("handle '{}' holds {}, the value is {}", name_,
                                                      type_.to_string(), type.to_string()));
  return Status();
}

Status BufferHandle::set(const Buffer& value) {
  CARVE_RETURN_IF_ERROR(check_value(ir::TensorType{value.dtype(), value.shape()}));
  std::lock_guard lock(mutex_);
  Buffer target = buffer_;
  CARVE_RETURN_IF_ERROR(target.copy_from(value));
  mark_valid();
  return Status();
}

Status BufferHandle::set_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != buffer_.size())
    return Status(ErrorCode::kInvalidArgument, fmt::format("handle '{}' holds {} bytes, got {}", name_,
                                                           buffer_.size(), bytes.size()));
  std::lock_guard lock(mutex_);
  Buffer target = buffer_;
  CARVE_RETURN_IF_ERROR(target.copy_in(bytes));
  mark_valid();
  return Status();
}

Result<Buffer> BufferHandle::read() const {
  CARVE_RETURN_IF_ERROR(check_valid());
  CARVE_ASSIGN_OR_RETURN(Buffer copy, Buffer::allocate(cpu_allocator(), type_.dtype, type_.shape));
  std::lock_guard lock(mutex_);
  CARVE_RETURN_IF_ERROR(copy.copy_from(buffer_));
  return copy;
}

Status BufferHandle::reset() {
  std::lock_guard lock(mutex_);
  Buffer target = buffer_;
  if (!target.is_cpu_accessible()) {  // a DeviceResident handle: its backend fills it
    if (!target.is_mutable())
      return Status(ErrorCode::kReadOnly, fmt::format("reset: handle '{}' is read-only memory", name_));
    CARVE_RETURN_IF_ERROR(target.storage()->allocator()->fill_device(target.unsafe_data(), 0, target.size()));
    mark_valid();
    return Status();
  }
  CARVE_ASSIGN_OR_RETURN(auto bytes, target.mutable_bytes());
  std::memset(bytes.data(), 0, bytes.size());
  mark_valid();
  return Status();
}

std::string BufferHandle::invalid_reason() const {
  std::lock_guard lock(state_mutex_);
  return invalid_reason_;
}

Status BufferHandle::check_valid() const {
  std::lock_guard lock(state_mutex_);
  if (invalid_reason_.empty()) return Status();
  return Status(ErrorCode::kInvalidArgument,
                fmt::format("handle '{}' has no defined value ({}); set() or reset() it", name_, invalid_reason_));
}

void BufferHandle::invalidate(std::string reason) {
  std::lock_guard lock(state_mutex_);
  invalid_reason_ = std::move(reason);
}

void BufferHandle::mark_valid() {
  std::lock_guard lock(state_mutex_);
  invalid_reason_.clear();
}

}  // namespace carve::runtime
