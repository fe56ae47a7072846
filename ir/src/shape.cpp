#include "carve/ir/shape.h"

#include <fmt/format.h>

namespace carve::ir {

bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

Status Shape::validate() const {
  if (rank() > kMaxRank) {
    return Status(ErrorCode::kShapeError,
                  fmt::format("shape {} has rank {}, more than the maximum {}", to_string(), rank(),
                              kMaxRank));
  }
  for (int i = 0; i < rank(); ++i) {
    if (dim(i) < 0) {
      return Status(ErrorCode::kShapeError,
                    fmt::format("shape {} has negative dim {} at axis {}", to_string(), dim(i), i));
    }
  }
  return num_elements().status();
}

Result<int64_t> Shape::num_elements() const {
  int64_t count = 1;
  for (int64_t d : dims_) {
    if (d < 0) {
      return Status(ErrorCode::kShapeError,
                    fmt::format("shape {} has a negative dim", to_string()));
    }
    if (!checked_mul(count, d, &count)) {
      return Status(ErrorCode::kShapeError,
                    fmt::format("element count of shape {} overflows int64", to_string()));
    }
  }
  return count;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims_, ",")); }

Result<int64_t> byte_size(DType dtype, const Shape& shape) {
  CARVE_ASSIGN_OR_RETURN(int64_t count, shape.num_elements());
  int64_t bytes = 0;
  if (!checked_mul(count, dtype_size(dtype), &bytes)) {
    return Status(ErrorCode::kShapeError,
                  fmt::format("byte size of {}{} ({} elements of {} bytes) overflows int64",
                              dtype_name(dtype), shape.to_string(), count, dtype_size(dtype)));
  }
  return bytes;
}

Status TensorType::validate() const {
  if (!is_valid_dtype(dtype)) {
    return Status(ErrorCode::kTypeMismatch,
                  fmt::format("invalid dtype value {}", static_cast<int>(dtype)));
  }
  CARVE_RETURN_IF_ERROR(shape.validate());
  return byte_size().status();
}

std::string TensorType::to_string() const {
  return fmt::format("{}{}", dtype_name(dtype), shape.to_string());
}

}  // namespace carve::ir
