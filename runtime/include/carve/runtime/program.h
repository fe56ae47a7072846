// The compiled form of a graph: kernels, one planned arena, and a list of launches with
// the byte ranges each reads and writes. Built by Session::compile (session.h); exposed
// for tests, tools and the scheduler. No LLVM or CUDA types here.
//
// How a value travels: ValueId -> its planned offset (planner) -> a view (an ArenaView:
// own BufferId over the arena Storage, at that offset, of the value's dtype and shape) ->
// the kernel pointer. Launches name the views they read and write (MemoryRef::view); the
// pointers are resolved from the views once, when a run binds its buffers (executor.h).
//
// Memory is addressed by region + slot + byte range, so a Program is independent of the
// caller's buffers: inputs and outputs bind at run time, the arena, constants and handles
// at compile time. Two MemoryRefs conflict iff same region and slot and their byte ranges
// intersect; the regions/slots are distinct storages (one arena Storage per program, one
// per constant, one per handle, one per caller input/output). Hazards come from storage
// byte ranges, never from view ids: two views over the same bytes conflict.
// Thread-safety: immutable after compile.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/jit/kernel.h"
#include "carve/jit/library_kernel.h"
#include "carve/planner/graph_problem.h"
#include "carve/planner/strategy.h"
#include "carve/runtime/arena.h"
#include "carve/runtime/handle.h"

namespace carve::runtime {

// host_*: caller host memory of a device program (the source of an upload, the target of
// a download); every other region of a device program is device memory. host_arena and
// host_constant exist only in mixed programs (Launch::on_host): the host copy of the arena
// (same offsets) and the host constants.
enum class Region : uint8_t {
  kArena, kInput, kOutput, kConstant, kHandle, kHostInput, kHostOutput, kHostHandle, kHostArena, kHostConstant
};
std::string_view region_name(Region region);

struct MemoryRef {
  Region region = Region::kArena;
  int32_t slot = 0;     // input/output index, constant index, handle index; 0 for the arena
  int64_t offset = 0;   // bytes from the start of the region's storage
  int64_t bytes = 0;
  // Arena only: the planned buffer (planner Problem index) these bytes belong to, -1 if
  // unknown. Lets statistics tell hazards that come from arena reuse (two different
  // buffers sharing bytes over time) from true data dependences.
  int32_t buffer = -1;
  // Arena only: the view (index into Program::arena->views()) these bytes belong to.
  // Every arena operand of a compiled Program names one; kernel pointers come from it.
  int32_t view = -1;

