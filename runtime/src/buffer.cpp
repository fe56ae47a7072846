#include "carve/runtime/buffer.h"

#include <atomic>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace carve::runtime {

namespace {

// Starts at 1; only counts up, so ids are never reused.
std::atomic<uint64_t> g_next_buffer_id{1};

struct Extent {
  int64_t elements = 0;
  size_t bytes = 0;
};

Result<Extent> extent_of(ir::DType dtype, const ir::Shape& shape) {
  if (!ir::is_valid_dtype(dtype)) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("invalid dtype value {}", static_cast<int>(dtype)));
  }
  CARVE_ASSIGN_OR_RETURN(int64_t elements, shape.num_elements());
  CARVE_ASSIGN_OR_RETURN(int64_t bytes, ir::byte_size(dtype, shape));
  return Extent{elements, static_cast<size_t>(bytes)};
}

std::string type_string(ir::DType dtype, const ir::Shape& shape) {
  return fmt::format("{}{}", ir::dtype_name(dtype), shape.to_string());
}

}  // namespace

Buffer::Buffer(std::shared_ptr<Storage> storage, size_t offset, size_t size, ir::DType dtype, ir::Shape shape,
               int64_t num_elements, bool is_view)
    : storage_(std::move(storage)),
      id_{g_next_buffer_id.fetch_add(1, std::memory_order_relaxed)},
      offset_(offset),
      size_(size),
      dtype_(dtype),
      shape_(std::move(shape)),
      num_elements_(num_elements),
      is_view_(is_view) {}

Result<Buffer> Buffer::lazy(std::shared_ptr<Allocator> allocator, ir::DType dtype, ir::Shape shape,
                            size_t alignment) {
  if (allocator == nullptr) return Status(ErrorCode::kInvalidArgument, "Buffer::lazy: null allocator");
  CARVE_ASSIGN_OR_RETURN(Extent e, extent_of(dtype, shape));
  auto storage = Storage::lazy(std::move(allocator), e.bytes, alignment);
  return Buffer(std::move(storage), 0, e.bytes, dtype, std::move(shape), e.elements, false);
}

Result<Buffer> Buffer::allocate(std::shared_ptr<Allocator> allocator, ir::DType dtype, ir::Shape shape,
                                size_t alignment) {
  CARVE_ASSIGN_OR_RETURN(Buffer b, lazy(std::move(allocator), dtype, std::move(shape), alignment));
  CARVE_RETURN_IF_ERROR(b.ensure_allocated());
  return b;
}

Result<Buffer> Buffer::borrow(std::span<std::byte> memory, ir::DType dtype, ir::Shape shape, bool is_mutable) {
  CARVE_ASSIGN_OR_RETURN(Extent e, extent_of(dtype, shape));
  if (memory.size() != e.bytes) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("borrow: {} bytes given for {} ({} bytes)",
                                                           memory.size(), type_string(dtype, shape), e.bytes));
  }
  CARVE_ASSIGN_OR_RETURN(auto storage, Storage::borrow(memory.data(), memory.size(), is_mutable));
  return Buffer(std::move(storage), 0, e.bytes, dtype, std::move(shape), e.elements, false);
}

Result<Buffer> Buffer::import_device(std::shared_ptr<Allocator> backend, void* data, size_t bytes, ir::DType dtype,
                                     ir::Shape shape, bool is_mutable) {
  CARVE_ASSIGN_OR_RETURN(Extent e, extent_of(dtype, shape));
  const void* at = data;
  if (bytes < e.bytes)
    return Status(ErrorCode::kInvalidArgument, fmt::format("import_device: {} bytes at {} for {} ({} bytes)", bytes, at,
                                                           type_string(dtype, shape), e.bytes));
  const auto element = static_cast<size_t>(ir::dtype_size(dtype));
  if (element > 1 && reinterpret_cast<uintptr_t>(data) % element != 0)
    return Status(ErrorCode::kInvalidArgument, fmt::format("import_device: {} is not aligned to {} bytes for {}", at,
                                                           element, ir::dtype_name(dtype)));
  CARVE_ASSIGN_OR_RETURN(auto storage, Storage::import_device(std::move(backend), data, e.bytes, is_mutable));
  return Buffer(std::move(storage), 0, e.bytes, dtype, std::move(shape), e.elements, false);
}

