// cuBLASLt behind dlopen (cublaslt.h). Row-major problems are handed to the column-major
// library transposed: D^T = op(B)^T * op(A)^T, so B's storage is the library's first operand.
#include "carve/runtime/cuda/cublaslt.h"

#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace carve::runtime::cuda {

namespace {

#define CARVE_STR_(x) #x
#define CARVE_STR(x) CARVE_STR_(x)

#define CARVE_LT_FNS(X)                                                                                    \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusName)                      \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)              \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)        \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                                    \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct LtApi {
#define CARVE_LT_DECLARE(fn) decltype(&::fn) fn = nullptr;
  CARVE_LT_FNS(CARVE_LT_DECLARE)
#undef CARVE_LT_DECLARE
};

Status unavailable(std::string_view why) {
  return Status(ErrorCode::kUnavailable, fmt::format("cuBLASLt not available: {}", why));
}

Result<const LtApi*> load() {
  static std::once_flag once;
  static LtApi api;
  static Status error;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("CARVE_CUBLASLT_LIBRARY"); p != nullptr && *p != 0) {
      candidates.emplace_back(p);
    } else {
      candidates.push_back(fmt::format("libcublasLt.so.{}", CUDA_VERSION / 1000));
#ifdef CARVE_CUDA_LIBRARY_DIR
      candidates.push_back(fmt::format("{}/libcublasLt.so.{}", CARVE_CUDA_LIBRARY_DIR, CUDA_VERSION / 1000));
#endif
      candidates.push_back(fmt::format("/usr/local/cuda/lib64/libcublasLt.so.{}", CUDA_VERSION / 1000));
    }
    std::string tried;
    void* lib = nullptr;
    for (const auto& c : candidates) {
      dlerror();
      lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      const char* e = dlerror();
      tried += fmt::format("{}{}", tried.empty() ? "" : "; ", e != nullptr ? e : c.c_str());
    }
    if (lib == nullptr) {
      error = unavailable(tried);
      return;
    }
    std::string missing;
#define CARVE_LT_RESOLVE(fn)                                                   \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, CARVE_STR(fn)));     \
  if (api.fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + CARVE_STR(fn);
    CARVE_LT_FNS(CARVE_LT_RESOLVE)
#undef CARVE_LT_RESOLVE
    if (!missing.empty()) error = unavailable(fmt::format("the library lacks {}", missing));
  });
  if (!error.ok()) return error;
  return &api;
}

Status lt_status(const LtApi& api, cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status();
  const ErrorCode code = s == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kOutOfMemory : ErrorCode::kInternal;
  return Status(code, fmt::format("{}: {}", what, api.cublasLtGetStatusName(s)));
}

#define CARVE_LT_TRY(api, call, what)                                      \
  do {                                                                     \
    cublasStatus_t carve_s_ = (call);                                      \
    if (carve_s_ != CUBLAS_STATUS_SUCCESS) return lt_status(api, carve_s_, what); \
  } while (0)

}  // namespace

struct LtPlan::Impl {
  const LtApi* api = nullptr;
  std::shared_ptr<CudaContext> ctx;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;  // library order: B, A, D
  cublasLtMatmulAlgo_t aligned{}, any{};
  bool has_aligned = false;

