// Buffer: a typed window (byte offset, size, dtype, shape) onto a shared Storage.
//
// Contract
//  - Ownership: a Buffer holds one reference to its Storage; the bytes live as long as
//    any Buffer (or other holder) of that Storage does. Copying a Buffer copies the
//    handle: same id(), same storage. Cheap to copy and move.
//  - Identity: id() is minted from a process-wide counter for every new buffer and every
//    view (views of views included), so disjoint views of one arena are independent to
//    a hazard model. storage_id() is shared by a buffer and all of its views; compare it
//    to ask "same allocation?".
//  - Modes (ownership()): the Storage's mode for a root buffer, kAliased for a view.
//    is_mutable() is the Storage's: a view is writable exactly when its parent is.
//    Writes (mutable_bytes, mutable_span, copy_in, copy_from) through a read-only buffer
//    fail with kReadOnly naming the buffer id and mode.
//  - Lazy allocation: lazy() makes a buffer with no bytes; views share the storage, so
//    they see the bytes once anyone calls ensure_allocated(). copy_in()/copy_from()
//    allocate a lazy destination (they write every byte); every other accessor fails
//    with kNotAllocated until then.
//  - Host access: only for CPU-accessible storage, else kNotCpuAccessible (device
//    buffers move bytes with copy_in/copy_out, which go through the backend's hooks).
//    Typed access checks T against dtype() (kTypeMismatch, see element_type.h).
//  - Thread-safety: const methods may be called concurrently; ensure_allocated() is
//    safe to race. The bytes are not guarded: the scheduler keeps kernels apart.
//  - Errors: Status / Result, never exceptions; messages name the buffer id.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "carve/ir/dtype.h"
#include "carve/ir/shape.h"
#include "carve/runtime/allocator.h"
#include "carve/runtime/element_type.h"
#include "carve/runtime/storage.h"
#include "carve/status.h"

namespace carve::runtime {

struct BufferId {
  uint64_t value = 0;
  friend auto operator<=>(const BufferId&, const BufferId&) = default;
};

class Buffer {
 public:
  // Runtime-allocated buffer of byte_size(dtype, shape) bytes: Owned on a kCpu allocator,
  // DeviceResident on any other. alignment 0 = the allocator's default (64 on CPU).
  // lazy() allocates nothing; allocate() allocates now (kOutOfMemory from the allocator).
  // kShapeError for a bad shape or a byte size that overflows.
  static Result<Buffer> lazy(std::shared_ptr<Allocator> allocator, ir::DType dtype, ir::Shape shape,
                             size_t alignment = 0);
  static Result<Buffer> allocate(std::shared_ptr<Allocator> allocator, ir::DType dtype, ir::Shape shape,
                                 size_t alignment = 0);
  // Caller memory, never freed or resized by carve; it must outlive every Buffer on it.
  // memory.size() must equal byte_size(dtype, shape) (kInvalidArgument). The first form
  // is writable only when is_mutable; the second is always read-only.
  static Result<Buffer> borrow(std::span<std::byte> memory, ir::DType dtype, ir::Shape shape, bool is_mutable);
  static Result<Buffer> borrow(std::span<const std::byte> memory, ir::DType dtype, ir::Shape shape);
  // Caller device memory (Storage::import_device): `bytes` bytes at `data` on the device of
  // `backend` (a Session's allocator()), DeviceResident, never freed by carve. Errors
  // (kInvalidArgument) name the pointer: fewer bytes than the type needs, `data` not
  // aligned to the dtype's size, and what import_device rejects (host memory, another
  // device, a range past its allocation).
  static Result<Buffer> import_device(std::shared_ptr<Allocator> backend, void* data, size_t bytes, ir::DType dtype,
                                      ir::Shape shape, bool is_mutable);
  // Read-only mapping of `bytes` bytes at `file_offset` of `path`, as u8[bytes]; any
  // offset works (the mapping starts at the page boundary below it). kIoError for a
  // missing/unreadable file, kOutOfBounds for a region past the end; both name the path.
  static Result<Buffer> map_file(const std::string& path, uint64_t file_offset, size_t bytes);
  // The whole of an existing storage, typed; its size must equal byte_size(dtype, shape).
  static Result<Buffer> over(std::shared_ptr<Storage> storage, ir::DType dtype, ir::Shape shape);

  // Byte view u8[size] at `offset` bytes into this buffer. kOutOfBounds unless
  // offset + size <= size() (checked without overflow). Fresh id, same storage.
  Result<Buffer> view(size_t offset, size_t size) const;
  // Typed view at `offset` covering byte_size(dtype, shape) bytes; same bounds rule.
  Result<Buffer> view(size_t offset, ir::DType dtype, ir::Shape shape) const;

