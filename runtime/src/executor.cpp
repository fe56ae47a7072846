#include "carve/runtime/executor.h"

#include <fmt/format.h>

#include <cstring>

namespace carve::runtime {

namespace {

bool is_bound_region(Region region) { return region != Region::kArena; }

}  // namespace

std::byte* operand_address(const Program& program, const RegionBases& bases, const MemoryRef& ref) {
  const auto slot = static_cast<size_t>(ref.slot);
  std::byte* base = nullptr;
  switch (ref.region) {
    case Region::kArena: {
      const Buffer& view = program.arena->views()[static_cast<size_t>(ref.view)].buffer;
      return view.unsafe_data() + (ref.offset - static_cast<int64_t>(view.offset()));
    }
    case Region::kInput: base = bases.inputs[slot]; break;
    case Region::kOutput: base = bases.outputs[slot]; break;
    case Region::kConstant: base = bases.constants[slot]; break;
    case Region::kHandle: base = bases.handles[slot]; break;
    case Region::kHostInput: base = bases.host_inputs[slot]; break;
    case Region::kHostOutput: base = bases.host_outputs[slot]; break;
    case Region::kHostHandle: base = bases.host_handles[slot]; break;
    case Region::kHostArena: base = bases.host_arena; break;
    case Region::kHostConstant: base = bases.host_constants[slot]; break;
  }
  return base != nullptr ? base + ref.offset : nullptr;  // null: a constant freed (program.h)
}

namespace {

// Operand `i` of a launch: its kernel operands, then its position checks.
const MemoryRef& operand_or_check(const Launch& launch, size_t i) {
  return i < launch.operands.size() ? launch.operands[i] : launch.position_checks[i - launch.operands.size()].position;
}

}  // namespace

LaunchOperands::LaunchOperands(const Program& program, const RegionBases& bases) {
  first_.reserve(program.launches.size());
  for (size_t l = 0; l < program.launches.size(); ++l) {
    first_.push_back(pointers_.size());
    const Launch& launch = program.launches[l];
    for (size_t i = 0; i < launch.operands.size() + launch.position_checks.size(); ++i) {
      const MemoryRef& ref = operand_or_check(launch, i);
      if (is_bound_region(ref.region))
        bound_.push_back({pointers_.size(), static_cast<int32_t>(l), static_cast<int32_t>(i)});
      pointers_.push_back(operand_address(program, bases, ref));
    }
  }
}

void LaunchOperands::bind(const Program& program, const RegionBases& bases) {
  for (const BoundOperand& b : bound_) {
    const Launch& launch = program.launches[static_cast<size_t>(b.launch)];
    pointers_[b.position] = operand_address(program, bases, operand_or_check(launch, static_cast<size_t>(b.operand)));
  }
  failed_->launch.store(-1, std::memory_order_relaxed);
  failed_->cancelled.store(false, std::memory_order_relaxed);
  stop_ = {};
}

bool LaunchOperands::positions_in_range(const Program& program, int32_t launch) const {
  const Launch& l = program.launches[static_cast<size_t>(launch)];
  void* const* checks = operands(launch) + l.operands.size();
  for (size_t c = 0; c < l.position_checks.size(); ++c) {
    int64_t position = 0;
    std::memcpy(&position, checks[c], sizeof(position));
    if (position >= 0 && position <= l.position_checks[c].max) continue;
    int32_t none = -1;
    if (failed_->launch.compare_exchange_strong(none, launch, std::memory_order_acq_rel)) {
      failed_->check = static_cast<int32_t>(c);
      failed_->position = position;
    }
    return false;
  }
  return true;
}

bool LaunchOperands::indices_in_range(const Program& program, int32_t launch) const {
  const Launch& l = program.launches[static_cast<size_t>(launch)];
  void* const* ptrs = operands(launch);
  for (size_t c = 0; c < l.index_checks.size(); ++c) {
    const IndexCheck& check = l.index_checks[c];
    const auto* bytes = static_cast<const std::byte*>(ptrs[check.operand]);
    const size_t components = check.bounds.size();
    for (int64_t e = 0; e < check.count; ++e) {
      int64_t index = 0;
      if (check.dtype == ir::DType::kI32) {
        int32_t narrow = 0;
        std::memcpy(&narrow, bytes + e * 4, sizeof(narrow));
        index = narrow;
      } else {
        std::memcpy(&index, bytes + e * 8, sizeof(index));
      }
      const int64_t bound = check.bounds[static_cast<size_t>(e) % components];
      if (index >= -bound && index < bound) continue;
      int32_t none = -1;
      if (failed_->launch.compare_exchange_strong(none, launch, std::memory_order_acq_rel)) {
        failed_->check = static_cast<int32_t>(l.position_checks.size() + c);
        failed_->position = index;
        failed_->element = e;
      }
      return false;
    }
  }
  return true;
}

Status LaunchOperands::failed_check(const Program& program) const {
  if (failed_->cancelled.load(std::memory_order_acquire))
    return Status(ErrorCode::kCancelled, fmt::format("run of '{}' cancelled: launches after the stop request did "
                                                     "not run", program.graph.name));
  const int32_t launch = failed_->launch.load(std::memory_order_acquire);
  if (launch < 0) return Status();
  const Launch& l = program.launches[static_cast<size_t>(launch)];
  const auto check = static_cast<size_t>(failed_->check);
  if (check >= l.position_checks.size())
    return l.index_checks[check - l.position_checks.size()].out_of_range(failed_->element, failed_->position);
  return l.position_checks[check].out_of_range(failed_->position);
}

void execute_launch(const Program& program, const LaunchOperands& operands, int32_t launch, int64_t tile_begin,
                    int64_t tile_end) {
  const Launch& l = program.launches[static_cast<size_t>(launch)];
  void* const* ptrs = operands.operands(launch);
  if (operands.stop_requested()) {
    operands.note_cancelled();
    return;
  }
  if (l.kind != LaunchKind::kKernel) {  // on the CPU every copy is a memmove
    // An empty tensor may have no storage (null): memmove wants valid pointers even for 0.
    if (l.operands[0].bytes > 0) std::memmove(ptrs[1], ptrs[0], static_cast<size_t>(l.operands[0].bytes));
    return;
  }
  if (!l.position_checks.empty() && !operands.positions_in_range(program, launch)) return;
  if (!l.index_checks.empty() && !operands.indices_in_range(program, launch)) return;
  program.kernels[static_cast<size_t>(l.kernel)].run(ptrs, tile_begin, tile_end);
}

void execute_sequential(const Program& program, const LaunchOperands& operands) {
  for (size_t i = 0; i < program.launches.size(); ++i) {
    const Launch& l = program.launches[i];
    execute_launch(program, operands, static_cast<int32_t>(i), l.tile_begin, l.tile_end);
  }
}

}  // namespace carve::runtime
