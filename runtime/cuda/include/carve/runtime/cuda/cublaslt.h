// cuBLASLt (the CUDA Toolkit's GEMM library) behind a dlopen loader, for the GEMMs of
// matmul/gemm/conv2d groups (jit/cuda's plan_library_gemm). No CUDA headers here.
//
// libcublasLt.so.<toolkit major> is opened on first use (thread-safe, once; the variable
// CARVE_CUBLASLT_LIBRARY names another file); no carve binary links it. Without it, or
// in a build without the CUDA toolkit, create() reports kUnavailable saying why and the
// device path keeps its generated GEMM kernels.
//
// Numerics: f32 inputs and outputs, f32 accumulation (CUBLAS_COMPUTE_32F: no TF32), unless
// LtGemm::tf32 asks for TF32 tensor-core products (inputs rounded to 10-bit mantissas,
// about 1e-3 relative error; much faster). The library may split K (its summation order
// is its own): results agree with the reference within a tolerance, not bit for bit, and
// do not depend on carve's stream count.
// Thread-safety: a CublasLt may be shared; an LtPlan runs on one stream at a time (the
// workspace passed to run() must not be in use by another stream).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "carve/runtime/cuda/cuda_device.h"
#include "carve/status.h"

namespace carve::runtime::cuda {

// One row-major strided-batched GEMM: D[z] = op(A[z]) * op(B[z]) for z < batch, D [m x n].
// Leading dimensions and batch strides in elements (a stride of 0 reuses one matrix).
struct LtGemm {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;  // A stored [k x m], B stored [n x k]
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  bool tf32 = false;
};

// A GEMM with its algorithms chosen (cublasLtMatmulAlgoGetHeuristic), one for 16-byte
// aligned pointers and one for any (4-byte) alignment; run() picks by the pointers.
class LtPlan {
 public:
  ~LtPlan();
  // Enqueues the GEMM on `stream` (also while it is being captured into a CUDA graph).
  // `workspace` holds CublasLt::kWorkspaceBytes.
  Status run(DevicePtr a, DevicePtr b, DevicePtr d, DevicePtr workspace, CudaStream* stream) const;
  struct Impl;

 private:
  friend class CublasLt;
  LtPlan() = default;
  std::unique_ptr<Impl> impl_;
};

class CublasLt {
 public:
  // The library's own scratch per concurrently running GEMM (one per stream).
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

  // kUnavailable "cuBLASLt not available: <why>".
  static Result<std::shared_ptr<CublasLt>> create(std::shared_ptr<CudaContext> context);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  std::string version() const;  // "cuBLASLt 13.0.2"
  // kUnsupported when the library offers no algorithm for the shape; kInvalidArgument for
  // a malformed LtGemm (non-positive sizes, leading dimensions too small).
  Result<std::unique_ptr<LtPlan>> plan(const LtGemm& gemm) const;

 private:
  CublasLt() = default;
  std::shared_ptr<CudaContext> ctx_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  size_t version_ = 0;
};

}  // namespace carve::runtime::cuda
