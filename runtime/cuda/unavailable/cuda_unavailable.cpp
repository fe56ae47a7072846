// The CUDA driver in a build without the CUDA toolkit (CARVE_WITH_CUDA=OFF or not found):
// everything reports kUnavailable; device programs can still be built and inspected.
#include "carve/runtime/cuda/cublaslt.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/cuda/cuda_runner.h"

namespace carve::runtime::cuda {
namespace {
Status no_device() {
  return Status(ErrorCode::kUnavailable, "no CUDA device: carve was built without the CUDA backend (CARVE_WITH_CUDA off or toolkit not found)");
}
}  // namespace

std::string DeviceInfo::to_string() const { return name + " (" + arch() + ")"; }
Status driver_status() { return no_device(); }
Result<int> device_count() { return no_device(); }
Result<DeviceInfo> device_info(int) { return no_device(); }

Result<std::shared_ptr<CudaContext>> CudaContext::create(int) { return no_device(); }
CudaContext::~CudaContext() = default;
Status CudaContext::make_current() const { return no_device(); }
Result<DevicePtr> CudaContext::allocate(size_t) { return no_device(); }
Status CudaContext::free(DevicePtr) { return no_device(); }
Status CudaContext::copy_to_device(DevicePtr, const void*, size_t) { return no_device(); }
Status CudaContext::copy_from_device(void*, DevicePtr, size_t) { return no_device(); }
Status CudaContext::copy_device(DevicePtr, DevicePtr, size_t) { return no_device(); }
Status CudaContext::memset(DevicePtr, uint8_t, size_t) { return no_device(); }
Status CudaContext::synchronize() { return no_device(); }
Status CudaContext::check_range(DevicePtr, size_t) const { return no_device(); }
Result<std::pair<int64_t, int64_t>> CudaContext::memory_info() { return no_device(); }

Result<std::unique_ptr<CudaStream>> CudaStream::create(std::shared_ptr<CudaContext>) { return no_device(); }
CudaStream::~CudaStream() = default;
Status CudaStream::synchronize() { return no_device(); }
Status CudaStream::wait(const CudaEvent&) { return no_device(); }
Status CudaStream::copy_to_device_async(DevicePtr, const void*, size_t) { return no_device(); }
Status CudaStream::copy_from_device_async(void*, DevicePtr, size_t) { return no_device(); }
Status CudaStream::copy_device_async(DevicePtr, DevicePtr, size_t) { return no_device(); }
Status CudaStream::begin_capture() { return no_device(); }
Result<std::unique_ptr<CudaGraph>> CudaStream::end_capture() { return no_device(); }
Result<GraphNode> CudaStream::last_captured_node() { return no_device(); }
CudaGraph::~CudaGraph() = default;
Status CudaGraph::launch(CudaStream*) { return no_device(); }
Status CudaGraph::set_kernel_params(GraphNode, std::span<const DevicePtr>) { return no_device(); }
Result<std::unique_ptr<CudaEvent>> CudaEvent::create(std::shared_ptr<CudaContext>) { return no_device(); }
CudaEvent::~CudaEvent() = default;
Status CudaEvent::record(CudaStream*) { return no_device(); }
Status CudaEvent::synchronize() { return no_device(); }
Result<float> CudaEvent::elapsed_ms(const CudaEvent&, const CudaEvent&) { return no_device(); }
Result<std::unique_ptr<CudaModule>> CudaModule::load(std::shared_ptr<CudaContext>, const jit::cuda::CudaBinary&, std::string_view) {
  return no_device();
}
CudaModule::~CudaModule() = default;
Status CudaModule::launch(const jit::cuda::LaunchConfig&, std::span<const DevicePtr>, CudaStream*) const { return no_device(); }
Status CudaModule::read_global(std::string_view, std::span<std::byte>) const { return no_device(); }
Status CudaModule::write_global(std::string_view, std::span<const std::byte>) const { return no_device(); }
Result<DevicePtr> CudaModule::global(std::string_view, size_t) const { return no_device(); }

Result<std::vector<reference::HostTensor>> run_graph(const ir::Graph&, std::span<const reference::HostTensor>, reference::ReferenceHandles*, const RunnerOptions&) {
  return no_device();
}

}  // namespace carve::runtime::cuda

// cuBLASLt (cublaslt.h) is part of the same backend.
namespace carve::runtime::cuda {
namespace {
Status no_cublaslt() {
  return Status(ErrorCode::kUnavailable, "cuBLASLt not available: carve was built without the CUDA backend");
}
}  // namespace

struct LtPlan::Impl {};
LtPlan::~LtPlan() = default;
Status LtPlan::run(DevicePtr, DevicePtr, DevicePtr, DevicePtr, CudaStream*) const { return no_cublaslt(); }
Result<std::shared_ptr<CublasLt>> CublasLt::create(std::shared_ptr<CudaContext>) { return no_cublaslt(); }
CublasLt::~CublasLt() = default;
std::string CublasLt::version() const { return {}; }
Result<std::unique_ptr<LtPlan>> CublasLt::plan(const LtGemm&) const { return no_cublaslt(); }

}  // namespace carve::runtime::cuda
