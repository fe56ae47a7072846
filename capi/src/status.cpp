// carve.h: version, status objects, dtypes, tensors, cancellation.
#include <string_view>

#include "capi_internal.h"

namespace carve::capi {
namespace {
// Handed out when allocating a status fails; never freed.
carve_status g_out_of_memory{CARVE_OUT_OF_MEMORY, "out of memory (allocating the error itself failed)"};
}  // namespace

carve_status* out_of_memory_status() noexcept { return &g_out_of_memory; }

carve_status* make_status(const Status& status) noexcept {
  if (status.ok()) return nullptr;
  try {
    return new carve_status{static_cast<carve_code>(status.code()), status.message()};
  } catch (...) {
    return out_of_memory_status();
  }
}

Status null_argument(const char* fn, const char* arg) {
  return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": '" + arg + "' is NULL");
}

Result<ir::DType> to_dtype(carve_dtype dtype) {
  const auto value = static_cast<int>(dtype);
  if (value < 0 || value >= ir::kNumDTypes)
    return Status(ErrorCode::kInvalidArgument, "carve_dtype " + std::to_string(value) + " is not a dtype");
  return static_cast<ir::DType>(value);
}

carve_dtype from_dtype(ir::DType dtype) { return static_cast<carve_dtype>(static_cast<int>(dtype)); }

carve_tensor* new_tensor(runtime::Buffer buffer) {
  auto* tensor = new carve_tensor{std::move(buffer), {}};
  tensor->dims = tensor->buffer.shape().dims();
  return tensor;
}

namespace {
Result<ir::Shape> to_shape(const int64_t* dims, size_t rank, const char* fn) {
  if (rank > 0 && dims == nullptr) return null_argument(fn, "dims");
  if (rank > static_cast<size_t>(ir::kMaxRank))
    return Status(ErrorCode::kShapeError, std::string(fn) + ": rank " + std::to_string(rank) + " is over the maximum " +
                                              std::to_string(ir::kMaxRank));
  ir::Shape shape(std::vector<int64_t>(dims, dims + rank));
  CARVE_RETURN_IF_ERROR(shape.validate());
  return shape;
}
}  // namespace

}  // namespace carve::capi

using namespace carve;
using capi::guarded;
using capi::null_argument;

extern "C" {

const char* carve_version(void) { return CARVE_VERSION_STRING; }

carve_code carve_status_code(const carve_status* status) { return status ? status->code : CARVE_OK; }
const char* carve_status_message(const carve_status* status) { return status ? status->message.c_str() : ""; }
void carve_status_free(carve_status* status) {
  if (status != capi::out_of_memory_status()) delete status;
}
const char* carve_code_name(carve_code code) {
  const int value = static_cast<int>(code);
  if (value < 0 || value > static_cast<int>(ErrorCode::kInternal)) return "?";
  // error_code_name returns views of string literals: NUL-terminated, static.
  return error_code_name(static_cast<ErrorCode>(value)).data();
}

carve_status* carve_tensor_wrap(carve_dtype dtype, const int64_t* dims, size_t rank, void* data, size_t bytes,
                                int writable, carve_tensor** out) {
  static constexpr const char* fn = "carve_tensor_wrap";
  return guarded(fn, [&]() -> Status {
    if (out == nullptr) return null_argument(fn, "out");
    if (data == nullptr && bytes > 0) return null_argument(fn, "data");
    CARVE_ASSIGN_OR_RETURN(ir::DType type, capi::to_dtype(dtype));
    CARVE_ASSIGN_OR_RETURN(ir::Shape shape, capi::to_shape(dims, rank, fn));
    std::span<std::byte> memory(static_cast<std::byte*>(data), bytes);
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer buffer,
                           runtime::Buffer::borrow(memory, type, std::move(shape), writable != 0));
    *out = capi::new_tensor(std::move(buffer));
    return Status();
  });
}

carve_status* carve_tensor_create(carve_dtype dtype, const int64_t* dims, size_t rank, carve_tensor** out) {
  static constexpr const char* fn = "carve_tensor_create";
  return guarded(fn, [&]() -> Status {
    if (out == nullptr) return null_argument(fn, "out");
    CARVE_ASSIGN_OR_RETURN(ir::DType type, capi::to_dtype(dtype));
    CARVE_ASSIGN_OR_RETURN(ir::Shape shape, capi::to_shape(dims, rank, fn));
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer buffer,
                           runtime::Buffer::allocate(runtime::cpu_allocator(), type, std::move(shape)));
    CARVE_ASSIGN_OR_RETURN(std::span<std::byte> bytes, buffer.mutable_bytes());
    std::memset(bytes.data(), 0, bytes.size());
    *out = capi::new_tensor(std::move(buffer));
    return Status();
  });
}

void carve_tensor_free(carve_tensor* tensor) { delete tensor; }
carve_dtype carve_tensor_dtype(const carve_tensor* tensor) {
  return tensor ? capi::from_dtype(tensor->buffer.dtype()) : CARVE_F32;
}
size_t carve_tensor_rank(const carve_tensor* tensor) { return tensor ? tensor->dims.size() : 0; }
const int64_t* carve_tensor_dims(const carve_tensor* tensor) { return tensor ? tensor->dims.data() : nullptr; }
size_t carve_tensor_byte_size(const carve_tensor* tensor) { return tensor ? tensor->buffer.size() : 0; }
void* carve_tensor_data(const carve_tensor* tensor) {
  if (tensor == nullptr || !tensor->buffer.is_cpu_accessible()) return nullptr;
  return tensor->buffer.unsafe_data();
}

carve_status* carve_cancel_create(carve_cancel** out) {
  return guarded("carve_cancel_create", [&]() -> Status {
    if (out == nullptr) return null_argument("carve_cancel_create", "out");
    *out = new carve_cancel{};
    return Status();
  });
}
void carve_cancel_request(carve_cancel* cancel) {
  if (cancel) cancel->source.request_stop();
}
void carve_cancel_free(carve_cancel* cancel) { delete cancel; }

}  // extern "C"
