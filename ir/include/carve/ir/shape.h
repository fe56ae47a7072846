// Static tensor shapes and tensor types (dtype + shape).
//
// Ownership/lifetime: value types; Shape owns its dims.
// Thread-safety: no shared state; const methods are safe to call concurrently.
// Errors: a Shape can hold anything (so a verifier can see bad input); validate() rejects
// rank > kMaxRank and negative dims (kShapeError). Element counts and byte sizes are
// computed in int64 with overflow checks and fail with kShapeError instead of wrapping.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "carve/ir/dtype.h"
#include "carve/status.h"

namespace carve::ir {

inline constexpr int kMaxRank = 8;

class Shape {
 public:
  Shape() = default;                                            // rank 0: a scalar
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}   // NOLINT: {2,3} reads well
  Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}  // NOLINT

  int rank() const { return static_cast<int>(dims_.size()); }
  // Precondition: 0 <= i < rank().
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t operator[](int i) const { return dim(i); }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& mutable_dims() { return dims_; }

  // rank <= kMaxRank, every dim >= 0, and the element count fits in int64.
  Status validate() const;
  // Product of dims (1 for a scalar). kShapeError on overflow or a bad shape.
  Result<int64_t> num_elements() const;
  // "[2,3]", "[]" for a scalar.
  std::string to_string() const;

  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<int64_t> dims_;
};

// num_elements * dtype_size, rejected with kShapeError when it overflows int64.
Result<int64_t> byte_size(DType dtype, const Shape& shape);

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  // Valid dtype, shape.validate(), and byte size fits in int64.
  Status validate() const;
  Result<int64_t> byte_size() const { return ir::byte_size(dtype, shape); }
  // "f32[2,3]"
  std::string to_string() const;

  friend bool operator==(const TensorType&, const TensorType&) = default;
};

// Overflow-checked int64 arithmetic; false on overflow (the result is then unspecified).
bool checked_mul(int64_t a, int64_t b, int64_t* out);
bool checked_add(int64_t a, int64_t b, int64_t* out);

}  // namespace carve::ir