  ~Impl() {
    if (api == nullptr) return;
    if (desc != nullptr) api->cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {first, second, out})
      if (l != nullptr) api->cublasLtMatrixLayoutDestroy(l);
  }

  Status layout(cublasLtMatrixLayout_t* l, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch, int64_t stride) {
    CARVE_LT_TRY(*api, api->cublasLtMatrixLayoutCreate(l, CUDA_R_32F, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (batch == 1) return Status();
    CARVE_LT_TRY(*api, api->cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
                 "batch count");
    CARVE_LT_TRY(*api,
                 api->cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
                 "batch stride");
    return Status();
  }

  // The best algorithm for pointers aligned to `alignment` bytes; false when there is none.
  Result<bool> choose(uint32_t alignment, cublasLtMatmulAlgo_t* algo) {
    cublasLtMatmulPreference_t pref = nullptr;
    CARVE_LT_TRY(*api, api->cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t workspace = CublasLt::kWorkspaceBytes;
    cublasStatus_t s = api->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                  &workspace, sizeof(workspace));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (s == CUBLAS_STATUS_SUCCESS) s = api->cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = api->cublasLtMatmulAlgoGetHeuristic(handle, desc, first, second, out, out, pref, 1, &result, &found);
    api->cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
    CARVE_LT_TRY(*api, s, "cublasLtMatmulAlgoGetHeuristic");
    *algo = result.algo;
    return true;
  }
};

LtPlan::~LtPlan() = default;

Status LtPlan::run(DevicePtr a, DevicePtr b, DevicePtr d, DevicePtr workspace, CudaStream* stream) const {
  const Impl& p = *impl_;
  CARVE_RETURN_IF_ERROR(p.ctx->make_current());
  const bool aligned = p.has_aligned && ((a | b | d) % 16) == 0;
  const float one = 1.0f, zero = 0.0f;
  auto ptr = [](DevicePtr v) { return reinterpret_cast<void*>(static_cast<uintptr_t>(v)); };
  CARVE_LT_TRY(*p.api,
               p.api->cublasLtMatmul(p.handle, p.desc, &one, ptr(b), p.first, ptr(a), p.second, &zero, ptr(d), p.out,
                                     ptr(d), p.out, aligned ? &p.aligned : &p.any, ptr(workspace),
                                     CublasLt::kWorkspaceBytes, static_cast<cudaStream_t>(stream->raw())),
               "cublasLtMatmul");
  return Status();
}

Result<std::shared_ptr<CublasLt>> CublasLt::create(std::shared_ptr<CudaContext> context) {
  CARVE_ASSIGN_OR_RETURN(const LtApi* api, load());
  CARVE_RETURN_IF_ERROR(context->make_current());
  std::shared_ptr<CublasLt> lt(new CublasLt());
  lt->ctx_ = std::move(context);
  cublasLtHandle_t handle = nullptr;
  const cublasStatus_t s = api->cublasLtCreate(&handle);
  if (s != CUBLAS_STATUS_SUCCESS) return unavailable(fmt::format("cublasLtCreate: {}", api->cublasLtGetStatusName(s)));
  lt->handle_ = handle;
  lt->version_ = api->cublasLtGetVersion();
  return lt;
}

CublasLt::~CublasLt() {
  auto api = load();
  if (handle_ != nullptr && api.ok() && ctx_->make_current().ok())
    (*api)->cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

std::string CublasLt::version() const {
  return fmt::format("cuBLASLt {}.{}.{}", version_ / 10000, (version_ / 100) % 100, version_ % 100);
}

Result<std::unique_ptr<LtPlan>> CublasLt::plan(const LtGemm& g) const {
  if (g.batch < 1 || g.m < 1 || g.n < 1 || g.k < 1 || g.batch > INT32_MAX)
    return Status(ErrorCode::kInvalidArgument, fmt::format("cuBLASLt gemm: sizes {}x{}x{} batch {}", g.m, g.n, g.k, g.batch));
  if (g.lda < (g.trans_a ? g.m : g.k) || g.ldb < (g.trans_b ? g.k : g.n) || g.ldd < g.n)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("cuBLASLt gemm: leading dimensions {}, {}, {} too small", g.lda, g.ldb, g.ldd));
  CARVE_ASSIGN_OR_RETURN(const LtApi* api, load());
  CARVE_RETURN_IF_ERROR(ctx_->make_current());
  std::unique_ptr<LtPlan> plan(new LtPlan());
  plan->impl_ = std::make_unique<LtPlan::Impl>();
  LtPlan::Impl& p = *plan->impl_;
  p.api = api;
  p.ctx = ctx_;
  p.handle = static_cast<cublasLtHandle_t>(handle_);
  CARVE_LT_TRY(*api,
               api->cublasLtMatmulDescCreate(&p.desc, g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate");
  // Library operand 1 is B's storage: [n x k] column-major when B is [k x n] row-major.
  const int32_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CARVE_LT_TRY(*api, api->cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)),
               "transa");
  CARVE_LT_TRY(*api, api->cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)),
               "transb");
  const auto batch = static_cast<int32_t>(g.batch);
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  CARVE_RETURN_IF_ERROR(p.layout(&p.first, u(g.trans_b ? g.k : g.n), u(g.trans_b ? g.n : g.k), g.ldb, batch, g.stride_b));
  CARVE_RETURN_IF_ERROR(p.layout(&p.second, u(g.trans_a ? g.m : g.k), u(g.trans_a ? g.k : g.m), g.lda, batch, g.stride_a));
  CARVE_RETURN_IF_ERROR(p.layout(&p.out, u(g.n), u(g.m), g.ldd, batch, g.stride_d));
  // 16-byte alignment is only possible when every row and matrix starts on a 4-float boundary.
  bool four = true;
  for (int64_t v : {g.lda, g.ldb, g.ldd, g.stride_a, g.stride_b, g.stride_d}) four = four && v % 4 == 0;
  if (four) {
    CARVE_ASSIGN_OR_RETURN(p.has_aligned, p.choose(16, &p.aligned));
  }
  CARVE_ASSIGN_OR_RETURN(bool any, p.choose(4, &p.any));
  if (!any)
    return Status(ErrorCode::kUnsupported, fmt::format("cuBLASLt has no algorithm for {}x{}x{} batch {}", g.m, g.n, g.k, g.batch));
  return plan;
}

}  // namespace carve::runtime::cuda
