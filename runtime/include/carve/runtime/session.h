// Session and CompiledProgram: carve's embedding API.
//
//   auto session = runtime::Session::create({});                 // CPU, hardware threads
//   auto program = (*session)->compile(graph, {.strategy = "best"});
//   auto outputs = (*program)->run(inputs);                       // or run(inputs, outputs)
//
// Contract
//  - compile() verifies the graph, pre-packs constant matmul/gemm weights into the
//    layout their kernels read (CompileOptions::prepack_weights; in Program::graph, the
//    program's copy), chooses the execution order, forms kernel groups,
//    plans one arena (validated), materialises it as one Storage with a Buffer view per
//    planned value (value_view(); launches name these views and kernel pointers are
//    resolved from them), JIT-compiles the kernels and builds the launch list.
//    Errors name the node/value: kVerifyError, kInvalidArgument (a constant without data,
//    a graph handle with no bound BufferHandle), kTypeMismatch/kShapeError (a bound handle
//    of another type), kUnavailable (a build without the CPU JIT), planner/JIT errors.
//  - run(): inputs are caller memory, used in place (Borrowed, no copy), one per graph
//    input in CompiledProgram::input_names() order, each of exactly the input's dtype
//    and shape. Outputs: caller-provided writable buffers of the outputs' types, or
//    returned as new Owned buffers. Overlap is checked by address range, whatever the
//    storages: an output may not share a byte with an input or another output, and no
//    caller buffer may share one with the program's arena, constants or handles
//    (kInvalidArgument naming both buffers). A failed run leaves bound handles as they
//    were, or marks them invalid: argument errors (and a bound handle marked invalid)
//    fail before anything runs; a race found by the checker with
//    RunOptions::fail_on_hazard restores the handles the run wrote (saved before it); a
//    write_handle_at position out of range (kOutOfBounds naming the handle, the position
//    and the bound; that write is skipped) and a cancellation during the run (kCancelled,
//    RunOptions::stop/deadline) mark every handle the program writes invalid (handle.h:
//    reading it fails until set() or reset()).
//  - Data-dependent extents (ir/extent.h: non_zero, unique, non_max_suppression): such an
//    output is planned at its upper bound (output_types() says that bound) and its kernel
//    writes the result packed at the actual shape from the first byte, and the actual
//    extent to a slot the program keeps until the end of the run. run() returning
//    outputs gives a view of the actual shape over the planned bytes; with caller
//    outputs (of the bound's type) the data sits packed at their start and
//    RunRecord::output_shapes says the actual shapes. Each run of one compiled program has
//    its own extent. A node inside the graph reading such a value is refused by compile()
//    (kUnsupported naming the value and the node); CPU Sessions only (kUnsupported on a
//    device).
//  - Ownership: a CompiledProgram owns its arena, kernels (via the Session's JIT, which
//    it keeps alive) and the graph (moved in, or a copy); it keeps bound handles alive.
//  - Execution: compile() also builds the hazard DAG over the launches' storage byte
//    ranges (schedule.h). run() executes it on oneTBB with the session's thread count,
//    or sequentially when the program is too small to gain (the schedule says why) or
//    CompileOptions::schedule.sequential is set. Parallel and sequential runs write the same bytes.
//    RunOptions::check_hazards runs in parallel whatever the fallback says, records
//    when every task ran and reports conflicting tasks that overlapped (RunRecord).
//  - Devices: SessionOptions::device = {cuda, i} runs programs on CUDA device i
//    (device_program.h: one device arena, NVRTC kernels of the same fusion groups, the same
//    hazard DAG on `streams` streams with events, replayed as a CUDA graph when
//    `cuda_graphs`). Session::create returns kUnavailable "no CUDA device: <why>" without
//    a driver or device. run() then also takes DeviceResident buffers (this device's:
//    used in place, no copy; an engine's own device memory through Buffer::import_device;
//    another device's buffer is kInvalidArgument naming the input or output); host
//    buffers are copied in and out by scheduled transfers.
//    Placement: in a cuda Session, CompileOptions::placement may put nodes on cpu (mixed
//    program, device_program.h): those kernels are compiled by the CPU JIT (kUnavailable
//    in a build without it), host<->device copies are inserted where values cross, and
//    the one hazard DAG orders everything; kernels fuse within each side (never across
//    the boundary), the program runs on streams
//    (no CUDA graph; before each CPU kernel the host waits only for the events of the
//    device work it depends on), handle ops may sit on either side, and it takes host
//    inputs/outputs only. A CPU Session with nodes placed on cuda is kUnsupported.
//  - Inputs whose shapes change between runs: Session::compile(GraphSource) returns a
//    DynamicProgram (dynamic_program.h), one program per input signature, each compiled
//    as above on the first run that meets it and cached; onnx::Model is such a source.
//  - Thread-safety: Session::compile may be called concurrently. One CompiledProgram
//    runs one call at a time: concurrent run() calls on the same program serialise on
//    its internal lock (the arena is shared state); different programs run concurrently,
//    except that programs sharing a handle take that handle's lock for a whole run.
//    read_handle/write_handle take the handle's lock too, so they never see half a run.
//    explain(), schedule(), names and types are const and may be called at any time.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <span>
#include <string>
#include <vector>

