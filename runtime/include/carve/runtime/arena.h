// Arena materialization: turn a planner MemoryPlan into real memory.
//
// Contract
//  - materialize() makes ONE Storage of plan.arena_bytes (one storage_id) and, for each
//    planned buffer, one byte view (u8[size], Aliased) at its planned offset. Every view
//    has its own BufferId and shares the arena's storage_id; writes through one view are
//    visible through the arena buffer and through any view that overlaps it.
//  - Ownership: the Arena holds the arena buffer and the views; the memory lives while
//    the Arena or any Buffer copied out of it does. The Allocator& overload does not own
//    the allocator: it must outlive the Arena and every Buffer taken from it.
//  - Errors: kInvalidArgument when plan.offsets does not match problem.buffers, an id
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

class Arena {
 public:
  // The whole arena as u8[arena_bytes].
  const Buffer& arena() const { return arena_; }
  StorageId storage_id() const { return arena_.storage_id(); }
  size_t arena_bytes() const { return arena_.size(); }

  // Planned buffer ids, in Problem order.
  const std::vector<std::string>& ids() const { return ids_; }
  size_t num_buffers() const { return views_.size(); }

  // The view of planned buffer `id` (a handle copy: same BufferId every call).
  // kNotFound naming the id when it was not in the Problem.
  Result<Buffer> buffer(std::string_view id) const;
  // Null when not found. The pointer lives as long as the Arena.
  Buffer* find(std::string_view id);
  const Buffer* find(std::string_view id) const;

  // A typed view over the start of planned buffer `id` (for callers that know the
  // tensor type). byte_size(dtype, shape) must fit in the planned size (kOutOfBounds).
  // A new view: it gets a fresh BufferId.
  Result<Buffer> typed_view(std::string_view id, ir::DType dtype, ir::Shape shape) const;

 private:
  friend Result<Arena> materialize(const planner::Problem&, const planner::MemoryPlan&, std::shared_ptr<Allocator>);
  explicit Arena(Buffer arena) : arena_(std::move(arena)) {}

  Buffer arena_;
  std::vector<std::string> ids_;
  std::vector<Buffer> views_;                     // index-parallel to ids_
  std::unordered_map<std::string, size_t> index_; // id -> position in views_
};

Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan,
                          std::shared_ptr<Allocator> allocator);
// Borrows `allocator` (see the ownership note above).
Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan, Allocator& allocator);

}  // namespace carve::runtime
