// The op set and its registry: name <-> enum, arity, attribute names and traits.
//
// Ownership/lifetime: the registry is a static table; returned spans and string_views
// point into it and live for the whole program.
// Thread-safety: read-only after static initialisation; safe from any thread.
// Errors: op_from_name returns kNotFound for an unknown name. An OpKind cast from an
// out-of-range integer is "unknown": is_valid_op() is false and op_name() gives "?".
//
// Downstream code (planner, runtime, jit) keys its rules off these traits, e.g. the
// planner lets an elementwise op write into its input's buffer and folds views into
// their source's buffer; sinks (is_sink) have effects and are never dead code.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "carve/status.h"

namespace carve::ir {

// Text names are the enumerator names in snake case (kReduceSum is "reduce_sum").
enum class OpKind : uint16_t {
  // unary elementwise
  kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kRelu, kGelu, kErf, kSilu,
  kHardSigmoid,  // attrs alpha (float, 0.2), beta (float, 0.5)
  kClip,          // attrs min (float, -inf), max (float, +inf); min <= max
  // rounding (identities on integers): round is half to even
  kFloor, kCeil, kRound, kTrunc,
  // trigonometric and hyperbolic (floats only)
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  // binary elementwise, numpy broadcasting, both operands the same dtype
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,
  kFmod,  // remainder of truncated division, the sign of x (C fmod); integers: x fmod 0 = 0
  // bit shifts of unsigned integers (ONNX BitShift): x << y, x >> y (logical); a shift by
  // the bit width or more gives 0
  kBitShiftLeft, kBitShiftRight,
  // comparisons: like binary, output bool
  kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual,
  kWhere,  // (cond: bool, x, y), all three broadcast
  kCast,   // attr to (string dtype name)
  // reductions: attrs axes (int list; absent or empty = all axes), keepdims (int 0/1, 1)
  kReduceSum, kReduceMean, kReduceMax,
  kReduceProd,  // the product; wraps on integers, as reduce_sum does
  // index of the max/min along one axis, output i64; attrs axis (0), keepdims (1),
  // select_last_index (0: the first of equal values wins). NaN counts as the largest and
  // the smallest value (numpy/ONNX reference): the first NaN wins (the last with select_last).
  kArgMax, kArgMin,
  kSoftmax,     // attr axis (int, -1)
  kLayerNorm,  // (x, scale[, bias]) over x.shape[axis:]; attrs axis (-1), epsilon (1e-5)
  kMatmul,      // numpy matmul: batched, batch dims broadcast, 1-D promotion rules
  kGemm,        // (a, b[, c]) 2-D; attrs trans_a, trans_b (0), alpha, beta (1.0)
  kConv2d,      // (x NCHW, w OIHW[, bias O]); attrs groups (1), strides [2] (1,1),
               // pads [top,left,bottom,right] (0), dilations [2] (1,1)
  kMaxPool,    // NCHW; attrs kernel [2] (required), strides [2] (1,1), pads [4] (0), ceil_mode (0)
  kAvgPool,    // as max_pool plus count_include_pad (0)
  kGlobalAvgPool,  // [N,C,spatial...] -> [N,C,1...]
  kBatchNorm,  // inference form (x, scale, bias, mean, var), per channel dim 1; attr epsilon
  kConcat,      // attr axis (required)
  kSplit,       // attrs axis (0), sizes (required): one output per size
  kSlice,       // attrs starts, ends (required), axes (default 0..n-1), steps (default 1)
  kTranspose,   // attr perm (default: reversed axes)
  kPad,         // attrs pads [begin..., end...] (>= 0, required), value (float, 0)
  kGather,      // (data, indices: i32/i64); attr axis (0)
  kGatherElements,  // (data, indices: i32/i64, same rank as data); attr axis (0); output
                    // = indices' shape, out[i] = data[i with i[axis] = indices[i]]
  // indexing ops (ONNX GatherND, ScatterND/ScatterElements, TopK). Index values are data:
  // negative ones count from the end; out of range the reference reports kOutOfBounds and
  // the kernels read zeros (gather_nd) or skip the update (scatter_nd); a CPU Session
  // checks them before the launch and fails the run (runtime IndexCheck, as for gather).
  kGatherNd,   // (data, indices: i32/i64 [..., k]); attr batch_dims (0); output indices.shape[:-1]
               // + data.shape[batch_dims + k:]
  kScatterNd,  // (data, indices [..., k], updates = indices.shape[:-1] + data.shape[k:]);
               // attr reduction ("none", "add", "mul", "max", "min"); output = data with the
               // updates applied in row-major order of indices (so duplicates are deterministic)
  kTopK,       // attrs axis (-1), k (required, 0..dim), largest (1); outputs values and i64
               // indices, sorted (ties: lower index first; NaN after every number)
  // Data-dependent extents (ir/extent.h): one output dim is planned at its static upper
  // bound; the op writes the result packed at its actual extent from the first byte (the
  // rest zero) and that extent to its last output, an i64 scalar.
  kNonZero,   // (x) -> (i64 [rank, numel]: coordinates of the nonzero elements in row-major
              // order, extent); a rank-0 x counts as [1]
  kUnique,    // (x) -> (y, i64 indices [n], i64 inverse_indices [len], i64 counts [n], extent);
              // attrs sorted (1), axis (absent: x flattened). Slices along axis (elements
              // without it) compare lexicographically, NaN equal to NaN and after every
              // number; y/indices/counts are bounded by the axis length (n); sorted 0 keeps
              // first-occurrence order
  kNonMaxSuppression,  // (boxes f32 [B,N,4], scores f32 [B,C,N], max_per_class i64 [] or [1],
              // iou_threshold f32 [] or [1][, score_threshold f32 [] or [1]]) -> (i64 [B*C*N, 3]
              // rows (batch, class, box), extent); attr center_point_box (0). Per batch and
              // class: boxes with score > score_threshold in score order (ties: lower index
              // first) greedily kept unless their IoU with a kept box is > iou_threshold, at
              // most max_per_class (<= 0: none); computed in f32 as ONNX Runtime does
  // views: the output aliases the input's memory
  kReshape,    // attr shape: -1 = inferred (at most one), 0 = copy the input dim
  kFlatten,    // attr axis (1), in [-rank, rank]
  kSqueeze,    // attr axes (absent or empty: every dim of size 1)
  kUnsqueeze,  // attr axes (required; positions in the output)
  kIdentity,
  // state ops on graph handles (see Graph::handles)
  kReadHandle,      // attr handle; no inputs; output = the handle's type
  kWriteHandle,     // attr handle; input written whole; no outputs (a sink)
  kWriteHandleAt,  // attrs handle, axis; (value, pos: i64 scalar); writes at pos along axis
};

inline constexpr int kNumOps = static_cast<int>(OpKind::kWriteHandleAt) + 1;
// max_inputs / max_outputs of a variadic op.
inline constexpr int kVariadic = std::numeric_limits<int>::max();

struct OpTraits {
  OpKind kind;
  std::string_view name;
  int min_inputs;
  int max_inputs;   // kVariadic for concat
  int min_outputs;
  int max_outputs;  // kVariadic for split
  bool view;         // output aliases input 0 (no new memory)
  bool elementwise;  // unary, binary, comparison, where, cast (out[i] depends on in[i] only;
                     // in-place reuse still needs equal byte sizes: broadcasting and
                     // cast/comparisons can change them)
  bool state;        // reads or writes a handle
  bool sink;         // has an effect and no data outputs; must not be removed
  std::span<const std::string_view> attrs;  // every attribute the op accepts
};

bool is_valid_op(OpKind op);
// Precondition: is_valid_op(op).
const OpTraits& op_traits(OpKind op);
// "?" for an invalid op.
std::string_view op_name(OpKind op);
// kNotFound naming the text when no op has that name.
Result<OpKind> op_from_name(std::string_view name);
std::span<const OpKind> all_ops();

// All false for an invalid op.
bool is_view(OpKind op);
bool is_elementwise(OpKind op);
bool is_state(OpKind op);
bool is_sink(OpKind op);
bool is_unary_elementwise(OpKind op);   // neg..atanh
bool is_binary_elementwise(OpKind op);  // add..bit_shift_right and the comparisons
bool is_comparison(OpKind op);          // equal..greater_equal (bool output)
bool is_reduction(OpKind op);  // reduce_sum, reduce_mean, reduce_max, reduce_prod (not arg_max/min)
bool accepts_attr(OpKind op, std::string_view attr_name);

}  // namespace carve::ir
