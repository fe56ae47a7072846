#include "carve/runtime/arena.h"

#include <algorithm>

#include <fmt/format.h>

namespace carve::runtime {

namespace {

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

size_t arena_base_alignment(const planner::Problem& problem, size_t floor) {
  size_t align = floor;
  for (const auto& b : problem.buffers) {
    const auto a = static_cast<size_t>(std::max<int64_t>(b.alignment, 1));
    const size_t pow2 = a & (~a + 1);  // lowest set bit: the power-of-two part
    align = std::max(align, std::min<size_t>(pow2, 4096));
  }
  return align;
}

Result<Arena> Arena::create(std::shared_ptr<Allocator> allocator, size_t bytes, size_t alignment) {
  if (allocator == nullptr) return Status(ErrorCode::kInvalidArgument, "arena: null allocator");
  if (alignment == 0) alignment = allocator->default_alignment();
  CARVE_ASSIGN_OR_RETURN(auto storage, Storage::allocate(std::move(allocator), bytes, alignment));
  CARVE_ASSIGN_OR_RETURN(Buffer whole,
                         Buffer::over(std::move(storage), ir::DType::kU8, ir::Shape{static_cast<int64_t>(bytes)}));
  return Arena(std::move(whole));
}

Result<int32_t> Arena::add_view(std::string name, int64_t offset, ir::DType dtype, ir::Shape shape) {
  if (offset < 0)
    return Status(ErrorCode::kInvalidArgument, fmt::format("arena view '{}': negative offset {}", name, offset));
  if (index_.contains(name))
    return Status(ErrorCode::kInvalidArgument, fmt::format("arena view '{}' appears twice", name));
  Result<Buffer> view = arena_.view(static_cast<size_t>(offset), dtype, std::move(shape));
  if (!view.ok()) return view.status().with_context(fmt::format("arena view '{}'", name));
  index_.emplace(name, views_.size());
  views_.push_back({std::move(name), std::move(view).value()});
  return static_cast<int32_t>(views_.size() - 1);
}

std::vector<std::string> Arena::ids() const {
  std::vector<std::string> names;
  names.reserve(views_.size());
  for (const ArenaView& v : views_) names.push_back(v.name);
  return names;
}

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
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& b = problem.buffers[i];
    CARVE_RETURN_IF_ERROR(check_entry(b, plan.offsets[i], plan.arena_bytes));
    if (!seen.emplace(b.id, i).second) {
      return Status(ErrorCode::kInvalidArgument, fmt::format("materialize: buffer id '{}' appears twice", b.id));
    }
  }
  const size_t alignment = arena_base_alignment(problem, allocator->default_alignment());
  CARVE_ASSIGN_OR_RETURN(Arena arena,
                         Arena::create(std::move(allocator), static_cast<size_t>(plan.arena_bytes), alignment));
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& b = problem.buffers[i];
    CARVE_RETURN_IF_ERROR(arena.add_view(b.id, plan.offsets[i], ir::DType::kU8, ir::Shape{b.size}).status());
  }
  return arena;
}

Result<Arena> materialize(const planner::Problem& problem, const planner::MemoryPlan& plan, Allocator& allocator) {
  // Aliasing constructor with an empty owner: a shared_ptr that never deletes.
  return materialize(problem, plan, std::shared_ptr<Allocator>(std::shared_ptr<Allocator>(), &allocator));
}

Result<Buffer> Arena::buffer(std::string_view name) const {
  const Buffer* b = find(name);
  if (b == nullptr) return Status(ErrorCode::kNotFound, fmt::format("arena has no buffer '{}'", name));
  return *b;
}

Buffer* Arena::find(std::string_view name) {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &views_[it->second].buffer;
}

const Buffer* Arena::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &views_[it->second].buffer;
}

Result<Buffer> Arena::typed_view(std::string_view name, ir::DType dtype, ir::Shape shape) const {
  const Buffer* b = find(name);
  if (b == nullptr) return Status(ErrorCode::kNotFound, fmt::format("arena has no buffer '{}'", name));
  Result<Buffer> view = b->view(0, dtype, std::move(shape));
  if (!view.ok()) return view.status().with_context(fmt::format("typed view of arena buffer '{}'", name));
  return view;
}

}  // namespace carve::runtime
