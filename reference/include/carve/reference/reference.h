// The reference interpreter: every op as plain, obviously-correct C++ loops.
//
// Purpose: the test oracle for the JIT (and anything else that computes carve ops). It is
// NOT a production fallback: it favours clarity over speed, allocates freely, converts
// whole tensors to double/int64 and back, and keeps every value of a graph alive.
// It builds without LLVM.
//
// Ownership/lifetime: HostTensor owns its bytes. reference_node reads and writes caller
// memory only for the duration of the call; run_reference copies everything it needs.
// Thread-safety: no shared state; concurrent calls on distinct outputs/handles are safe.
// Errors (Status/Result, never exceptions); node errors start with describe_node():
//   kInvalidArgument  wrong pointer/input counts, an input HostTensor whose type or byte
//                     count does not match the graph, a constant without data, a handle
//                     whose stored type differs from its declaration;
//   kVerifyError etc. whatever ir::verify / ir::infer_types report for a broken graph or
//                     node (a node whose stored output types disagree with inference);
//   kOutOfBounds      a gather index outside [-n, n), a write_handle_at position with
//                     pos < 0 or pos + value extent > handle extent (handle unchanged);
//   kNotFound         reference_node on a state op whose handle has no entry.
//
// Semantics (the contract the JIT is tested against):
//  - Layout: dense, row-major (C order), little-endian elements, bool = 1 byte 0/1.
//  - Float dtypes (f32, f64, f16, bf16) are widened exactly to double, computed in
//    double and rounded once to the output dtype, to nearest even (f16/bf16 via half.h).
//    For + - * / sqrt this equals computing in f32 (or in float for f16/bf16) and
//    rounding; for transcendental functions it is at least as accurate. Sums (reductions,
//    matmul, gemm, conv, pooling, softmax, norms) accumulate in double, in index order.
//  - Integer dtypes (i8, i16, i32, i64, u8, u16, u32, u64) use two's-complement
//    wrap-around for neg, abs, add, sub, mul, pow and every accumulation (computed in
//    uint64 and truncated, so there is no UB). Integer div truncates toward zero;
//    x / 0 = 0; INT_MIN / -1 wraps to INT_MIN. Integer fmod is the remainder of that
//    division (sign of x); x fmod 0 = 0.
//    Integer pow with a negative exponent is the truncated real result: 1 for base 1,
//    +-1 for base -1, else 0 (0 for base 0 too). Integer gemm with alpha == beta == 1
//    wraps exactly; any other alpha/beta evaluates alpha*acc + beta*c in double and
//    converts back with the cast rules below.
//  - Unsigned dtypes order, divide, take remainders, clip and convert to floats as
//    unsigned numbers (u64 is computed in uint64; the narrower ones fit int64); abs and
//    relu are identities on them. bit_shift_left/right (unsigned only) give 0 for a shift
//    by the bit width or more. reduce_prod multiplies (integers wrap; the empty product
//    is 1).
//  - max/min and reduce_max/max_pool propagate NaN. reduce_max over an empty axis gives
//    -inf (floats) or the dtype's minimum (ints); reduce_mean over an empty axis is NaN.
//  - gelu = 0.5*x*(1+erf(x/sqrt2)) (exact erf form); silu = x*sigmoid(x);
//    sigmoid = 1/(1+exp(-x)); hard_sigmoid = max(0, min(1, alpha*x + beta));
//    rsqrt = 1/sqrt(x); relu(x) = x < 0 ? 0 : x (NaN stays NaN); clip keeps NaN and, on
//    integers, clamps to [ceil(min), floor(max)] saturated to the dtype. round is half to
//    even (nearbyint); floor/ceil/round/trunc are identities on integers. fmod on floats
//    is C fmod (exact). Trigonometric/hyperbolic ops are libm's, in double.
//  - Comparisons give bool; NaN compares unequal to everything (IEEE).
//  - cast: float -> int truncates toward zero and saturates to the int range, NaN -> 0;
//    int -> int wraps (keeps the low bits); anything -> bool is x != 0 (NaN -> true);
//    bool -> anything is 0/1; -> f16/bf16 rounds to nearest even directly from the
//    source value (int or double), so there is no double rounding.
//  - softmax subtracts the max along the axis; layer_norm normalises over x.shape[axis:]
//    with the biased variance; batch_norm is the inference form per channel (dim 1).
//  - avg_pool divides by the number of input elements in the window
//    (count_include_pad = 0) or by the window clipped to the padded extent
//    (count_include_pad = 1; with ceil_mode a window can reach past the end padding and
//    that part is not counted). max_pool ignores padding.
//  - pad's `value` is converted to the dtype with the cast rules.
//  - Views (reshape, flatten, squeeze, unsqueeze, identity) copy the bytes.
//  - non_zero, unique and non_max_suppression (ir/extent.h): outputs of their planned
//    (upper-bound) type, the result packed at the actual extent from the first byte, zeros
//    after it, the extent in the last output. unique orders NaN after every number and
//    equal to NaN; non_max_suppression computes IoU in f32 as ONNX Runtime does and never
//    selects a NaN score.
//  - Memory: reference_node's outputs must not overlap its inputs, except that a view may
//    be given the same address for input and output.
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "carve/ir/graph.h"
#include "carve/status.h"