#include "carve/jit/jit.h"
#include "carve/runtime/compile_options.h"
#include "carve/runtime/cuda/device_program.h"
#include "carve/runtime/device.h"
#include "carve/runtime/program.h"
#include "carve/runtime/schedule.h"
#include "carve/runtime/stream_plan.h"

namespace carve::runtime {

namespace detail {
struct DeviceBackend;
class DeviceExecutor;
}  // namespace detail
class DynamicProgram;
class GraphSource;

struct SessionOptions {
  jit::JitOptions jit{};
  int threads = 0;  // worker threads for parallel runs; 0 = hardware concurrency
  Device device{};  // cpu, or {DeviceType::kCuda, ordinal}
  int streams = 4;  // device: streams the hazard DAG is spread over (1 = in order)
  bool cuda_graphs = true;  // device: capture a run once as a CUDA graph and replay it
  // device: how matmul/gemm/conv2d groups run (cublaslt.h). kAuto: one cuBLASLt GEMM (with
  // generated im2col/epilogue kernels around it) where the library loads and the group maps
  // onto one strided-batched f32 GEMM, else the generated kernel; kGenerated: always the
  // generated kernel; kCublasLt: as kAuto, but Session::create fails when cuBLASLt cannot load.
  CudaGemm cuda_gemm = CudaGemm::kAuto;
  // device: cuBLASLt may use TF32 tensor cores (inputs rounded to 10 mantissa bits: about
  // 1e-3 relative error, several times faster). Off by default: results stay f32-accurate.
  bool cuda_tf32 = false;
};

// Per-run switches (ParallelRunOptions without the thread count, which is fixed at compile).
struct RunOptions {
  bool check_hazards = false;   // run in parallel, report races in RunRecord::hazards
  bool fail_on_hazard = false;  // with check_hazards: kInternal naming the first race
  bool record_trace = false;    // per-task timings in RunRecord, for write_trace_json
  int64_t stretch_us = 0;       // hold each task this long (checker tests; 0 = off)
  // Cancellation: once `stop` is requested (std::stop_source, from any thread) or the
  // deadline passes, no further launch starts and run() returns kCancelled. A stop
  // requested (or a deadline passed) before the run starts fails it before anything
  // runs. Device programs check both only before they start.
  std::stop_token stop{};
  std::optional<std::chrono::steady_clock::time_point> deadline{};
};

class CompiledProgram {
 public:
  ~CompiledProgram();
  // Caller-provided outputs, filled in place. `record` (optional) receives what ran:
  // parallel or the fallback and why, timings when asked, hazards when checked.
  Status run(std::span<const Buffer> inputs, std::span<Buffer> outputs, const RunOptions& options = {},
             RunRecord* record = nullptr);
  // Returned outputs (Owned, CPU).
  Result<std::vector<Buffer>> run(std::span<const Buffer> inputs, const RunOptions& options = {},
                                  RunRecord* record = nullptr);

  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  std::vector<ir::TensorType> input_types() const;
  std::vector<ir::TensorType> output_types() const;

  // Bound handles, by name (kNotFound lists the bound names).
  Result<std::shared_ptr<BufferHandle>> handle(std::string_view name) const;
  Result<Buffer> read_handle(std::string_view name) const;
  Status write_handle(std::string_view name, const Buffer& value);