Result<Buffer> Buffer::borrow(std::span<const std::byte> memory, ir::DType dtype, ir::Shape shape) {
  // Read-only storage never writes, so shedding const here is safe.
  std::span<std::byte> writable(const_cast<std::byte*>(memory.data()), memory.size());
  return borrow(writable, dtype, std::move(shape), /*is_mutable=*/false);
}

Result<Buffer> Buffer::map_file(const std::string& path, uint64_t file_offset, size_t bytes) {
  if (bytes > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
    return Status(ErrorCode::kOutOfBounds, fmt::format("map_file '{}': {} bytes is too large", path, bytes));
  }
  CARVE_ASSIGN_OR_RETURN(auto storage, Storage::map_file(path, file_offset, bytes));
  return Buffer(std::move(storage), 0, bytes, ir::DType::kU8, ir::Shape{static_cast<int64_t>(bytes)},
                static_cast<int64_t>(bytes), false);
}

Result<Buffer> Buffer::over(std::shared_ptr<Storage> storage, ir::DType dtype, ir::Shape shape) {
  if (storage == nullptr) return Status(ErrorCode::kInvalidArgument, "Buffer::over: null storage");
  CARVE_ASSIGN_OR_RETURN(Extent e, extent_of(dtype, shape));
  if (e.bytes != storage->size()) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("Buffer::over: {} needs {} bytes, storage #{} has {}",
                                                           type_string(dtype, shape), e.bytes,
                                                           storage->id().value, storage->size()));
  }
  return Buffer(std::move(storage), 0, e.bytes, dtype, std::move(shape), e.elements, false);
}

Result<Buffer> Buffer::view(size_t offset, size_t size) const {
  if (size > static_cast<size_t>(std::numeric_limits<int64_t>::max())) {
    return Status(ErrorCode::kOutOfBounds, fmt::format("view of {} bytes on buffer #{} is too large", size, id_.value));
  }
  return view(offset, ir::DType::kU8, ir::Shape{static_cast<int64_t>(size)});
}

Result<Buffer> Buffer::view(size_t offset, ir::DType dtype, ir::Shape shape) const {
  CARVE_ASSIGN_OR_RETURN(Extent e, extent_of(dtype, shape));
  // offset + e.bytes <= size_, written so it cannot overflow.
  if (offset > size_ || e.bytes > size_ - offset) {
    return Status(ErrorCode::kOutOfBounds,
                  fmt::format("view [{}, +{}) is outside buffer #{} of {} bytes", offset, e.bytes, id_.value, size_));
  }
  return Buffer(storage_, offset_ + offset, e.bytes, dtype, std::move(shape), e.elements, true);
}

std::string Buffer::describe() const {
  return fmt::format("buffer #{} ({}, {}, {} bytes at +{} of storage #{})", id_.value,
                     ownership_name(ownership()), type_string(dtype_, shape_), size_, offset_,
                     storage_->id().value);
}

Status Buffer::check_readable() const {
  if (!is_cpu_accessible()) {
    return Status(ErrorCode::kNotCpuAccessible,
                  fmt::format("buffer #{} lives on {} and is not CPU-accessible", id_.value,
                              Device{device_type(), device_id()}.to_string()));
  }
  if (!is_allocated()) {
    return Status(ErrorCode::kNotAllocated, fmt::format("buffer #{} is not allocated yet", id_.value));
  }
  return Status();
}

Status Buffer::check_writable() const {
  if (!is_mutable()) {
    std::string mode(ownership_name(ownership()));
    if (is_view_) mode += fmt::format(" view of {} storage", ownership_name(storage_->ownership()));
    return Status(ErrorCode::kReadOnly, fmt::format("buffer #{} is read-only ({})", id_.value, mode));
  }
  return Status();
}

Status Buffer::check_single_element() const {
  if (num_elements_ != 1) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("item() needs exactly one element; buffer #{} is {} ({} elements)", id_.value,
                              type_string(dtype_, shape_), num_elements_));
  }
  return Status();
}

Status Buffer::check_index(int64_t index) const {
  if (index < 0 || index >= num_elements_) {
    return Status(ErrorCode::kOutOfBounds, fmt::format("index {} is outside buffer #{} of {} elements", index,
                                                       id_.value, num_elements_));
  }
  return Status();
}

Result<std::span<const std::byte>> Buffer::bytes() const {
  CARVE_RETURN_IF_ERROR(check_readable());
  return std::span<const std::byte>(unsafe_data(), size_);
}

