// The CUDA driver behind a dlopen loader: devices, contexts, memory, modules, launches,
// streams and events. No CUDA headers here (handles are opaque).
//
// libcuda.so.1 is opened with dlopen on first use (thread-safe, once); no carve binary has a
// link-time dependency on libcuda. Versioned entry points are resolved under the names
// cuda.h maps them to (cuMemAlloc -> cuMemAlloc_v2, cuCtxDestroy -> ..._v2, ...).
// Without a driver or a device every entry point returns kUnavailable with a message that
// starts "no CUDA device: " and says why (library not found, cuInit's CUresult name, zero
// devices); nothing else in carve is affected. In a build without the CUDA toolkit
// (CARVE_WITH_CUDA=OFF or not found) the same functions exist and report kUnavailable.
//
// Contexts: a CudaContext retains the device's primary context (shared with any other user
// of the runtime API in the process) and makes it current on the calling thread for every
// call that needs it. Device memory is addressed by DevicePtr (a CUdeviceptr value).
// Thread-safety: all functions may be called from any thread; a CudaStream/CudaEvent is
// used by one thread at a time. Errors carry the driver's CUresult name and text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/jit/cuda/nvrtc.h"
#include "carve/status.h"

namespace carve::runtime::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int64_t total_memory = 0;
  int multiprocessors = 0;
  int driver_version = 0;  // e.g. 13000
  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  std::string to_string() const;  // "NVIDIA H100 (sm_90, 79.6 GiB, 132 SMs, driver 13.0)"
};

// OK when libcuda loads, cuInit succeeds and there is at least one device; else
// kUnavailable "no CUDA device: <reason>".
Status driver_status();
Result<int> device_count();
Result<DeviceInfo> device_info(int ordinal = 0);

class CudaContext {
 public:
  // Retains device `ordinal`'s primary context.
  static Result<std::shared_ptr<CudaContext>> create(int ordinal = 0);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  // Makes the context current on the calling thread.
  Status make_current() const;

  Result<DevicePtr> allocate(size_t bytes);  // 0 bytes -> a 1-byte block (unique address)
  Status free(DevicePtr ptr);
  // Synchronous: the bytes are in place when these return (any stream may read them).
  Status copy_to_device(DevicePtr dst, const void* src, size_t bytes);
  Status copy_from_device(void* dst, DevicePtr src, size_t bytes);
  Status memset(DevicePtr dst, uint8_t value, size_t bytes);
  // Ordered on the legacy default stream and may return early: synchronize() before
  // another stream reads `dst` (kept asynchronous so bench_cuda times the copy alone).
  Status copy_device(DevicePtr dst, DevicePtr src, size_t bytes);
  Status synchronize();
  // OK when [ptr, ptr + bytes) lies in one device allocation of this context's device;
  // kInvalidArgument saying otherwise (host or managed memory, another device, past the
  // allocation's end, not a CUDA pointer at all).
  Status check_range(DevicePtr ptr, size_t bytes) const;
  // Free and total device memory (bytes).
  Result<std::pair<int64_t, int64_t>> memory_info();

  void* raw() const { return ctx_; }  // CUcontext

 private:
  CudaContext() = default;
  DeviceInfo info_;
  int device_ = 0;
  void* ctx_ = nullptr;
};

class CudaEvent;
class CudaGraph;
using GraphNode = void*;  // CUgraphNode of a captured graph

class CudaStream {
 public:
  static Result<std::unique_ptr<CudaStream>> create(std::shared_ptr<CudaContext> context);
  ~CudaStream();
  Status synchronize();
  void* raw() const { return stream_; }  // CUstream
  // Later work on this stream waits until `event`'s latest record has completed.
  Status wait(const CudaEvent& event);
  // Asynchronous copies in stream order (host memory may be pageable: the driver then
  // stages it; the bytes are only safe to reuse/read after the stream synchronises).
  Status copy_to_device_async(DevicePtr dst, const void* src, size_t bytes);
  Status copy_from_device_async(void* dst, DevicePtr src, size_t bytes);
  Status copy_device_async(DevicePtr dst, DevicePtr src, size_t bytes);
  // Stream capture (thread-local mode): work enqueued on this stream, and on streams that
  // wait on events recorded on it, becomes a graph instead of running. end_capture()
  // instantiates it. last_captured_node(): the single node the next captured operation
  // on this stream would depend on (the node just captured); kInternal when not exactly one.
  Status begin_capture();
  Result<std::unique_ptr<CudaGraph>> end_capture();
  Result<GraphNode> last_captured_node();

 private:
  CudaStream() = default;
  std::shared_ptr<CudaContext> ctx_;
  void* stream_ = nullptr;
};

class CudaEvent {
 public:
  static Result<std::unique_ptr<CudaEvent>> create(std::shared_ptr<CudaContext> context);
  ~CudaEvent();
  Status record(CudaStream* stream);  // null: the default stream
  Status synchronize();
  void* raw() const { return event_; }  // CUevent
  // Milliseconds between two recorded events.
  static Result<float> elapsed_ms(const CudaEvent& start, const CudaEvent& end);

 private:
  CudaEvent() = default;
  std::shared_ptr<CudaContext> ctx_;
  void* event_ = nullptr;
};

// An instantiated CUDA graph (from CudaStream::end_capture). launch() replays it on a
// stream; set_kernel_params() changes one kernel node's pointer parameters in the
// instantiated graph in place (cuGraphExecKernelNodeSetParams; no re-capture).
class CudaGraph {
 public:
  ~CudaGraph();
  Status launch(CudaStream* stream);
  Status set_kernel_params(GraphNode node, std::span<const DevicePtr> params);

 private:
  friend class CudaStream;
  CudaGraph() = default;
  std::shared_ptr<CudaContext> ctx_;
  void* graph_ = nullptr;  // CUgraph
  void* exec_ = nullptr;   // CUgraphExec
};

// A loaded module (cuModuleLoadData of a cubin or PTX) and its kernel entry.
class CudaModule {
 public:
  static Result<std::unique_ptr<CudaModule>> load(std::shared_ptr<CudaContext> context, const jit::cuda::CudaBinary& binary,
                                                  std::string_view entry = jit::cuda::kKernelEntry);
  ~CudaModule();
  // Launches the entry with one device pointer per kernel parameter (the operand order).
  Status launch(const jit::cuda::LaunchConfig& config, std::span<const DevicePtr> params, CudaStream* stream = nullptr) const;
  // Copies a __device__ variable of the module out / in (synchronous: call after the work
  // that writes it is complete). kNotFound for an unknown name, kInvalidArgument when
  // `bytes` is not the variable's size.
  Status read_global(std::string_view name, std::span<std::byte> bytes) const;
  Status write_global(std::string_view name, std::span<const std::byte> bytes) const;

 private:
  CudaModule() = default;
  Result<DevicePtr> global(std::string_view name, size_t bytes) const;
  std::shared_ptr<CudaContext> ctx_;
  void* module_ = nullptr;
  void* function_ = nullptr;
};

}  // namespace carve::runtime::cuda