namespace carve::reference {

// The carve dtype a host C++ type stands for (f16/bf16 have none: use from_doubles).
template <typename T>
inline constexpr bool kIsReferenceHostType =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint8_t> ||
    std::is_same_v<T, bool> || std::is_same_v<T, int16_t> || std::is_same_v<T, uint16_t> ||
    std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>;

template <typename T>
constexpr ir::DType host_dtype() {
  static_assert(kIsReferenceHostType<T>, "no carve dtype for this C++ type");
  if constexpr (std::is_same_v<T, float>) return ir::DType::kF32;
  if constexpr (std::is_same_v<T, double>) return ir::DType::kF64;
  if constexpr (std::is_same_v<T, int8_t>) return ir::DType::kI8;
  if constexpr (std::is_same_v<T, int32_t>) return ir::DType::kI32;
  if constexpr (std::is_same_v<T, int64_t>) return ir::DType::kI64;
  if constexpr (std::is_same_v<T, uint8_t>) return ir::DType::kU8;
  if constexpr (std::is_same_v<T, bool>) return ir::DType::kBool;
  if constexpr (std::is_same_v<T, int16_t>) return ir::DType::kI16;
  if constexpr (std::is_same_v<T, uint16_t>) return ir::DType::kU16;
  if constexpr (std::is_same_v<T, uint32_t>) return ir::DType::kU32;
  if constexpr (std::is_same_v<T, uint64_t>) return ir::DType::kU64;
  return ir::DType::kF32;
}

// A dense row-major tensor in host memory: type.byte_size() bytes, little-endian.
struct HostTensor {
  ir::TensorType type;
  std::vector<uint8_t> bytes;

  // Number of elements (0 for a shape that fails validation).
  int64_t num_elements() const;

  // A tensor of `values` (row-major); T picks the dtype (float -> f32, bool -> bool, ...).
  // Precondition: values.size() == the shape's element count (asserted).
  template <typename T>
  static HostTensor from(ir::Shape shape, const std::vector<T>& values) {
    HostTensor t;
    t.type = ir::TensorType{host_dtype<T>(), std::move(shape)};
    assert(static_cast<int64_t>(values.size()) == t.num_elements());
    t.bytes.resize(values.size() * sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) t.bytes[i] = values[i] ? 1 : 0;
    } else if (!values.empty()) {
      std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    }
    return t;
  }
  // A scalar (rank 0).
  template <typename T>
  static HostTensor scalar(T value) {
    return from<T>(ir::Shape{}, std::vector<T>{value});
  }
  // Any dtype from doubles, converted with the cast rules (f16/bf16 round to nearest
  // even, ints truncate and saturate, bool is v != 0). Precondition: the counts match.
  static HostTensor from_doubles(ir::DType dtype, ir::Shape shape,
                                 const std::vector<double>& values);
  // All-zero bytes; kShapeError for a bad type.
  static Result<HostTensor> zeros(ir::TensorType type);

  // The elements as T. Precondition: host_dtype<T>() == type.dtype (asserted; an empty
  // vector otherwise).
  template <typename T>
  std::vector<T> as() const {
    if (host_dtype<T>() != type.dtype) {
      assert(false && "HostTensor::as<T>: T does not match the dtype");
      return {};
    }
    std::vector<T> out(bytes.size() / sizeof(T));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != 0;
    } else if (!out.empty()) {
      std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    }
    return out;
  }
  // Any dtype widened to double (exact for every dtype but i64 beyond 2^53).
  std::vector<double> to_doubles() const;

  friend bool operator==(const HostTensor&, const HostTensor&) = default;
};

// Handle state for the state ops, by handle name.
using ReferenceHandles = std::map<std::string, HostTensor>;

// Runs one node on raw memory. inputs[i] / outputs[i] point at dense row-major data of the
// types of node.inputs[i] / node.outputs[i] in `graph` (null is fine for 0-byte tensors).
// The node is re-checked with ir::infer_types against the graph's stored output types.
// State ops read/write (*handles)[name], which must exist with the handle's declared
// type; `handles` may be null for other ops. On error nothing is written to handles.
Status reference_node(const ir::Graph& graph, const ir::Node& node,
                      std::span<const void* const> inputs, std::span<void* const> outputs,
                      ReferenceHandles* handles);

// Runs a whole graph in ir::execution_order after ir::verify. `inputs` are the graph's
// input values in id order (each must match the value's type and byte size); constants
// come from Value::data (a constant the run reads without data is kInvalidArgument naming
// it). `handles` (optional) are read and written by name: a graph handle with no entry
// starts as zeros and is added; an entry whose type differs from the declaration is
// kInvalidArgument; entries the graph does not declare are left alone. On error *handles
// is unchanged. Returns the graph outputs, in Graph::outputs order.
Result<std::vector<HostTensor>> run_reference(const ir::Graph& graph,
                                              std::span<const HostTensor> inputs,
                                              ReferenceHandles* handles = nullptr);
// The same for a braced list: run_reference(graph, {x, w}).
inline Result<std::vector<HostTensor>> run_reference(const ir::Graph& graph,
                                                     std::initializer_list<HostTensor> inputs,
                                                     ReferenceHandles* handles = nullptr) {
  return run_reference(graph, std::span<const HostTensor>(inputs.begin(), inputs.size()), handles);
}
// The same with inputs by value name; a missing or unknown name is kInvalidArgument.
Result<std::vector<HostTensor>> run_reference(const ir::Graph& graph,
                                              const std::map<std::string, HostTensor>& inputs,
                                              ReferenceHandles* handles = nullptr);

}  // namespace carve::reference
