// Stream ordering (event waits, async copies) and CUDA graph capture/replay over the
// dlopen'ed driver (cuda_device.h: CudaStream, CudaGraph).
#include <fmt/format.h>

#include <vector>

#include "carve/runtime/cuda/cuda_device.h"
#include "driver_api.h"

namespace carve::runtime::cuda {

using detail::DriverApi;

namespace {

CUstream raw_stream(const CudaStream* s) { return s ? static_cast<CUstream>(s->raw()) : nullptr; }

Result<const DriverApi*> current_api(const std::shared_ptr<CudaContext>& ctx) {
  CARVE_RETURN_IF_ERROR(ctx->make_current());
  return detail::driver();
}

}  // namespace

Status CudaStream::wait(const CudaEvent& event) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CARVE_CU_TRY(*api, api->cuStreamWaitEvent(raw_stream(this), static_cast<CUevent>(event.raw()), 0),
               "cuStreamWaitEvent");
  return Status();
}

Status CudaStream::copy_to_device_async(DevicePtr dst, const void* src, size_t bytes) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CARVE_CU_TRY(*api, api->cuMemcpyHtoDAsync(dst, src, bytes, raw_stream(this)), "cuMemcpyHtoDAsync");
  return Status();
}

Status CudaStream::copy_from_device_async(void* dst, DevicePtr src, size_t bytes) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CARVE_CU_TRY(*api, api->cuMemcpyDtoHAsync(dst, src, bytes, raw_stream(this)), "cuMemcpyDtoHAsync");
  return Status();
}

Status CudaStream::copy_device_async(DevicePtr dst, DevicePtr src, size_t bytes) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CARVE_CU_TRY(*api, api->cuMemcpyDtoDAsync(dst, src, bytes, raw_stream(this)), "cuMemcpyDtoDAsync");
  return Status();
}

Status CudaStream::begin_capture() {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CARVE_CU_TRY(*api, api->cuStreamBeginCapture(raw_stream(this), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture");
  return Status();
}

Result<GraphNode> CudaStream::last_captured_node() {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode* deps = nullptr;
  size_t count = 0;
#if CUDA_VERSION >= 12030
  CARVE_CU_TRY(*api, api->cuStreamGetCaptureInfo(raw_stream(this), &status, nullptr, nullptr, &deps, nullptr, &count),
               "cuStreamGetCaptureInfo");
#else
  CARVE_CU_TRY(*api, api->cuStreamGetCaptureInfo(raw_stream(this), &status, nullptr, nullptr, &deps, &count),
               "cuStreamGetCaptureInfo");
#endif
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || count != 1 || deps == nullptr)
    return Status(ErrorCode::kInternal,
                  fmt::format("stream capture: expected one node at the capture frontier, found {} (status {})", count,
                              static_cast<int>(status)));
  return static_cast<GraphNode>(deps[0]);
}

Result<std::unique_ptr<CudaGraph>> CudaStream::end_capture() {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CUgraph graph = nullptr;
  CARVE_CU_TRY(*api, api->cuStreamEndCapture(raw_stream(this), &graph), "cuStreamEndCapture");
  std::unique_ptr<CudaGraph> out(new CudaGraph());
  out->ctx_ = ctx_;
  out->graph_ = graph;
  CUgraphExec exec = nullptr;
  CARVE_CU_TRY(*api, api->cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  out->exec_ = exec;
  return out;
}

CudaGraph::~CudaGraph() {
  auto api = detail::driver();
  if (!api.ok() || !ctx_ || !ctx_->make_current().ok()) return;
  if (exec_ != nullptr) (*api)->cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
  if (graph_ != nullptr) (*api)->cuGraphDestroy(static_cast<CUgraph>(graph_));
}

Status CudaGraph::launch(CudaStream* stream) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CARVE_CU_TRY(*api, api->cuGraphLaunch(static_cast<CUgraphExec>(exec_), raw_stream(stream)), "cuGraphLaunch");
  return Status();
}

Status CudaGraph::set_kernel_params(GraphNode node, std::span<const DevicePtr> params) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, current_api(ctx_));
  CUDA_KERNEL_NODE_PARAMS p{};
  CARVE_CU_TRY(*api, api->cuGraphKernelNodeGetParams(static_cast<CUgraphNode>(node), &p), "cuGraphKernelNodeGetParams");
  std::vector<CUdeviceptr> values(params.begin(), params.end());
  std::vector<void*> args(values.size());
  for (size_t i = 0; i < values.size(); ++i) args[i] = &values[i];
  p.kernelParams = args.empty() ? nullptr : args.data();
  p.extra = nullptr;
  CARVE_CU_TRY(*api, api->cuGraphExecKernelNodeSetParams(static_cast<CUgraphExec>(exec_), static_cast<CUgraphNode>(node), &p),
               "cuGraphExecKernelNodeSetParams");
  return Status();
}

}  // namespace carve::runtime::cuda
