// Helpers shared by the reference_*.cpp files; not part of the public API.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "carve/reference/reference.h"

namespace carve::reference::ref {

// One node being interpreted: its graph, raw operands, and checked attribute access.
// Attributes have been validated by ir::infer_types before any op runs, so the getters
// only need the defaults.
struct Ctx {
  const ir::Graph& graph;
  const ir::Node& node;
  std::span<const void* const> in;
  std::span<void* const> out;
  ReferenceHandles* handles;

  const ir::TensorType& in_type(size_t i) const { return graph.value(node.inputs[i]).type; }
  const ir::TensorType& out_type(size_t i) const { return graph.value(node.outputs[i]).type; }
  // "node 'g' (gather): <message>"
  Status error(ErrorCode code, std::string_view message) const;

  int64_t attr_int(std::string_view name, int64_t fallback) const;
  double attr_float(std::string_view name, double fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback) const;
  std::string attr_string(std::string_view name) const;
};

// Element count of a validated shape.
int64_t count(const ir::Shape& shape);
// Row-major element strides.
std::vector<int64_t> row_major_strides(const ir::Shape& shape);
// Strides of `in` broadcast (numpy, right-aligned) to `out`: 0 where in has dim 1 or no dim.
std::vector<int64_t> broadcast_strides(const ir::Shape& in, const ir::Shape& out);
// Product of dims [begin, end).
int64_t dims_product(const ir::Shape& shape, int begin, int end);
// Maps a possibly negative axis to [0, rank) (validated by inference).
int normalize_axis(int64_t axis, int rank);

// Walks a shape in row-major order, keeping one element offset per operand.
class IndexWalker {
 public:
  IndexWalker(const ir::Shape& shape, std::vector<std::vector<int64_t>> strides);
  int64_t offset(size_t operand) const { return offsets_[operand]; }
  const std::vector<int64_t>& index() const { return index_; }
  void next();

 private:
  std::vector<int64_t> dims_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
};

// Whole-tensor conversions. Float dtypes widen exactly to double; ints and bool widen to
// int64 (u8 zero-extended). load_f64 also accepts ints and bool (converted to double).
std::vector<double> load_f64(ir::DType dtype, const void* data, int64_t n);
std::vector<int64_t> load_i64(ir::DType dtype, const void* data, int64_t n);
// Stores with the cast rules: to f32/f64/f16/bf16 round to nearest even; to ints
// truncate toward zero and saturate (NaN -> 0); to bool v != 0.
void store_f64(ir::DType dtype, std::span<const double> values, void* data);
// To ints: wrap (keep the low bits); to bool: v != 0; to floats: round to nearest even.
void store_i64(ir::DType dtype, std::span<const int64_t> values, void* data);
// u64 carried as uint64 (its order, division and conversion to float differ from
// int64's): load_u64 reads any integer dtype's value modulo 2^64; store_u64 converts to
// floats from the unsigned value (rounded once) and to ints as store_i64.
std::vector<uint64_t> load_u64(ir::DType dtype, const void* data, int64_t n);
void store_u64(ir::DType dtype, std::span<const uint64_t> values, void* data);
// One value with the cast rules, for attributes such as pad's value.
std::vector<uint8_t> encode_double(ir::DType dtype, double value);

// The value type an op computes in: double for floats, uint64 for u64, else int64.
template <typename V>
std::vector<V> load(ir::DType dtype, const void* data, int64_t n) {
  if constexpr (std::is_same_v<V, double>) {
    return load_f64(dtype, data, n);
  } else if constexpr (std::is_same_v<V, uint64_t>) {
    return load_u64(dtype, data, n);
  } else {
    return load_i64(dtype, data, n);
  }
}
template <typename V>
void store(ir::DType dtype, std::span<const V> values, void* data) {
  if constexpr (std::is_same_v<V, double>) {
    store_f64(dtype, values, data);
  } else if constexpr (std::is_same_v<V, uint64_t>) {
    store_u64(dtype, values, data);
  } else {
    store_i64(dtype, values, data);
  }
}
// Runs fn<double> for float dtypes, fn<uint64_t> for u64 and fn<int64_t> otherwise (the
// narrower unsigned types fit int64, whose order and division are then theirs).
#define CARVE_REF_DISPATCH(dtype, fn, ...)                                         \
  (ir::is_float(dtype)              ? fn<double>(__VA_ARGS__)                      \
   : (dtype) == ir::DType::kU64 ? fn<uint64_t>(__VA_ARGS__)                  \
                                    : fn<int64_t>(__VA_ARGS__))

// NaN test for the V of load<V> (integers are never NaN).
template <typename V>
bool is_nan_value(V v) {
  if constexpr (std::is_same_v<V, double>) return v != v;
  return false;
}

// memcpy/memmove that tolerate n == 0 with null pointers.
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n != 0) std::memmove(dst, src, n);
}

// Integer wrap-around arithmetic on int64 (computed in uint64: no UB). Results are later
// truncated to the dtype's width, which keeps them correct modulo 2^width.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t wrap_neg(int64_t a) { return static_cast<int64_t>(0 - static_cast<uint64_t>(a)); }

// Op families (dispatched from reference.cpp).
Status run_elementwise(const Ctx& ctx);  // unary, binary, comparisons, where, cast
Status run_nn(const Ctx& ctx);           // reductions .. batch_norm
Status run_layout(const Ctx& ctx);       // concat .. gather, views
Status run_index(const Ctx& ctx);        // gather_nd, scatter_nd, top_k
Status run_dynamic(const Ctx& ctx);      // non_zero, unique, non_max_suppression
Status run_state(const Ctx& ctx);        // read_handle, write_handle, write_handle_at

}  // namespace carve::reference::ref
