#include "carve/runtime/storage.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace carve::runtime {

namespace {

// Starts at 1 so a zero id can mean "none" in diagnostics; only ever counts up.
std::atomic<uint64_t> g_next_storage_id{1};

}  // namespace

std::string_view ownership_name(Ownership ownership) {
  switch (ownership) {
    case Ownership::kOwned: return "Owned";
    case Ownership::kBorrowed: return "Borrowed";
    case Ownership::kAliased: return "Aliased";
    case Ownership::kFileBacked: return "FileBacked";
    case Ownership::kDeviceResident: return "DeviceResident";
  }
  return "Unknown";
}

Storage::Storage(Ownership ownership, size_t bytes)
    : id_{g_next_storage_id.fetch_add(1, std::memory_order_relaxed)}, ownership_(ownership), size_(bytes) {}

Storage::~Storage() {
  if (!is_allocated() || !owned_) return;
  switch (ownership_) {
    case Ownership::kOwned:
    case Ownership::kDeviceResident:
      allocator_->deallocate(data_, size_, alignment_);
      break;
    case Ownership::kFileBacked:
      if (map_base_ != nullptr) ::munmap(map_base_, map_length_);
      break;
    case Ownership::kBorrowed:
    case Ownership::kAliased:
      break;  // not ours to free
  }
}

std::shared_ptr<Storage> Storage::lazy(std::shared_ptr<Allocator> allocator, size_t bytes, size_t alignment) {
  const bool on_cpu = allocator->device_type() == DeviceType::kCpu;
  std::shared_ptr<Storage> s(new Storage(on_cpu ? Ownership::kOwned : Ownership::kDeviceResident, bytes));
  s->alignment_ = alignment == 0 ? allocator->default_alignment() : alignment;
  s->mutable_ = true;
  s->cpu_accessible_ = on_cpu;
  s->allocator_ = std::move(allocator);
  return s;
}

Result<std::shared_ptr<Storage>> Storage::allocate(std::shared_ptr<Allocator> allocator, size_t bytes,
                                                   size_t alignment) {
  if (allocator == nullptr) return Status(ErrorCode::kInvalidArgument, "Storage::allocate: null allocator");
  std::shared_ptr<Storage> s = lazy(std::move(allocator), bytes, alignment);
  CARVE_RETURN_IF_ERROR(s->ensure_allocated());
  return s;
}

Status Storage::ensure_allocated() {
  if (is_allocated()) return Status();
  std::lock_guard<std::mutex> lock(alloc_mu_);
  if (is_allocated()) return Status();  // another thread won the race
  Result<void*> block = allocator_->allocate(size_, alignment_);
  if (!block.ok()) {
    return block.status().with_context(fmt::format("allocating storage #{} ({} bytes)", id_.value, size_));
  }
  data_ = static_cast<std::byte*>(*block);
  allocated_.store(true, std::memory_order_release);
  return Status();
}

Result<std::shared_ptr<Storage>> Storage::borrow(void* data, size_t bytes, bool is_mutable) {
  if (data == nullptr && bytes != 0) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("borrow: null pointer for {} bytes", bytes));
  }
  std::shared_ptr<Storage> s(new Storage(Ownership::kBorrowed, bytes));
  s->mutable_ = is_mutable;
  s->owned_ = false;
  s->data_ = static_cast<std::byte*>(data);
  s->allocated_.store(true, std::memory_order_release);
  return s;
}

Result<std::shared_ptr<Storage>> Storage::import_device(std::shared_ptr<Allocator> backend, void* data,
                                                        size_t bytes, bool is_mutable) {
  if (backend == nullptr || backend->device_type() == DeviceType::kCpu)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("import_device: {} is not a device allocator (pass the Session's allocator())",
                              backend ? backend->name() : std::string_view("null")));
  if (data == nullptr && bytes != 0)
    return Status(ErrorCode::kInvalidArgument, fmt::format("import_device: null pointer for {} bytes", bytes));
  if (bytes != 0) {
    Status in_range = backend->check_device_range(data, bytes);
    if (!in_range.ok())
      return in_range.with_context(fmt::format("import_device: {} bytes at {}", bytes, static_cast<const void*>(data)));
  }
  std::shared_ptr<Storage> s(new Storage(Ownership::kDeviceResident, bytes));
  s->mutable_ = is_mutable;
  s->cpu_accessible_ = false;
  s->owned_ = false;
  s->allocator_ = std::move(backend);
  s->data_ = static_cast<std::byte*>(data);
  s->allocated_.store(true, std::memory_order_release);
  return s;
}

Result<std::shared_ptr<Storage>> Storage::map_file(const std::string& path, uint64_t file_offset, size_t bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(ErrorCode::kIoError, fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status(ErrorCode::kIoError, fmt::format("cannot stat '{}': {}", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(ErrorCode::kIoError, fmt::format("'{}' is not a regular file", path));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // Written to avoid overflow of file_offset + bytes.
  if (file_offset > file_size || bytes > file_size - file_offset) {
    ::close(fd);
    return Status(ErrorCode::kOutOfBounds,
                  fmt::format("region [{}, +{}) runs past the end of '{}' ({} bytes)", file_offset, bytes, path,
                              file_size));
  }

  std::shared_ptr<Storage> s(new Storage(Ownership::kFileBacked, bytes));
  s->path_ = path;
  s->mutable_ = false;
  if (bytes != 0) {
    // mmap wants a page-aligned offset: map from the page boundary, then step in.
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t aligned_offset = file_offset - file_offset % page;
    const size_t delta = static_cast<size_t>(file_offset - aligned_offset);
    const size_t length = bytes + delta;
    void* base = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(aligned_offset));
    if (base == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Status(ErrorCode::kIoError, fmt::format("cannot map '{}' at offset {} ({} bytes): {}", path,
                                                     file_offset, bytes, std::strerror(err)));
    }
    s->map_base_ = base;
    s->map_length_ = length;
    s->data_ = static_cast<std::byte*>(base) + delta;
  }
  ::close(fd);  // the mapping keeps the file referenced
  s->allocated_.store(true, std::memory_order_release);
  return s;
}

}  // namespace carve::runtime
