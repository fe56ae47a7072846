// Arena: one Storage for every planned tensor of a plan, and a Buffer view per tensor.
//
// Contract
//  - An Arena is ONE Storage of arena_bytes (one storage_id, never reused) and a list of
//    views over it. Every view has its own BufferId and shares the arena's storage_id;
//    writes through one view are visible through the arena buffer and through any view
//    that overlaps it. Views cost no memory: two views may share bytes (at different
//    times in the plan, or in place).
//  - materialize() makes the arena of a planner MemoryPlan with one u8[size] view per
//    planned buffer, named by the buffer id. A compiled Program (program.h) makes its
//    arena with create() and adds one typed view per planned value and kernel scratch:
//    launches name those views and kernel pointers are resolved from them.
//  - Ownership: the Arena holds the arena buffer and the views; the memory lives while
//    the Arena or any Buffer copied out of it does. The Allocator& overload does not own
//    the allocator: it must outlive the Arena and every Buffer taken from it.
//  - Errors: kInvalidArgument when plan.offsets does not match problem.buffers, a name
//    repeats, or a size/offset/arena_bytes is negative; kOutOfBounds when a view would
//    end past the arena; both name the buffer. kOutOfMemory from the allocator.
//  - Thread-safety: const methods may be called concurrently; the bytes are unguarded.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "carve/ir/dtype.h"
#include "carve/ir/shape.h"
#include "carve/planner/problem.h"
#include "carve/runtime/allocator.h"
#include "carve/runtime/buffer.h"
#include "carve/status.h"

namespace carve::runtime {

struct ArenaView {
  std::string name;  // planned buffer id, value name, or "<kernel group>#scratch"
  Buffer buffer;     // own BufferId; the arena's storage_id; offset(), size(), dtype, shape
};

class Arena {
 public:
  // An arena of `bytes` bytes with no views yet; the base is aligned to `alignment`
  // (0 = the allocator's default).
  static Result<Arena> create(std::shared_ptr<Allocator> allocator, size_t bytes, size_t alignment = 0);

  // The whole arena as u8[arena_bytes].
  const Buffer& arena() const { return arena_; }
  StorageId storage_id() const { return arena_.storage_id(); }
  size_t arena_bytes() const { return arena_.size(); }

  // Adds a typed view at `offset` covering byte_size(dtype, shape) bytes; returns its
  // index in views(). kInvalidArgument for a repeated name, kOutOfBounds past the end.
  Result<int32_t> add_view(std::string name, int64_t offset, ir::DType dtype, ir::Shape shape);
  const std::vector<ArenaView>& views() const { return views_; }
  size_t num_buffers() const { return views_.size(); }
  // View names, in the order they were added (materialize(): Problem order).
  std::vector<std::string> ids() const;

  // The view named `name` (a handle copy: same BufferId every call).
  // kNotFound naming it when there is none.
  Result<Buffer> buffer(std::string_view name) const;
  // Null when not found. The pointer lives as long as the Arena.
  Buffer* find(std::string_view name);
  const Buffer* find(std::string_view name) const;

  // A new typed view over the start of view `name` (for callers that know the tensor
  // type). byte_size(dtype, shape) must fit in that view (kOutOfBounds). Fresh BufferId.
  Result<Buffer> typed_view(std::string_view name, ir::DType dtype, ir::Shape shape) const;

 private:
  explicit Arena(Buffer arena) : arena_(std::move(arena)) {}

  Buffer arena_;
  std::vector<ArenaView> views_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in views_
};

// The base alignment an arena for `problem` needs: the largest power-of-two part of any
// buffer's alignment (capped at a page) and at least `floor`, so planned offsets stay
// aligned in memory.
size_t arena_base_alignment(const planner::Problem& problem, size_t floor);

// The arena of `plan` (base aligned by arena_base_alignment): one u8[size] view per
// planned buffer, named by its id, in Problem order.
Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan,
                          std::shared_ptr<Allocator> allocator);
// Borrows `allocator` (see the ownership note above).
Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan, Allocator& allocator);

}  // namespace carve::runtime