  BufferId id() const { return id_; }
  StorageId storage_id() const { return storage_->id(); }
  size_t size() const { return size_; }                      // this view's bytes
  size_t total_size() const { return storage_->size(); }      // the whole allocation's bytes
  size_t offset() const { return offset_; }                   // from the storage's first byte
  ir::DType dtype() const { return dtype_; }
  const ir::Shape& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  bool is_view() const { return is_view_; }
  Ownership ownership() const { return is_view_ ? Ownership::kAliased : storage_->ownership(); }
  bool is_mutable() const { return storage_->is_mutable(); }
  bool is_cpu_accessible() const { return storage_->is_cpu_accessible(); }
  DeviceType device_type() const { return storage_->device_type(); }
  int device_id() const { return storage_->device_id(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // "buffer #7 (Aliased, f32[2,3], 24 bytes at +16 of storage #3)"
  std::string describe() const;

  bool is_allocated() const { return storage_->is_allocated(); }
  Status ensure_allocated() const { return storage_->ensure_allocated(); }

  // Host bytes of this view. Errors: kNotCpuAccessible, kNotAllocated; mutable_bytes
  // also kReadOnly.
  Result<std::span<const std::byte>> bytes() const;
  Result<std::span<std::byte>> mutable_bytes();

  // Typed host elements. Adds kTypeMismatch (T vs dtype()) and kInvalidArgument when the
  // view's address is not aligned for T.
  template <HostElement T>
  Result<std::span<const T>> span() const {
    CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> b, typed_bytes(dtype_of<T>, alignof(T)));
    return std::span<const T>(reinterpret_cast<const T*>(b.data()), b.size() / sizeof(T));
  }
  template <HostElement T>
  Result<std::span<T>> mutable_span() {
    CARVE_ASSIGN_OR_RETURN(std::span<std::byte> b, mutable_typed_bytes(dtype_of<T>, alignof(T)));
    return std::span<T>(reinterpret_cast<T*>(b.data()), b.size() / sizeof(T));
  }
  // The one element of a single-element buffer; kInvalidArgument for any other count.
  template <HostElement T>
  Result<T> item() const {
    CARVE_RETURN_IF_ERROR(check_dtype(dtype_of<T>));
    CARVE_RETURN_IF_ERROR(check_single_element());
    return at<T>(0);
  }
  // Element `index` in flat (row-major) order; kOutOfBounds past the end.
  template <HostElement T>
  Result<T> at(int64_t index) const {
    CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> b, typed_bytes(dtype_of<T>, 1));
    CARVE_RETURN_IF_ERROR(check_index(index));
    T value;
    std::memcpy(&value, b.data() + static_cast<size_t>(index) * sizeof(T), sizeof(T));
    return value;
  }

  // Whole-buffer copies; src/dst size must equal size() (kInvalidArgument). Device
  // buffers go through the allocator's copy hooks. copy_in allocates a lazy buffer.
  Status copy_in(std::span<const std::byte> src);
  Status copy_out(std::span<std::byte> dst) const;
  // Same dtype (kTypeMismatch) and size (kInvalidArgument); overlapping views are fine.
  // Device-to-device copies are the backend's (kUnsupported here).
  Status copy_from(const Buffer& src);
  // Waits for outstanding device work on this buffer's storage; a no-op on CPU.
  Status synchronize() const;

  // Address of the view's first byte (host or device), for handing to kernels; null
  // while unallocated. Writing through it bypasses the read-only check.
  std::byte* unsafe_data() const;

 private:
  Buffer(std::shared_ptr<Storage> storage, size_t offset, size_t size, ir::DType dtype, ir::Shape shape,
         int64_t num_elements, bool is_view);

  Status check_readable() const;
  Status check_writable() const;
  Status check_dtype(ir::DType want) const;
  Status check_single_element() const;
  Status check_index(int64_t index) const;
  Result<std::span<const std::byte>> typed_bytes(ir::DType want, size_t alignment) const;
  Result<std::span<std::byte>> mutable_typed_bytes(ir::DType want, size_t alignment);

  std::shared_ptr<Storage> storage_;
  BufferId id_;
  size_t offset_ = 0;
  size_t size_ = 0;
  ir::DType dtype_ = ir::DType::kU8;
  ir::Shape shape_;
  int64_t num_elements_ = 0;
  bool is_view_ = false;
};

}  // namespace carve::runtime

template <>
struct std::hash<carve::runtime::BufferId> {
  size_t operator()(const carve::runtime::BufferId& id) const noexcept { return std::hash<uint64_t>()(id.value); }
};