  const Program& program() const { return *program_; }
  // The arena view of value `value_name`: its own BufferId over the arena Storage
  // (storage_id()), at offset() for size() bytes, of the value's dtype and shape. Two
  // values alive at different times may share bytes (distinct BufferIds, one storage_id).
  // Bytes are defined only during a run. kNotFound for an unknown value or one that is
  // not in the arena (a caller input/output, constant, handle, or kept in registers).
  // A value passed between library kernels may hold its bytes in the library's blocked
  // layout (explain() names those kernels' "nChw16c" operands).
  Result<Buffer> value_view(std::string_view value_name) const;
  // Where the program runs; for a device program, its stream plan (null on the CPU).
  Device device() const;
  const StreamPlan* stream_plan() const;
  const PlanSummary& plan_summary() const { return program_->plan_summary; }
  // The hazard DAG the program runs by (statistics: schedule().stats()).
  const Schedule& schedule() const { return schedule_; }
  // Writes the Chrome/Perfetto trace of a run made with record_trace or check_hazards.
  Status write_trace(const std::string& path, const RunRecord& record) const;
  // Kernels, fused groups, the plan summary and JIT times, for `carve run --explain`.
  std::string explain() const;

 private:
  friend class Session;
  CompiledProgram(std::shared_ptr<jit::JitCompiler> jit, std::unique_ptr<Program> program, Schedule schedule);
  Status check_run_args(std::span<const Buffer> inputs, std::span<Buffer> outputs) const;
  Status check_caller_overlaps(std::span<const Buffer> inputs, std::span<Buffer> outputs) const;

  std::shared_ptr<jit::JitCompiler> jit_;  // keeps kernel code alive
  std::unique_ptr<Program> program_;
  Schedule schedule_;
  ParallelExecutor executor_;  // owns the task_arena of schedule_.threads() slots
  RegionBases bases_;          // CPU: the caller-bound memory of the current run
  LaunchOperands operands_;    // CPU: every launch's kernel pointers (executor.h)
  std::unique_ptr<detail::DeviceExecutor> device_;  // device programs only
  std::mutex run_mutex_;
};

// The device program a cuda Session's compile() builds, before its kernels are compiled
// (device_program.h: Program::on_device, CPU placement applied, transfers added, kernels
// without CPU code). With
// a CPU arena allocator it can be built and inspected on a machine without a GPU (tests,
// tools); the CUDA executor is given one over a CudaAllocator. Errors as compile().
Result<std::unique_ptr<Program>> build_device_program(ir::Graph graph, const CompileOptions& options,
                                                      std::shared_ptr<Allocator> arena_allocator);
// The hazard DAG of a device program: one task per launch (a GPU kernel is one launch).
Result<Schedule> build_device_schedule(const Program& program, const CompileOptions& options);

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const SessionOptions& options = {});
  // The program keeps the graph: pass it with std::move when the caller is done with it,
  // and its constants are moved, not copied (an lvalue is copied, constants included).
  Result<std::unique_ptr<CompiledProgram>> compile(ir::Graph graph, const CompileOptions& options = {});
  // A program over a graph family (dynamic_program.h): specialised per input signature on
  // the runs that meet it, each specialisation compiled with `options`. A null source,
  // one without outputs, or max_specialisations 0 is kInvalidArgument.
  Result<std::unique_ptr<DynamicProgram>> compile(std::shared_ptr<GraphSource> source,
                                                  const CompileOptions& options = {});
  jit::JitStats jit_stats() const { return jit_ ? jit_->stats() : jit::JitStats{}; }
  int threads() const { return threads_; }
  // Threads the CPU JIT compiles a program's kernels on (SessionOptions::jit.compile_threads,
  // 0 = hardware concurrency); 1 for a device session.
  int compile_threads() const { return jit_ ? jit_->compile_threads() : 1; }
  Device device() const;
  // Memory of the session's device: DeviceResident buffers/handles made with it are used
  // in place by run() (a cuda session's CudaAllocator; the CPU allocator otherwise).
  std::shared_ptr<Allocator> allocator() const;

 private:
  Session(std::shared_ptr<jit::JitCompiler> jit, int threads) : jit_(std::move(jit)), threads_(threads) {}
  Result<std::unique_ptr<CompiledProgram>> compile_for_device(ir::Graph graph, const CompileOptions& options);
  Result<std::shared_ptr<jit::JitCompiler>> compile_host_kernels(Program& program);
  // A Session sharing this one's JIT and device (what a DynamicProgram compiles in).
  std::unique_ptr<Session> share();
  std::shared_ptr<jit::JitCompiler> jit_;  // null for a device session
  jit::JitOptions jit_options_{};          // device session: for the CPU JIT of mixed programs
  std::mutex host_jit_mutex_;
  std::shared_ptr<jit::JitCompiler> host_jit_;  // device session: made on the first mixed compile
  int threads_;
  std::shared_ptr<detail::DeviceBackend> device_;
};

}  // namespace carve::runtime
