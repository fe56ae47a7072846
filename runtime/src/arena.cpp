#include "carve/runtime/arena.h"

#include <algorithm>

#include <fmt/format.h>

namespace carve::runtime {

namespace {

// The arena base gets the largest power-of-two part of any requested alignment (capped
// at a page), so an offset the planner aligned stays aligned in real memory too.
size_t base_alignment(const planner::Problem& problem, size_t floor) {
  size_t align = floor;
  for (const auto& b : problem.buffers) {
    const auto a = static_cast<size_t>(std::max<int64_t>(b.alignment, 1));
    const size_t pow2 = a & (~a + 1);  // lowest set bit: the power-of-two part
    align = std::max(align, std::min<size_t>(pow2, 4096));
  }
  return align;
}

Status check_entry(const planner::BufferRequest& b, int64_t offset, int64_t arena_bytes) {
  if (b.size < 0 || offset < 0) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("buffer '{}': negative size {} or offset {}", b.id, b.size, offset));
  }
  // offset + size <= arena_bytes, without overflow.
  if (offset > arena_bytes || b.size > arena_bytes - offset) {
    return Status(ErrorCode::kOutOfBounds, fmt::format("buffer '{}': [{}, +{}) ends past the arena of {} bytes",
                                                       b.id, offset, b.size, arena_bytes));
  }
  return Status();
}

}  // namespace

Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan,
                          std::shared_ptr<Allocator> allocator) {
  if (allocator == nullptr) return Status(ErrorCode::kInvalidArgument, "materialize: null allocator");
  if (plan.offsets.size() != problem.buffers.size()) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("materialize: plan has {} offsets for {} buffers",
                                                           plan.offsets.size(), problem.buffers.size()));
  }
  if (plan.arena_bytes < 0) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("materialize: negative arena size {}", plan.arena_bytes));
  }
  // Check the whole plan before allocating, so a bad plan costs no memory.
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& b = problem.buffers[i];
    CARVE_RETURN_IF_ERROR(check_entry(b, plan.offsets[i], plan.arena_bytes));
    if (!index.emplace(b.id, i).second) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("materialize: buffer id '{}' appears twice", b.id));
    }
  }

  const size_t arena_bytes = static_cast<size_t>(plan.arena_bytes);
  const size_t alignment = base_alignment(problem, allocator->default_alignment());
  CARVE_ASSIGN_OR_RETURN(auto storage, Storage::allocate(std::move(allocator), arena_bytes, alignment));
  CARVE_ASSIGN_OR_RETURN(Buffer whole, Buffer::over(std::move(storage), ir::DType::kU8,
                                                    ir::Shape{static_cast<int64_t>(arena_bytes)}));
  Arena arena(std::move(whole));
  arena.views_.reserve(problem.buffers.size());
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& b = problem.buffers[i];
    Result<Buffer> view = arena.arena_.view(static_cast<size_t>(plan.offsets[i]), static_cast<size_t>(b.size));
    if (!view.ok()) return view.status().with_context(fmt::format("buffer '{}'", b.id));
    arena.ids_.push_back(b.id);
    arena.views_.push_back(std::move(view).value());
  }
  arena.index_ = std::move(index);
  return arena;
}

Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan, Allocator& allocator) {
  // Aliasing constructor with an empty owner: a shared_ptr that never deletes.
  return materialize(problem, plan, std::shared_ptr<Allocator>(std::shared_ptr<Allocator>(), &allocator));
}

Result<Buffer> Arena::buffer(std::string_view id) const {
  const Buffer* b = find(id);
  if (b == nullptr) return Status(ErrorCode::kNotFound, fmt::format("arena has no buffer '{}'", id));
  return *b;
}

Buffer* Arena::find(std::string_view id) {
  auto it = index_.find(std::string(id));
  return it == index_.end() ? nullptr : &views_[it->second];
}

const Buffer* Arena::find(std::string_view id) const {
  auto it = index_.find(std::string(id));
  return it == index_.end() ? nullptr : &views_[it->second];
}

Result<Buffer> Arena::typed_view(std::string_view id, ir::DType dtype, ir::Shape shape) const {
  const Buffer* b = find(id);
  if (b == nullptr) return Status(ErrorCode::kNotFound, fmt::format("arena has no buffer '{}'", id));
  Result<Buffer> view = b->view(0, dtype, std::move(shape));
  if (!view.ok()) return view.status().with_context(fmt::format("typed view of arena buffer '{}'", id));
  return view;
}

}  // namespace carve::runtime