Result<std::span<std::byte>> Buffer::mutable_bytes() {
  CARVE_RETURN_IF_ERROR(check_writable());
  CARVE_RETURN_IF_ERROR(check_readable());
  return std::span<std::byte>(unsafe_data(), size_);
}

Status Buffer::check_dtype(ir::DType want) const {
  if (want != dtype_) {
    return Status(ErrorCode::kTypeMismatch, fmt::format("buffer #{} holds {}, not {}", id_.value,
                                                        ir::dtype_name(dtype_), ir::dtype_name(want)));
  }
  return Status();
}

Result<std::span<const std::byte>> Buffer::typed_bytes(ir::DType want, size_t alignment) const {
  CARVE_RETURN_IF_ERROR(check_dtype(want));
  CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> b, bytes());
  if (reinterpret_cast<uintptr_t>(b.data()) % alignment != 0) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("buffer #{} starts at +{}, not aligned for {}",
                                                           id_.value, offset_, ir::dtype_name(want)));
  }
  return b;
}

Result<std::span<std::byte>> Buffer::mutable_typed_bytes(ir::DType want, size_t alignment) {
  CARVE_RETURN_IF_ERROR(check_writable());
  CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> b, typed_bytes(want, alignment));
  return std::span<std::byte>(const_cast<std::byte*>(b.data()), b.size());
}

Status Buffer::copy_in(std::span<const std::byte> src) {
  CARVE_RETURN_IF_ERROR(check_writable());
  if (src.size() != size_) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("copy_in: {} bytes into buffer #{} of {} bytes", src.size(), id_.value, size_));
  }
  CARVE_RETURN_IF_ERROR(ensure_allocated());
  if (size_ == 0) return Status();
  if (!is_cpu_accessible()) return storage_->allocator()->copy_to_device(unsafe_data(), src.data(), size_);
  std::memmove(unsafe_data(), src.data(), size_);
  return Status();
}

Status Buffer::copy_out(std::span<std::byte> dst) const {
  if (dst.size() != size_) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("copy_out: buffer #{} of {} bytes into {} bytes", id_.value, size_, dst.size()));
  }
  if (!is_allocated()) {
    return Status(ErrorCode::kNotAllocated, fmt::format("buffer #{} is not allocated yet", id_.value));
  }
  if (size_ == 0) return Status();
  if (!is_cpu_accessible()) return storage_->allocator()->copy_from_device(dst.data(), unsafe_data(), size_);
  std::memmove(dst.data(), unsafe_data(), size_);
  return Status();
}

Status Buffer::copy_from(const Buffer& src) {
  CARVE_RETURN_IF_ERROR(check_writable());
  if (src.dtype_ != dtype_) {
    return Status(ErrorCode::kTypeMismatch, fmt::format("copy_from: buffer #{} holds {}, buffer #{} holds {}",
                                                        src.id_.value, ir::dtype_name(src.dtype_), id_.value,
                                                        ir::dtype_name(dtype_)));
  }
  if (src.size_ != size_) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("copy_from: buffer #{} has {} bytes, buffer #{} has {}",
                                                           src.id_.value, src.size_, id_.value, size_));
  }
  if (!src.is_allocated()) {
    return Status(ErrorCode::kNotAllocated, fmt::format("copy_from: source buffer #{} is not allocated", src.id_.value));
  }
  CARVE_RETURN_IF_ERROR(ensure_allocated());
  if (size_ == 0) return Status();
  if (src.is_cpu_accessible()) return copy_in(std::span<const std::byte>(src.unsafe_data(), size_));
  if (is_cpu_accessible()) return src.copy_out(std::span<std::byte>(unsafe_data(), size_));
  if (src.device_type() != device_type() || src.device_id() != device_id())
    return Status(ErrorCode::kUnsupported,
                  fmt::format("copy_from: buffer #{} is on {}, buffer #{} on {}: copies between devices go through "
                              "host memory",
                              src.id_.value, Device{src.device_type(), src.device_id()}.to_string(), id_.value,
                              Device{device_type(), device_id()}.to_string()));
  return storage_->allocator()->copy_within_device(unsafe_data(), src.unsafe_data(), size_);
}

Status Buffer::synchronize() const {
  if (storage_->allocator() == nullptr) return Status();  // borrowed / mapped host memory
  return storage_->allocator()->synchronize();
}

std::byte* Buffer::unsafe_data() const {
  std::byte* base = storage_->data();
  // A 0-byte region may have no address at all; never offset a null pointer.
  return base == nullptr ? nullptr : base + offset_;
}

}  // namespace carve::runtime
