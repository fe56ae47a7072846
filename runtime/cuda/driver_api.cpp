// dlopen loader for libcuda.so.1 (see driver_api.h, cuda_device.h).
#include "driver_api.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <string>
#include <vector>

namespace carve::runtime::cuda::detail {
namespace {

#define CARVE_STR_(x) #x
#define CARVE_STR(x) CARVE_STR_(x)

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}

Result<DriverApi*> load_driver() {
  static DriverApi api;
  dlerror();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return Status(ErrorCode::kUnavailable, fmt::format("no CUDA device: libcuda.so.1 not found ({})", dl_error()));
  }
  api.library = lib;
  std::vector<std::string> missing;
  // Versioned names come from cuda.h's macros (the argument is expanded before stringizing).
#define CARVE_CU_RESOLVE(fn)                                                           \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, CARVE_STR(fn)));             \
  if (api.fn == nullptr) missing.push_back(CARVE_STR(fn));
  CARVE_CU_FNS(CARVE_CU_RESOLVE)
#undef CARVE_CU_RESOLVE
  // cuEventElapsedTime_v2 only exists in 12.8+ drivers; the original has the same prototype.
  if (api.cuEventElapsedTime == nullptr) {
    api.cuEventElapsedTime = reinterpret_cast<decltype(api.cuEventElapsedTime)>(dlsym(lib, "cuEventElapsedTime"));
    if (api.cuEventElapsedTime != nullptr) std::erase(missing, std::string(CARVE_STR(cuEventElapsedTime)));
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    return Status(ErrorCode::kUnavailable,
                  fmt::format("no CUDA device: libcuda.so.1 lacks {} (driver older than this build's CUDA {}.{} headers)",
                              names, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10));
  }
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    return Status(ErrorCode::kUnavailable, fmt::format("no CUDA device: cuInit failed: {}", cu_error_text(api, r)));
  }
  int count = 0;
  r = api.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    return Status(ErrorCode::kUnavailable, fmt::format("no CUDA device: cuDeviceGetCount failed: {}", cu_error_text(api, r)));
  }
  if (count <= 0) return Status(ErrorCode::kUnavailable, "no CUDA device: the driver reports zero devices");
  return &api;
}

}  // namespace

Result<const DriverApi*> driver() {
  static const Result<DriverApi*> loaded = load_driver();  // thread-safe one-time init
  if (!loaded.ok()) return loaded.status();
  return static_cast<const DriverApi*>(*loaded);
}

std::string cu_error_text(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName != nullptr) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString != nullptr) api.cuGetErrorString(r, &text);
  return fmt::format("{} ({})", name != nullptr ? name : fmt::format("CUresult {}", static_cast<int>(r)),
                     text != nullptr ? text : "no description");
}

Status cu_status(const DriverApi& api, CUresult r, std::string_view what) {
  if (r == CUDA_SUCCESS) return Status();
  ErrorCode code = ErrorCode::kInternal;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) code = ErrorCode::kOutOfMemory;
  if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE || r == CUDA_ERROR_NOT_INITIALIZED) code = ErrorCode::kUnavailable;
  return Status(code, fmt::format("{}: {}", what, cu_error_text(api, r)));
}

}  // namespace carve::runtime::cuda::detail