  bool overlaps(const MemoryRef& o) const {
    return region == o.region && slot == o.slot && bytes > 0 && o.bytes > 0 && offset < o.offset + o.bytes &&
           o.offset < offset + bytes;
  }
};

// copy: within one memory space; upload: host -> device; download: device -> host.
enum class LaunchKind : uint8_t { kKernel, kCopy, kUpload, kDownload };
std::string_view launch_kind_name(LaunchKind kind);

// A position operand checked when its launch runs (write_handle_at): the executor reads
// the i64 at `position` first and, outside [0, max], skips the launch and fails the run
// with kOutOfBounds (the kernel clamps as well, so no byte outside the handle is written).
struct PositionCheck {
  MemoryRef position;
  int64_t max = 0;
  std::string what;  // "write_handle_at 'w' into handle 'k' f32[8,4] along axis 0 (1 row)"
  // kOutOfBounds "<what>: position P is out of range: it needs 0 <= position <= max";
  // every executor (CPU, device, host kernels of a mixed program) reports this one text.
  Status out_of_range(int64_t position) const;
};

// The index tensor of a gather-family node (gather, gather_elements, gather_nd,
// scatter_nd), checked by the CPU executor before the launch: index e (of `count`, its
// component c = e % bounds.size()) must lie in [-bounds[c], bounds[c]). Outside, the
// launch is skipped and the run fails with kOutOfBounds (the kernels read zeros or skip
// the update there, so no byte outside the data is touched either way). Device programs
// have none: their kernels read zeros / skip the update (not checked).
struct IndexCheck {
  int32_t operand = -1;  // the launch operand holding the indices (i32 or i64)
  ir::DType dtype = ir::DType::kI64;
  int64_t count = 0;
  std::vector<int64_t> bounds;
  std::string what;  // "gather 'g': indices 'i' i64[3] into data 'x' f32[4,2] along axis 0"
  // kOutOfBounds "<what>: index I (element E) is out of range: it needs -B <= index < B".
  Status out_of_range(int64_t element, int64_t index) const;
};

struct Launch {
  std::string name;
  LaunchKind kind = LaunchKind::kKernel;
  int32_t kernel = -1;            // index into Program::kernels (kind == kernel)
  int64_t tile_begin = 0, tile_end = 1;
  std::vector<MemoryRef> operands;  // Kernel ABI order; for a copy/upload/download: {source, destination}
  std::vector<MemoryRef> reads, writes;
  // CPU kernels: checked by the executor before the launch. Device kernels check on the
  // GPU and report through their error word (cuda_codegen.h), read after the run.
  std::vector<PositionCheck> position_checks;
  std::vector<IndexCheck> index_checks;  // CPU programs only (IndexCheck)
  // Device program only: a kernel placed on the CPU (mixed placement, device_program.h);
  // its operands are host regions and it runs with ProgramKernel::fn on the host.
  bool on_host = false;
};

struct ProgramKernel {
  jit::KernelGroup group;
  jit::KernelFn fn = nullptr;  // generated code; null for a library kernel
  bool from_cache = false;
  std::shared_ptr<const jit::LibraryKernel> library;  // set: runs instead of fn (library_kernel.h)

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const {
    if (library) {
      library->run(operands, tile_begin, tile_end);
    } else {
      fn(operands, tile_begin, tile_end);
    }
  }
  bool has_code() const { return fn != nullptr || library != nullptr; }
};

// A graph output with a data-dependent extent (ir/extent.h): the output is planned at
// its upper bound and `extent` (an i64 the same kernel writes, kept until the end of the
// run) holds its actual size along `axis`. CPU programs only.
struct OutputExtent {
  int axis = -1;  // -1: the output's shape is static
  MemoryRef extent;
};

struct PlanSummary {
  std::string strategy;
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;
  int64_t no_reuse_bytes = 0;  // sum of planned buffer sizes
  int64_t buffers = 0, views = 0, inplace = 0;
  int64_t unordered_pairs = 0;  // parallel_safe: pairs kept apart
  double plan_seconds = 0;
};

// Where compile() spent its time, in seconds (`carve run --explain`).
struct CompileTimes {
  double prepare = 0;      // verify, copy the graph, order, bind constants/handles, kernel groups
  double plan = 0;         // the arena plan (= PlanSummary::plan_seconds)
  double materialise = 0;  // the arena storage, its views and the launches
  double jit = 0;          // kernel compilation (= Program::jit_seconds)
  double schedule = 0;     // the hazard DAG and the executor's kernel operands
};

struct Program {
  ir::Graph graph;                       // owned copy (weights pre-packed: compile_options.h); constants borrow its data
  std::vector<ir::NodeId> order;
  std::vector<ir::ValueId> inputs;       // graph inputs, in value-id order
  std::vector<ir::ValueId> outputs;      // = graph.outputs
  std::vector<ir::ValueId> constants;    // constant values, in value-id order
  std::vector<std::optional<Buffer>> constant_buffers;  // index-parallel to constants (read-only); empty without data
  // Bytes of the constants freed after library kernels copied them (their buffers are
  // empty and their graph data gone: program_build.cpp, release_copied_constants).
  int64_t released_constant_bytes = 0;
  std::vector<std::shared_ptr<BufferHandle>> handles;  // index-parallel to graph.handles
  planner::GraphProblem problem;
  planner::MemoryPlan plan;
  PlanSummary plan_summary;
  // The arena: one Storage, one view per planned value (named by the value) and per
  // kernel scratch ("<group>#scratch").
  std::unique_ptr<Arena> arena;
  std::vector<int32_t> value_views;      // per ValueId: its arena view, -1 when not in the arena
  std::vector<ProgramKernel> kernels;
  std::vector<Launch> launches;          // in program (execution) order
  std::vector<OutputExtent> output_extents;  // index-parallel to outputs
  double jit_seconds = 0;
  int64_t kernels_from_cache = 0;  // = kernels_from_memory + kernels_from_disk
  // Kernels by where their code came from: compiled now, the JIT's memory cache (an
  // identical kernel compiled before in this session or program), the disk cache.
  int64_t kernels_compiled = 0, kernels_from_memory = 0, kernels_from_disk = 0;
  CompileTimes times;
  // A device program (device_program.h): kernels have no CPU code (fn == nullptr), the
  // arena/input/output/constant/handle regions are device memory, and uploads/downloads
  // move caller host memory in and out.
  bool on_device = false;
  // Mixed placement: per output, whether its final bytes are written on the host (into
  // host_output; no download). Empty when no launch is on the host.
  std::vector<bool> output_on_host;

  // Whether any launch runs on the host (a mixed program).
  bool mixed() const {
    for (const Launch& l : launches)
      if (l.on_host) return true;
    return false;
  }

  // Index of graph input/output `v` (-1 when it is not one).
  int32_t input_index(ir::ValueId v) const;
  int32_t output_index(ir::ValueId v) const;
};

}  // namespace carve::runtime
