// Storage: one allocation (or one borrowed / mapped region) and its identity.
//
// Contract
//  - Ownership: a Storage is reference counted through std::shared_ptr; every Buffer
//    viewing it holds one reference. What happens to the bytes when the last reference
//    drops depends on the mode: Owned and DeviceResident blocks go back to their allocator,
//    Borrowed memory is left alone (the caller owns it and must keep it alive and
//    unresized for as long as any Buffer views it), FileBacked regions are unmapped.
//  - Identity: storage_id() is minted once, at creation, from a process-wide atomic
//    counter that only counts up: no two storages ever share an id, even after frees.
//  - Lazy allocation: a lazy Storage has an id and a size but no bytes until
//    ensure_allocated(); every Buffer viewing it sees the bytes from then on.
//  - Thread-safety: ensure_allocated() may race with itself and with is_allocated()
//    (one caller allocates, the others wait). The bytes themselves are not guarded:
//    keeping concurrent readers and writers apart is the scheduler's job.
//  - Errors: Status / Result, never exceptions. Messages name the storage id or path.
#pragma once

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "carve/runtime/allocator.h"
#include "carve/status.h"

namespace carve::runtime {

// How a buffer's bytes were acquired, after SKaiNET's BufferHandle:
//   Owned           runtime-allocated; mutable; freed when the last reference drops.
//   Borrowed        caller memory; never freed or resized; mutable only if the caller said so.
//   Aliased         a view of a parent buffer; shares its memory; mutable exactly when the
//                   parent is. (A Buffer property: storages are never Aliased.)
//   FileBacked      read-only mmap of a file region.
//   DeviceResident  backend memory; not CPU-accessible.
enum class Ownership { kOwned, kBorrowed, kAliased, kFileBacked, kDeviceResident };

std::string_view ownership_name(Ownership ownership);

struct StorageId {
  uint64_t value = 0;
  friend auto operator<=>(const StorageId&, const StorageId&) = default;
};

class Storage {
 public:
  // Runtime-allocated storage, lazy: bytes come on ensure_allocated(). The mode is Owned
  // for a kCpu allocator and DeviceResident otherwise. alignment 0 = allocator default.
  // Precondition: allocator is not null (allocate() reports kInvalidArgument instead).
  static std::shared_ptr<Storage> lazy(std::shared_ptr<Allocator> allocator, size_t bytes, size_t alignment = 0);
  // Same, allocated now. kOutOfMemory / kInvalidArgument from the allocator.
  static Result<std::shared_ptr<Storage>> allocate(std::shared_ptr<Allocator> allocator, size_t bytes,
                                                   size_t alignment = 0);
  // Caller memory. `data` may be null only when bytes == 0.
  static Result<std::shared_ptr<Storage>> borrow(void* data, size_t bytes, bool is_mutable);
  // Caller DEVICE memory (e.g. an engine's cudaMalloc'd buffer), DeviceResident and never
  // CPU-accessible, never freed by carve (the caller keeps it alive while any Buffer views
  // it). `backend` is an allocator of the device it lives on (Session::allocator()): its
  // copy hooks move the bytes, and its check_device_range() must accept the range.
  // kInvalidArgument naming the pointer for a null/CPU backend, a null pointer, host
  // memory, memory of another device or a range past its allocation.
  static Result<std::shared_ptr<Storage>> import_device(std::shared_ptr<Allocator> backend, void* data, size_t bytes,
                                                        bool is_mutable);
  // Read-only mapping of [file_offset, file_offset + bytes) of `path`. kIoError when the
  // file cannot be opened or mapped, kOutOfBounds when the region runs past the file's end.
  static Result<std::shared_ptr<Storage>> map_file(const std::string& path, uint64_t file_offset, size_t bytes);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  StorageId id() const { return id_; }
  size_t size() const { return size_; }
  Ownership ownership() const { return ownership_; }
  // False for Borrowed and imported device memory: carve never frees those bytes.
  bool owns_memory() const { return owned_; }
  bool is_mutable() const { return mutable_; }
  bool is_cpu_accessible() const { return cpu_accessible_; }
  DeviceType device_type() const { return allocator_ ? allocator_->device_type() : DeviceType::kCpu; }
  int device_id() const { return allocator_ ? allocator_->device_id() : 0; }
  size_t alignment() const { return alignment_; }
  // Null for Borrowed and FileBacked storage.
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }
  const std::string& path() const { return path_; }  // FileBacked only

  bool is_allocated() const { return allocated_.load(std::memory_order_acquire); }
  // Allocates a lazy storage once; a no-op when already allocated.
  Status ensure_allocated();
  // The first byte (host or device address); null until allocated, and may be null
  // for a 0-byte region.
  std::byte* data() const { return is_allocated() ? data_ : nullptr; }

 private:
  Storage(Ownership ownership, size_t bytes);

  StorageId id_;
  Ownership ownership_;
  size_t size_ = 0;
  size_t alignment_ = 0;
  bool mutable_ = false;
  bool cpu_accessible_ = true;
  bool owned_ = true;
  std::shared_ptr<Allocator> allocator_;
  std::string path_;

  std::mutex alloc_mu_;
  std::atomic<bool> allocated_{false};
  std::byte* data_ = nullptr;
  // FileBacked: the whole page-aligned mapping, for munmap.
  void* map_base_ = nullptr;
  size_t map_length_ = 0;
};

}  // namespace carve::runtime

template <>
struct std::hash<carve::runtime::StorageId> {
  size_t operator()(const carve::runtime::StorageId& id) const noexcept { return std::hash<uint64_t>()(id.value); }
};
