// Internal: the dlopen'ed NVRTC entry points. CUDA headers only in jit/cuda and runtime/cuda.
#pragma once

#include <cuda.h>  // CUDA_VERSION: libnvrtc.so.<major> is named by the toolkit major
#include <nvrtc.h>

#include <string>

#include "carve/status.h"

namespace carve::jit::cuda::detail {

struct NvrtcApi {
#define CARVE_NVRTC_FNS(X)                                                                          \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)    \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)    \
  X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)
#define CARVE_NVRTC_DECLARE(fn) decltype(&::fn) fn = nullptr;
  CARVE_NVRTC_FNS(CARVE_NVRTC_DECLARE)
#undef CARVE_NVRTC_DECLARE
  void* library = nullptr;
  void* builtins = nullptr;
  std::string library_dir;
  int major = 0, minor = 0;
};

// The loaded NVRTC, or kUnavailable "NVRTC not available: ...". Loaded once per process.
Result<const NvrtcApi*> nvrtc();

}  // namespace carve::jit::cuda::detail
