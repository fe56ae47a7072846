// Internal: runs a device Program (device_program.h) on a CUDA device. Used by Session /
// CompiledProgram when SessionOptions::device is cuda; no CUDA headers (jit/cuda wraps them).
//
//  - create(): compiles every kernel group with NVRTC (generate_kernel: the same groups as
//    the CPU JIT; cubin/PTX cached by the compiler), uploads constants once, allocates the
//    device staging buffers, handle mirrors, streams and one event per task that others
//    wait on (plan_streams over the hazard DAG, one task per launch).
//  - run(): binds caller buffers (DeviceResident: in place, their transfer skipped; host:
//    staged), then either
//      streams: enqueues every launch on its planned stream with event waits, or
//      graph: uploads on stream 0, the kernels/copies as ONE CUDA graph captured on the
//        first run over the same streams and events and replayed after (kernel node
//        parameters updated in place when caller device pointers change; re-captured
//        only when a captured device-to-device copy's addresses change), downloads on
//        stream 0; and synchronises.
// Mixed programs (Launch::on_host): host kernels run in task order on the calling thread
// (the stream plan's host stream) after synchronising only the events of the device tasks
// they wait for, so streams keep running other work meanwhile; device work after them is
// enqueued only after they return (so it needs no event from them). Such programs run on streams (no
// graph capture) and take host inputs/outputs only (kUnsupported for DeviceResident ones).
// GEMM groups (SessionOptions::cuda_gemm): a matmul/gemm/conv2d group that maps onto one
// strided-batched f32 GEMM runs as [im2col kernel], one cuBLASLt call and [epilogue kernel]
// on its task's stream, with a per-stream workspace (the library's scratch, the columns and
// the product); a graph whose such launch changes pointers is re-captured, not patched.
// Errors name the launch: "launch 5 'fused_add_relu': cuLaunchKernel: ...".
// Thread-safety: one run at a time (CompiledProgram's lock).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "carve/runtime/cuda/cublaslt.h"
#include "carve/runtime/cuda/cuda_allocator.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/jit/cuda/nvrtc.h"
#include "carve/runtime/cuda/device_program.h"
#include "carve/runtime/device.h"
#include "carve/runtime/schedule.h"
#include "carve/runtime/stream_plan.h"

namespace carve::runtime {
struct SessionOptions;
}

namespace carve::runtime::detail {

struct DeviceBackend {
  Device device;
  std::shared_ptr<runtime::cuda::CudaAllocator> allocator;
  std::shared_ptr<jit::cuda::NvrtcCompiler> nvrtc;
  runtime::cuda::DeviceInfo info;
  int streams = 4;
  bool graphs = true;
  std::shared_ptr<runtime::cuda::CublasLt> cublaslt;  // null: generated GEMM kernels only
  std::string cublaslt_unavailable;                   // why it is null under CudaGemm::kAuto
  bool tf32 = false;

  // kUnavailable "no CUDA device: ..." without a driver/device (or, with CudaGemm::kCublasLt,
  // "cuBLASLt not available: ..."); NVRTC errors as theirs.
  static Result<std::shared_ptr<DeviceBackend>> create(const SessionOptions& options);
};

// A matmul/gemm/conv2d group run through cuBLASLt (plan_library_gemm): im2col, the GEMM,
// the epilogue, on the launch's stream.
struct LibraryKernel {
  jit::cuda::LibraryGemm gemm;
  std::unique_ptr<runtime::cuda::LtPlan> plan;
  std::unique_ptr<runtime::cuda::CudaModule> im2col, epilogue;
};

class DeviceExecutor {
 public:
  static Result<std::unique_ptr<DeviceExecutor>> create(std::shared_ptr<DeviceBackend> backend,
                                                        const Program& program, const Schedule& schedule,
                                                        bool sequential);
  ~DeviceExecutor();
  // Argument errors, found before anything runs (nothing written yet). run() expects
  // arguments that passed it (CompiledProgram::run calls it first).
  Status check_arguments(const Program& program, std::span<const Buffer> inputs,
                         std::span<const Buffer> outputs) const;
  // After the device work: kOutOfBounds when a write_handle_at position was out of range
  // (that write skipped, the rest of the run done; cuda_codegen.h's error word).
  Status run(const Program& program, std::span<const Buffer> inputs, std::span<Buffer> outputs,
             RunRecord* record);
  const StreamPlan& stream_plan() const { return plan_; }
  const Device& backend_device() const { return backend_->device; }
  int64_t graph_captures() const { return captures_; }
  int64_t graph_param_updates() const { return param_updates_; }
  // Kernel groups that run through cuBLASLt.
  int64_t library_gemms() const;
  // "cuda: NVIDIA H100 (sm_90, ...), 4 streams (2 used), CUDA graph replay; GEMM groups:
  // 3 of 5 through cuBLASLt 13.0.2 (f32)" (or why cuBLASLt is not used).
  std::string describe() const;

 private:
  DeviceExecutor() = default;
  // On streams_[stream_index] (launch_library also uses that stream's workspace).
  Status launch_one(const Program& program, int32_t l, const RegionBases& bases, size_t stream_index) const;
  Status launch_library(const Program& program, int32_t l, const RegionBases& bases, size_t stream_index) const;
  // The library kernel for Program kernel `k`, or why there is none (generated kernel then).
  Result<std::optional<LibraryKernel>> make_library_kernel(const Program& program, size_t k);
  Status enqueue(const Program& program, const RegionBases& bases, const std::vector<uint8_t>& skip, bool capture);
  Status capture(const Program& program, const RegionBases& bases);
  Status transfers(const Program& program, const RegionBases& bases, const std::vector<uint8_t>& skip,
                   LaunchKind kind);
  Status host_position_checks(const Program& program, const Launch& launch, const RegionBases& bases) const;
  Status read_error_words(const Program& program) const;

  std::shared_ptr<DeviceBackend> backend_;
  const Schedule* schedule_ = nullptr;
  StreamPlan plan_;
  std::vector<std::unique_ptr<runtime::cuda::CudaModule>> modules_;  // per Program kernel
  std::vector<jit::cuda::LaunchConfig> configs_;
  std::vector<bool> error_word_;  // per Program kernel: its module has cuda_codegen.h's error word
  std::vector<std::optional<LibraryKernel>> library_;  // per Program kernel: run through cuBLASLt
  std::vector<Buffer> workspaces_;  // per stream when library_ has any: cuBLASLt's, then columns/product
  std::vector<std::optional<Buffer>> constants_, handle_mirrors_;
  std::vector<std::optional<Buffer>> handle_staging_;  // mixed programs: host copies of device handles
  std::vector<Buffer> input_staging_, output_staging_;
  std::optional<Buffer> host_arena_;  // mixed programs: the CPU-placed kernels' arena
  std::vector<std::unique_ptr<runtime::cuda::CudaStream>> streams_;
  std::vector<std::unique_ptr<runtime::cuda::CudaEvent>> events_;  // per task (null: never waited on)
  std::vector<std::unique_ptr<runtime::cuda::CudaEvent>> joins_;   // capture fork (0) and joins
  std::unique_ptr<runtime::cuda::CudaGraph> graph_;
  std::vector<runtime::cuda::GraphNode> nodes_;  // per launch: its captured kernel node
  std::optional<RegionBases> captured_;
  int64_t captures_ = 0, param_updates_ = 0;
};

}  // namespace carve::runtime::detail
