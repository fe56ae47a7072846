// Devices, primary contexts, memory, modules, launches, streams and events over the
// dlopen'ed driver (driver_api.h).
#include "carve/runtime/cuda/cuda_device.h"

#include <fmt/format.h>

#include <vector>

#include "driver_api.h"

namespace carve::runtime::cuda {

using detail::cu_status;
using detail::DriverApi;

namespace {

Status set_current(const DriverApi& api, void* ctx) {
  CUcontext cur = nullptr;
  if (api.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == static_cast<CUcontext>(ctx)) return Status();
  CARVE_CU_TRY(api, api.cuCtxSetCurrent(static_cast<CUcontext>(ctx)), "cuCtxSetCurrent");
  return Status();
}

}  // namespace

std::string DeviceInfo::to_string() const {
  return fmt::format("{} ({}, {:.1f} GiB, {} SMs, driver {}.{})", name, arch(),
                     static_cast<double>(total_memory) / (1024.0 * 1024.0 * 1024.0), multiprocessors,
                     driver_version / 1000, driver_version % 1000 / 10);
}

Status driver_status() { return detail::driver().status(); }

Result<int> device_count() {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  int n = 0;
  CARVE_CU_TRY(*api, api->cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

Result<DeviceInfo> device_info(int ordinal) {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  int n = 0;
  CARVE_CU_TRY(*api, api->cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= n) {
    return Status(ErrorCode::kUnavailable, fmt::format("no CUDA device: ordinal {} but the driver reports {} device(s)", ordinal, n));
  }
  CUdevice dev = 0;
  CARVE_CU_TRY(*api, api->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  CARVE_CU_TRY(*api, api->cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  info.name = name;
  CARVE_CU_TRY(*api, api->cuDeviceGetAttribute(&info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  CARVE_CU_TRY(*api, api->cuDeviceGetAttribute(&info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  CARVE_CU_TRY(*api, api->cuDeviceGetAttribute(&info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "cuDeviceGetAttribute");
  size_t total = 0;
  CARVE_CU_TRY(*api, api->cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
  info.total_memory = static_cast<int64_t>(total);
  CARVE_CU_TRY(*api, api->cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion");
  return info;
}

// ---- CudaContext ----

Result<std::shared_ptr<CudaContext>> CudaContext::create(int ordinal) {
  CARVE_ASSIGN_OR_RETURN(DeviceInfo info, device_info(ordinal));
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CUdevice dev = 0;
  CARVE_CU_TRY(*api, api->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  CUcontext ctx = nullptr;
  CARVE_CU_TRY(*api, api->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  std::shared_ptr<CudaContext> c(new CudaContext());
  c->info_ = std::move(info);
  c->device_ = dev;
  c->ctx_ = ctx;
  return c;
}

CudaContext::~CudaContext() {
  auto api = detail::driver();
  if (api.ok() && ctx_ != nullptr) (*api)->cuDevicePrimaryCtxRelease(static_cast<CUdevice>(device_));
}

Status CudaContext::make_current() const {
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  return set_current(*api, ctx_);
}

#define CARVE_CTX_API()                                            \
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver()); \
  CARVE_RETURN_IF_ERROR(set_current(*api, ctx_))

Result<DevicePtr> CudaContext::allocate(size_t bytes) {
  CARVE_CTX_API();
  CUdeviceptr p = 0;
  CUresult r = api->cuMemAlloc(&p, bytes == 0 ? 1 : bytes);
  if (r != CUDA_SUCCESS) return cu_status(*api, r, fmt::format("cuMemAlloc of {} bytes", bytes));
  return static_cast<DevicePtr>(p);
}

Status CudaContext::free(DevicePtr ptr) {
  if (ptr == 0) return Status();
  CARVE_CTX_API();
  CARVE_CU_TRY(*api, api->cuMemFree(static_cast<CUdeviceptr>(ptr)), "cuMemFree");
  return Status();
}

Status CudaContext::copy_to_device(DevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status();
  CARVE_CTX_API();
  CARVE_CU_TRY(*api, api->cuMemcpyHtoD(static_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
  // From pageable memory cuMemcpyHtoD may return once the bytes are staged, before the DMA
  // lands; work on carve's non-blocking streams would not wait for it (seen on an H200: a
  // kernel read half-copied inputs). The copy is complete when this returns.
  CARVE_CU_TRY(*api, api->cuCtxSynchronize(), "cuCtxSynchronize after cuMemcpyHtoD");
  return Status();
}

Status CudaContext::copy_from_device(void* dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return Status();
  CARVE_CTX_API();
  CARVE_CU_TRY(*api, api->cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
  return Status();
}

Status CudaContext::copy_device(DevicePtr dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return Status();
  CARVE_CTX_API();
  CARVE_CU_TRY(*api, api->cuMemcpyDtoD(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoD");
  return Status();
}

Status CudaContext::memset(DevicePtr dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return Status();
  CARVE_CTX_API();
  CARVE_CU_TRY(*api, api->cuMemsetD8(static_cast<CUdeviceptr>(dst), value, bytes), "cuMemsetD8");
  CARVE_CU_TRY(*api, api->cuCtxSynchronize(), "cuCtxSynchronize after cuMemsetD8");  // as copy_to_device
  return Status();
}

Status CudaContext::check_range(DevicePtr ptr, size_t bytes) const {
  CARVE_CTX_API();
  const auto p = static_cast<CUdeviceptr>(ptr);
  unsigned int type = 0;
  CUresult r = api->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  if (r == CUDA_ERROR_INVALID_VALUE || (r == CUDA_SUCCESS && type != CU_MEMORYTYPE_DEVICE))
    return Status(ErrorCode::kInvalidArgument, "not device memory (host memory, or unknown to CUDA)");
  CARVE_CU_TRY(*api, r, "cuPointerGetAttribute(MEMORY_TYPE)");
  int ordinal = -1;
  CARVE_CU_TRY(*api, api->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p),
               "cuPointerGetAttribute(DEVICE_ORDINAL)");
  if (ordinal != info_.ordinal)
    return Status(ErrorCode::kInvalidArgument, fmt::format("memory of cuda:{}, not cuda:{}", ordinal, info_.ordinal));
  CUdeviceptr base = 0;
  size_t size = 0;
  CARVE_CU_TRY(*api, api->cuMemGetAddressRange(&base, &size, p), "cuMemGetAddressRange");
  if (p - base + bytes > size)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("{} bytes run past the end of its {}-byte allocation (at +{})", bytes, size, p - base));
  return Status();
}

Status CudaContext::synchronize() {
  CARVE_CTX_API();
  CARVE_CU_TRY(*api, api->cuCtxSynchronize(), "cuCtxSynchronize");
  return Status();
}

Result<std::pair<int64_t, int64_t>> CudaContext::memory_info() {
  CARVE_CTX_API();
  size_t free_b = 0, total_b = 0;
  CARVE_CU_TRY(*api, api->cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  return std::pair<int64_t, int64_t>{static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

// ---- streams, events ----

Result<std::unique_ptr<CudaStream>> CudaStream::create(std::shared_ptr<CudaContext> context) {
  if (!context) return Status(ErrorCode::kInvalidArgument, "CudaStream::create: null context");
  CARVE_RETURN_IF_ERROR(context->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CUstream s = nullptr;
  CARVE_CU_TRY(*api, api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  std::unique_ptr<CudaStream> out(new CudaStream());
  out->ctx_ = std::move(context);
  out->stream_ = s;
  return out;
}

CudaStream::~CudaStream() {
  auto api = detail::driver();
  if (api.ok() && stream_ != nullptr && ctx_->make_current().ok()) (*api)->cuStreamDestroy(static_cast<CUstream>(stream_));
}

Status CudaStream::synchronize() {
  CARVE_RETURN_IF_ERROR(ctx_->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CARVE_CU_TRY(*api, api->cuStreamSynchronize(static_cast<CUstream>(stream_)), "cuStreamSynchronize");
  return Status();
}

Result<std::unique_ptr<CudaEvent>> CudaEvent::create(std::shared_ptr<CudaContext> context) {
  if (!context) return Status(ErrorCode::kInvalidArgument, "CudaEvent::create: null context");
  CARVE_RETURN_IF_ERROR(context->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CUevent e = nullptr;
  CARVE_CU_TRY(*api, api->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  std::unique_ptr<CudaEvent> out(new CudaEvent());
  out->ctx_ = std::move(context);
  out->event_ = e;
  return out;
}

CudaEvent::~CudaEvent() {
  auto api = detail::driver();
  if (api.ok() && event_ != nullptr && ctx_->make_current().ok()) (*api)->cuEventDestroy(static_cast<CUevent>(event_));
}

Status CudaEvent::record(CudaStream* stream) {
  CARVE_RETURN_IF_ERROR(ctx_->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CARVE_CU_TRY(*api, api->cuEventRecord(static_cast<CUevent>(event_), stream ? static_cast<CUstream>(stream->raw()) : nullptr),
               "cuEventRecord");
  return Status();
}

Status CudaEvent::synchronize() {
  CARVE_RETURN_IF_ERROR(ctx_->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CARVE_CU_TRY(*api, api->cuEventSynchronize(static_cast<CUevent>(event_)), "cuEventSynchronize");
  return Status();
}

Result<float> CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  CARVE_RETURN_IF_ERROR(start.ctx_->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  float ms = 0;
  CARVE_CU_TRY(*api, api->cuEventElapsedTime(&ms, static_cast<CUevent>(start.event_), static_cast<CUevent>(end.event_)),
               "cuEventElapsedTime");
  return ms;
}

// ---- modules ----

Result<std::unique_ptr<CudaModule>> CudaModule::load(std::shared_ptr<CudaContext> context, const jit::cuda::CudaBinary& binary,
                                                     std::string_view entry) {
  if (!context) return Status(ErrorCode::kInvalidArgument, "CudaModule::load: null context");
  if (binary.bytes.empty()) return Status(ErrorCode::kInvalidArgument, "CudaModule::load: empty binary");
  CARVE_RETURN_IF_ERROR(context->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  std::vector<uint8_t> image = binary.bytes;
  if (binary.kind == jit::cuda::BinaryKind::kPtx && image.back() != 0) image.push_back(0);
  CUmodule mod = nullptr;
  CARVE_CU_TRY(*api, api->cuModuleLoadData(&mod, image.data()), fmt::format("cuModuleLoadData ({})", binary.target));
  CUfunction fn = nullptr;
  const std::string name(entry);
  CUresult r = api->cuModuleGetFunction(&fn, mod, name.c_str());
  if (r != CUDA_SUCCESS) {
    api->cuModuleUnload(mod);
    return cu_status(*api, r, fmt::format("cuModuleGetFunction('{}')", name));
  }
  std::unique_ptr<CudaModule> out(new CudaModule());
  out->ctx_ = std::move(context);
  out->module_ = mod;
  out->function_ = fn;
  return out;
}

CudaModule::~CudaModule() {
  auto api = detail::driver();
  if (api.ok() && module_ != nullptr && ctx_->make_current().ok()) (*api)->cuModuleUnload(static_cast<CUmodule>(module_));
}

Result<DevicePtr> CudaModule::global(std::string_view name, size_t bytes) const {
  CARVE_RETURN_IF_ERROR(ctx_->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CUdeviceptr ptr = 0;
  size_t size = 0;
  const std::string n(name);
  CUresult r = api->cuModuleGetGlobal(&ptr, &size, static_cast<CUmodule>(module_), n.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return Status(ErrorCode::kNotFound, fmt::format("module has no global '{}'", n));
  if (r != CUDA_SUCCESS) return cu_status(*api, r, fmt::format("cuModuleGetGlobal('{}')", n));
  if (size != bytes)
    return Status(ErrorCode::kInvalidArgument, fmt::format("global '{}' has {} bytes, not {}", n, size, bytes));
  return static_cast<DevicePtr>(ptr);
}

Status CudaModule::read_global(std::string_view name, std::span<std::byte> bytes) const {
  CARVE_ASSIGN_OR_RETURN(DevicePtr ptr, global(name, bytes.size()));
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CARVE_CU_TRY(*api, api->cuMemcpyDtoH(bytes.data(), static_cast<CUdeviceptr>(ptr), bytes.size()),
               fmt::format("reading global '{}'", name));
  return Status();
}

Status CudaModule::write_global(std::string_view name, std::span<const std::byte> bytes) const {
  CARVE_ASSIGN_OR_RETURN(DevicePtr ptr, global(name, bytes.size()));
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  CARVE_CU_TRY(*api, api->cuMemcpyHtoD(static_cast<CUdeviceptr>(ptr), bytes.data(), bytes.size()),
               fmt::format("writing global '{}'", name));
  return Status();
}

Status CudaModule::launch(const jit::cuda::LaunchConfig& c, std::span<const DevicePtr> params, CudaStream* stream) const {
  CARVE_RETURN_IF_ERROR(ctx_->make_current());
  CARVE_ASSIGN_OR_RETURN(const DriverApi* api, detail::driver());
  std::vector<CUdeviceptr> values(params.begin(), params.end());
  std::vector<void*> args(values.size());
  for (size_t i = 0; i < values.size(); ++i) args[i] = &values[i];
  CARVE_CU_TRY(*api,
               api->cuLaunchKernel(static_cast<CUfunction>(function_), c.grid[0], c.grid[1], c.grid[2], c.block[0],
                                   c.block[1], c.block[2], c.shared_bytes,
                                   stream ? static_cast<CUstream>(stream->raw()) : nullptr, args.empty() ? nullptr : args.data(),
                                   nullptr),
               "cuLaunchKernel");
  return Status();
}

}  // namespace carve::runtime::cuda
