#include "carve/ir/op.h"

#include <array>

#include <fmt/format.h>

namespace carve::ir {
namespace {

using SV = std::string_view;

// Attribute name lists, shared by ops with the same attributes.
constexpr std::span<const SV> kNone{};
constexpr SV kHardSigmoid[] = {"alpha", "beta"};
constexpr SV kClip[] = {"min", "max"};
constexpr SV kCast[] = {"to"};
constexpr SV kReduce[] = {"axes", "keepdims"};
constexpr SV kAxis[] = {"axis"};
constexpr SV kArg[] = {"axis", "keepdims", "select_last_index"};
constexpr SV kLayerNorm[] = {"axis", "epsilon"};
constexpr SV kGemm[] = {"alpha", "beta", "trans_a", "trans_b"};
constexpr SV kConv[] = {"groups", "strides", "pads", "dilations"};
constexpr SV kMaxPool[] = {"kernel", "strides", "pads", "ceil_mode"};
constexpr SV kAvgPool[] = {"kernel", "strides", "pads", "ceil_mode", "count_include_pad"};
constexpr SV kEpsilon[] = {"epsilon"};
constexpr SV kSplit[] = {"axis", "sizes"};
constexpr SV kSlice[] = {"starts", "ends", "axes", "steps"};
constexpr SV kPerm[] = {"perm"};
constexpr SV kPad[] = {"pads", "value"};
constexpr SV kShape[] = {"shape"};
constexpr SV kAxes[] = {"axes"};
constexpr SV kHandle[] = {"handle"};
constexpr SV kGatherNd[] = {"batch_dims"};
constexpr SV kScatterNd[] = {"reduction"};
constexpr SV kTopK[] = {"axis", "k", "largest"};
constexpr SV kUnique[] = {"sorted", "axis"};
constexpr SV kNms[] = {"center_point_box"};
constexpr SV kHandleAxis[] = {"handle", "axis"};

enum Flags : unsigned { kView = 1, kElem = 2, kState = 4, kSink = 8 };

constexpr OpTraits T(OpKind k, SV name, int min_in, int max_in, int min_out, int max_out,
                     unsigned flags, std::span<const SV> attrs) {
  return OpTraits{k, name, min_in, max_in, min_out, max_out, (flags & kView) != 0,
                  (flags & kElem) != 0, (flags & kState) != 0, (flags & kSink) != 0, attrs};
}
constexpr OpTraits Unary(OpKind k, SV name, std::span<const SV> attrs = kNone) {
  return T(k, name, 1, 1, 1, 1, kElem, attrs);
}
constexpr OpTraits Binary(OpKind k, SV name) { return T(k, name, 2, 2, 1, 1, kElem, kNone); }
constexpr OpTraits One(OpKind k, SV name, std::span<const SV> attrs, int min_in = 1,
                       int max_in = 1) {
  return T(k, name, min_in, max_in, 1, 1, 0, attrs);
}

using K = OpKind;
// Indexed by OpKind; the static_assert below keeps it in enum order.
constexpr std::array<OpTraits, kNumOps> kTable = {{
    Unary(K::kNeg, "neg"),
    Unary(K::kAbs, "abs"),
    Unary(K::kExp, "exp"),
    Unary(K::kLog, "log"),
    Unary(K::kSqrt, "sqrt"),
    Unary(K::kRsqrt, "rsqrt"),
    Unary(K::kTanh, "tanh"),
    Unary(K::kSigmoid, "sigmoid"),
    Unary(K::kRelu, "relu"),
    Unary(K::kGelu, "gelu"),
    Unary(K::kErf, "erf"),
    Unary(K::kSilu, "silu"),
    Unary(K::kHardSigmoid, "hard_sigmoid", kHardSigmoid),
    Unary(K::kClip, "clip", kClip),
    Unary(K::kFloor, "floor"),
    Unary(K::kCeil, "ceil"),
    Unary(K::kRound, "round"),
    Unary(K::kTrunc, "trunc"),
    Unary(K::kSin, "sin"),
    Unary(K::kCos, "cos"),
    Unary(K::kTan, "tan"),
    Unary(K::kAsin, "asin"),
    Unary(K::kAcos, "acos"),
    Unary(K::kAtan, "atan"),
    Unary(K::kSinh, "sinh"),
    Unary(K::kCosh, "cosh"),
    Unary(K::kAsinh, "asinh"),
    Unary(K::kAcosh, "acosh"),
    Unary(K::kAtanh, "atanh"),
    Binary(K::kAdd, "add"),
    Binary(K::kSub, "sub"),
    Binary(K::kMul, "mul"),
    Binary(K::kDiv, "div"),
    Binary(K::kPow, "pow"),
    Binary(K::kMax, "max"),
    Binary(K::kMin, "min"),
    Binary(K::kFmod, "fmod"),
    Binary(K::kBitShiftLeft, "bit_shift_left"),
    Binary(K::kBitShiftRight, "bit_shift_right"),
    Binary(K::kEqual, "equal"),
    Binary(K::kNotEqual, "not_equal"),
    Binary(K::kLess, "less"),
    Binary(K::kLessEqual, "less_equal"),
    Binary(K::kGreater, "greater"),
    Binary(K::kGreaterEqual, "greater_equal"),
    T(K::kWhere, "where", 3, 3, 1, 1, kElem, kNone),
    Unary(K::kCast, "cast", kCast),
    One(K::kReduceSum, "reduce_sum", kReduce),
    One(K::kReduceMean, "reduce_mean", kReduce),
    One(K::kReduceMax, "reduce_max", kReduce),
    One(K::kReduceProd, "reduce_prod", kReduce),
    One(K::kArgMax, "arg_max", kArg),
    One(K::kArgMin, "arg_min", kArg),
    One(K::kSoftmax, "softmax", kAxis),
    One(K::kLayerNorm, "layer_norm", kLayerNorm, 2, 3),
    One(K::kMatmul, "matmul", kNone, 2, 2),
    One(K::kGemm, "gemm", kGemm, 2, 3),
    One(K::kConv2d, "conv2d", kConv, 2, 3),
    One(K::kMaxPool, "max_pool", kMaxPool),
    One(K::kAvgPool, "avg_pool", kAvgPool),
    One(K::kGlobalAvgPool, "global_avg_pool", kNone),
    One(K::kBatchNorm, "batch_norm", kEpsilon, 5, 5),
    One(K::kConcat, "concat", kAxis, 1, kVariadic),
    T(K::kSplit, "split", 1, 1, 1, kVariadic, 0, kSplit),
    One(K::kSlice, "slice", kSlice),
    One(K::kTranspose, "transpose", kPerm),
    One(K::kPad, "pad", kPad),
    One(K::kGather, "gather", kAxis, 2, 2),
    One(K::kGatherElements, "gather_elements", kAxis, 2, 2),
    One(K::kGatherNd, "gather_nd", kGatherNd, 2, 2),
    One(K::kScatterNd, "scatter_nd", kScatterNd, 3, 3),
    T(K::kTopK, "top_k", 1, 1, 2, 2, 0, kTopK),
    T(K::kNonZero, "non_zero", 1, 1, 2, 2, 0, kNone),
    T(K::kUnique, "unique", 1, 1, 5, 5, 0, kUnique),
    T(K::kNonMaxSuppression, "non_max_suppression", 4, 5, 2, 2, 0, kNms),
    T(K::kReshape, "reshape", 1, 1, 1, 1, kView, kShape),
    T(K::kFlatten, "flatten", 1, 1, 1, 1, kView, kAxis),
    T(K::kSqueeze, "squeeze", 1, 1, 1, 1, kView, kAxes),
    T(K::kUnsqueeze, "unsqueeze", 1, 1, 1, 1, kView, kAxes),
    T(K::kIdentity, "identity", 1, 1, 1, 1, kView, kNone),
    T(K::kReadHandle, "read_handle", 0, 0, 1, 1, kState, kHandle),
    T(K::kWriteHandle, "write_handle", 1, 1, 0, 0, kState | kSink, kHandle),
    T(K::kWriteHandleAt, "write_handle_at", 2, 2, 0, 0, kState | kSink, kHandleAxis),
}};

constexpr bool table_in_enum_order() {
  for (int i = 0; i < kNumOps; ++i) {
    if (static_cast<int>(kTable[static_cast<size_t>(i)].kind) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kTable must list ops in OpKind order");

constexpr std::array<OpKind, kNumOps> make_all() {
  std::array<OpKind, kNumOps> all{};
  for (int i = 0; i < kNumOps; ++i) all[static_cast<size_t>(i)] = static_cast<OpKind>(i);
  return all;
}
constexpr std::array<OpKind, kNumOps> kAllOps = make_all();

}  // namespace

bool is_valid_op(OpKind op) { return static_cast<int>(op) < kNumOps; }

const OpTraits& op_traits(OpKind op) { return kTable[static_cast<size_t>(op)]; }

std::string_view op_name(OpKind op) { return is_valid_op(op) ? op_traits(op).name : "?"; }

Result<OpKind> op_from_name(std::string_view name) {
  for (const OpTraits& t : kTable) {
    if (t.name == name) return t.kind;
  }
  return Status(ErrorCode::kNotFound, fmt::format("unknown op '{}'", name));
}

std::span<const OpKind> all_ops() { return kAllOps; }

bool is_view(OpKind op) { return is_valid_op(op) && op_traits(op).view; }
bool is_elementwise(OpKind op) { return is_valid_op(op) && op_traits(op).elementwise; }
bool is_state(OpKind op) { return is_valid_op(op) && op_traits(op).state; }
bool is_sink(OpKind op) { return is_valid_op(op) && op_traits(op).sink; }

bool is_unary_elementwise(OpKind op) {
  auto i = static_cast<int>(op);
  return i >= static_cast<int>(OpKind::kNeg) && i <= static_cast<int>(OpKind::kAtanh);
}
bool is_binary_elementwise(OpKind op) {
  auto i = static_cast<int>(op);
  return i >= static_cast<int>(OpKind::kAdd) && i <= static_cast<int>(OpKind::kGreaterEqual);
}
bool is_comparison(OpKind op) {
  auto i = static_cast<int>(op);
  return i >= static_cast<int>(OpKind::kEqual) && i <= static_cast<int>(OpKind::kGreaterEqual);
}
bool is_reduction(OpKind op) {
  return op == OpKind::kReduceSum || op == OpKind::kReduceMean || op == OpKind::kReduceMax ||
         op == OpKind::kReduceProd;
}

bool accepts_attr(OpKind op, std::string_view attr_name) {
  if (!is_valid_op(op) || attr_name.empty()) return false;
  for (std::string_view a : op_traits(op).attrs) {
    if (a == attr_name) return true;
  }
  return false;
}

}  // namespace carve::ir
