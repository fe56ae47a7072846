// Executors: run a Program's launches on the CPU.
//
// Addressing: an arena operand's address is its view's (MemoryRef::view, a view of
// Program::arena); caller inputs/outputs, constants and handles are bound per run
// (RegionBases). LaunchOperands resolves every launch's kernel pointers once per binding,
// so running a launch does no address arithmetic. The sequential executor runs launches
// in program order, each over its whole tile range.
// Thread-safety: an executor call owns the program's arena for its duration; the caller
// (CompiledProgram::run) serialises calls. A LaunchOperands is bound by one thread at a
// time and read concurrently by the workers of one run.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <vector>

#include "carve/runtime/program.h"
#include "carve/status.h"

namespace carve::runtime {

// Base addresses, per region and slot, of the memory bound for one run (the arena is not
// here: its bytes are reached through its views).
struct RegionBases {
  std::vector<std::byte*> inputs, outputs, constants, handles;
  std::vector<std::byte*> host_inputs, host_outputs, host_handles;  // device programs only
  std::byte* host_arena = nullptr;                                    // mixed programs only
  std::vector<std::byte*> host_constants;                             // mixed programs only
};

// The address of `ref` under `bases`: an arena ref through its view (build_schedule
// rejects a Program whose arena refs lack one), any other region as base + offset.
std::byte* operand_address(const Program& program, const RegionBases& bases, const MemoryRef& ref);

// Every launch's operand addresses, in Kernel ABI order, for one binding (then the
// addresses of its position checks). Arena operands are resolved from their views when
// created; bind() re-resolves only the operands in caller-bound regions (inputs, outputs,
// constants, handles) and clears the run's failed check.
class LaunchOperands {
 public:
  LaunchOperands() = default;
  LaunchOperands(const Program& program, const RegionBases& bases);
  void bind(const Program& program, const RegionBases& bases);
  void* const* operands(int32_t launch) const { return pointers_.data() + first_[static_cast<size_t>(launch)]; }

  // Reads launch `launch`'s position checks; on the first value out of range records the
  // failure (kept until bind()) and returns false: the launch must not run.
  bool positions_in_range(const Program& program, int32_t launch) const;
  // The same for its index checks (IndexCheck).
  bool indices_in_range(const Program& program, int32_t launch) const;
  // Cancellation of the current run: once `stop` is requested, no further launch starts.
  // bind() clears it.
  void set_stop(std::stop_token stop) { stop_ = std::move(stop); }
  bool stop_requested() const { return stop_.stop_requested(); }
  void note_cancelled() const { failed_->cancelled.store(true, std::memory_order_release); }
  // Why the run since bind() failed: kCancelled when launches were skipped for a stop
  // request, kOutOfBounds naming the check, position and bound when a position check
  // failed; Ok otherwise.
  Status failed_check(const Program& program) const;

 private:
  struct FailedCheck {
    std::atomic<int32_t> launch{-1};
    int32_t check = -1;     // a position check, or position_checks.size() + an index check
    int64_t position = 0;   // the position, or the index, out of range
    int64_t element = 0;    // index checks: which index
    std::atomic<bool> cancelled{false};  // a launch was skipped for the stop request
  };
  std::stop_token stop_;
  std::unique_ptr<FailedCheck> failed_ = std::make_unique<FailedCheck>();
  struct BoundOperand {
    size_t position;      // in pointers_
    int32_t launch, operand;
  };
  std::vector<void*> pointers_;
  std::vector<size_t> first_;         // per launch: index of its first operand in pointers_
  std::vector<BoundOperand> bound_;   // the entries bind() refreshes
};

// Runs launch `launch` over tiles [tile_begin, tile_end) (a kernel) or its copy.
void execute_launch(const Program& program, const LaunchOperands& operands, int32_t launch, int64_t tile_begin,
                    int64_t tile_end);

void execute_sequential(const Program& program, const LaunchOperands& operands);

}  // namespace carve::runtime
