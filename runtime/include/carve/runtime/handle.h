// BufferHandle: a named persistent tensor (KV cache, optimizer state) in the handle
// region, outside every arena, that survives across run() calls and across programs.
//
// Contract
//  - Ownership: created once by the user (shared_ptr); each CompiledProgram that binds it
//    keeps a reference. Its memory is Owned, zero-initialised, allocated at create().
//  - Binding: a graph declares handles by name, dtype and shape; compiling binds the
//    user's handle of that name and checks dtype and shape (kTypeMismatch/kShapeError).
//    Kernels read and write the handle's bytes in place: no copies.
//  - Host access: set() / read() / reset(). A wrong dtype, shape or size is an error and
//    leaves the handle unchanged.
//  - Invalid state: a run that fails after it may have written the handle (a position out
//    of range in write_handle_at) marks it invalid with the reason; read() and every run
//    that binds it then fail with kInvalidArgument quoting the reason, until set() or
//    reset() gives it a defined value again.
//  - Thread-safety: every method is safe to call concurrently. A run holds the handle's
//    lock for its duration, so host access waits for (never interleaves with) runs that
//    use the handle; two programs sharing a handle run one at a time.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "carve/runtime/allocator.h"
#include "carve/runtime/buffer.h"

namespace carve::runtime {

class BufferHandle {
 public:
  static Result<std::shared_ptr<BufferHandle>> create(std::string name, ir::DType dtype, ir::Shape shape,
                                                      std::shared_ptr<Allocator> allocator = cpu_allocator());

  const std::string& name() const { return name_; }
  const ir::TensorType& type() const { return type_; }
  size_t byte_size() const { return buffer_.size(); }

  // Replace the whole value. kTypeMismatch / kShapeError / kInvalidArgument (size) leave it unchanged.
  Status set(const Buffer& value);
  Status set_bytes(std::span<const std::byte> bytes);
  // A copy of the current value (Owned, CPU).
  Result<Buffer> read() const;
  // All bytes zero again.
  Status reset();

  // Empty while the value is defined; else why it is not (see "Invalid state").
  std::string invalid_reason() const;
  // kInvalidArgument quoting the reason when invalid.
  Status check_valid() const;
  // For the runtime: marks the value undefined. Call with run_mutex() held.
  void invalidate(std::string reason);

  // For the runtime: the memory kernels use, and the lock a run holds.
  const Buffer& memory() const { return buffer_; }
  std::mutex& run_mutex() const { return mutex_; }

 private:
  BufferHandle(std::string name, ir::TensorType type, Buffer buffer)
      : name_(std::move(name)), type_(std::move(type)), buffer_(std::move(buffer)) {}
  Status check_value(const ir::TensorType& type) const;
  void mark_valid();

  std::string name_;
  ir::TensorType type_;
  Buffer buffer_;
  mutable std::mutex mutex_;
  mutable std::mutex state_mutex_;  // guards invalid_reason_ (taken without the run lock)
  std::string invalid_reason_;
};

}  // namespace carve::runtime
