// Internal: the dlopen'ed CUDA driver entry points. CUDA headers only in runtime/cuda and jit/cuda.
#pragma once

#include <cuda.h>

#include <string>
#include <string_view>

#include "carve/status.h"

namespace carve::runtime::cuda::detail {

// Every driver entry point carve uses. Each pointer is declared with the prototype cuda.h
// gives the macro name (cuMemAlloc expands to cuMemAlloc_v2), and resolved by the same
// expanded name, so versioned symbols always match the header's mapping.
struct DriverApi {
#define CARVE_CU_FNS(X)                                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)        \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                     \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxGetCurrent)   \
  X(cuCtxSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)   \
  X(cuMemsetD8) X(cuMemGetInfo) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)       \
  X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate)   \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWaitEvent)   \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuStreamBeginCapture)           \
  X(cuStreamEndCapture) X(cuStreamGetCaptureInfo) X(cuGraphInstantiate) X(cuGraphLaunch)            \
  X(cuGraphDestroy) X(cuGraphExecDestroy) X(cuGraphKernelNodeGetParams)                             \
  X(cuGraphExecKernelNodeSetParams) X(cuModuleGetGlobal) X(cuPointerGetAttribute) X(cuMemGetAddressRange)
#define CARVE_CU_DECLARE(fn) decltype(&::fn) fn = nullptr;
  CARVE_CU_FNS(CARVE_CU_DECLARE)
#undef CARVE_CU_DECLARE
  void* library = nullptr;
};

// The loaded driver with cuInit done and >= 1 device, or kUnavailable "no CUDA device: ...".
// Loaded once per process (thread-safe); the result (and error) is cached.
Result<const DriverApi*> driver();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a CUresult.
std::string cu_error_text(const DriverApi& api, CUresult r);
// Status for a failed driver call: "<what>: <CUresult name> (<text>)"; kOutOfMemory for
// CUDA_ERROR_OUT_OF_MEMORY, kUnavailable for no-device errors, kInternal otherwise.
Status cu_status(const DriverApi& api, CUresult r, std::string_view what);

// Returns the Status of a failed driver call from the enclosing function.
#define CARVE_CU_TRY(api, call, what)                                                           \
  do {                                                                                          \
    CUresult carve_r_ = (call);                                                                 \
    if (carve_r_ != CUDA_SUCCESS) return ::carve::runtime::cuda::detail::cu_status(api, carve_r_, what); \
  } while (0)

}  // namespace carve::runtime::cuda::detail
