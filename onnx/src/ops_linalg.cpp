// Det as LU factorisation with partial pivoting (LAPACK's getrf, which numpy's det and
// ONNX's expected values use), unrolled at import over the n columns of the [..., n, n]
// input and batched over its leading dims. Step k takes the row of the largest |value| in
// column k (the first on ties) as the pivot, swaps it up (each swap flips the sign) and
// subtracts its multiples from the rows below; the determinant is the signed product of
// the pivots. A zero pivot means the column is all zeros: the elimination is skipped and
// the determinant is 0 (no division by zero). f16/bf16 are factorised in f32.
#include <fmt/format.h>

#include <vector>

#include "context.h"

namespace carve::onnx::detail {
namespace {

using ir::DType;
using ir::OpKind;

constexpr int64_t kMaxDetOrder = 64;  // the graph grows with n: about 20 nodes a column

class LuSteps {
 public:
  LuSteps(NodeContext& n, DType dtype) : n_(n), dtype_(dtype) {}

  Tensor scalar(double v) { return n_.constant_doubles(dtype_, ir::Shape{}, {v}); }
  Result<Tensor> binary(OpKind op, Tensor a, Tensor b) { return n_.op(op, {std::move(a), std::move(b)}); }
  Result<Tensor> slice(const Tensor& t, int64_t axis, int64_t begin, int64_t end) {
    return n_.op(OpKind::kSlice, {t}, {{"starts", std::vector<int64_t>{begin}}, {"ends", std::vector<int64_t>{end}},
                                      {"axes", std::vector<int64_t>{axis}}});
  }

  // One step on the trailing m x m block `a` [B, m, m]: multiplies *det by the signed pivot
  // and returns the next (m-1) x (m-1) block (for m = 1, none: `a` itself).
  Result<Tensor> step(const Tensor& a, int64_t m, Tensor& det) {
    CARVE_ASSIGN_OR_RETURN(Tensor column, slice(a, 2, 0, 1));  // [B, m, 1]
    CARVE_ASSIGN_OR_RETURN(Tensor magnitude, n_.op(OpKind::kAbs, {column}));
    CARVE_ASSIGN_OR_RETURN(Tensor pivot_at, n_.op(OpKind::kArgMax, {magnitude}, {{"axis", int64_t{1}}, {"keepdims", int64_t{1}}}));
    // The pivot row [B, 1, m], read by gather_elements with its index repeated along the row.
    CARVE_ASSIGN_OR_RETURN(Tensor row_index, binary(OpKind::kAdd, pivot_at, n_.constant_ints(DType::kI64, ir::Shape{1, 1, m},
                                                                                              std::vector<int64_t>(static_cast<size_t>(m), 0))));
    CARVE_ASSIGN_OR_RETURN(Tensor pivot_row, n_.op(OpKind::kGatherElements, {a, row_index}, {{"axis", int64_t{1}}}));
    CARVE_ASSIGN_OR_RETURN(Tensor top_row, slice(a, 1, 0, 1));
    // Swap: the pivot's row takes the top row, then the top row takes the pivot's.
    std::vector<int64_t> iota(static_cast<size_t>(m)), top(static_cast<size_t>(m), 0);
    for (int64_t i = 0; i < m; ++i) iota[static_cast<size_t>(i)] = i;
    top[0] = 1;
    CARVE_ASSIGN_OR_RETURN(Tensor is_pivot, binary(OpKind::kEqual, n_.constant_ints(DType::kI64, ir::Shape{1, m, 1}, iota), pivot_at));
    CARVE_ASSIGN_OR_RETURN(Tensor swapped, n_.op(OpKind::kWhere, {is_pivot, top_row, a}));
    CARVE_ASSIGN_OR_RETURN(swapped, n_.op(OpKind::kWhere, {n_.constant_ints(DType::kBool, ir::Shape{1, m, 1}, top), pivot_row, swapped}));

    CARVE_ASSIGN_OR_RETURN(Tensor pivot, slice(pivot_row, 2, 0, 1));  // [B, 1, 1]
    CARVE_ASSIGN_OR_RETURN(Tensor moved, binary(OpKind::kNotEqual, pivot_at, n_.constant_ints(DType::kI64, ir::Shape{}, {0})));
    CARVE_ASSIGN_OR_RETURN(Tensor signed_pivot, n_.op(OpKind::kNeg, {pivot}));
    CARVE_ASSIGN_OR_RETURN(signed_pivot, n_.op(OpKind::kWhere, {moved, signed_pivot, pivot}));
    CARVE_ASSIGN_OR_RETURN(det, binary(OpKind::kMul, det, signed_pivot));
    if (m == 1) return a;

    CARVE_ASSIGN_OR_RETURN(Tensor below, slice(swapped, 1, 1, m));  // [B, m-1, m]
    CARVE_ASSIGN_OR_RETURN(Tensor factor, slice(below, 2, 0, 1));   // [B, m-1, 1]
    CARVE_ASSIGN_OR_RETURN(factor, binary(OpKind::kDiv, factor, pivot));
    CARVE_ASSIGN_OR_RETURN(Tensor zero_pivot, binary(OpKind::kEqual, pivot, scalar(0)));
    CARVE_ASSIGN_OR_RETURN(factor, n_.op(OpKind::kWhere, {zero_pivot, scalar(0), factor}));
    CARVE_ASSIGN_OR_RETURN(Tensor update, binary(OpKind::kMul, factor, pivot_row));
    CARVE_ASSIGN_OR_RETURN(below, binary(OpKind::kSub, below, update));
    return slice(below, 2, 1, m);
  }

 private:
  NodeContext& n_;
  DType dtype_;
};

Status lower_det(NodeContext& n) {
  CARVE_ASSIGN_OR_RETURN(Tensor x, n.input(0));
  const ir::Shape& s = x.type.shape;
  const int rank = s.rank();
  if (rank < 2 || s[rank - 1] != s[rank - 2])
    return n.invalid(fmt::format("input {} (needs [..., n, n])", x.type.to_string()));
  if (!ir::is_float(x.type.dtype)) return n.invalid(fmt::format("input of {} (float types only)", ir::dtype_name(x.type.dtype)));
  CARVE_RETURN_IF_ERROR(require_non_empty(n, x, "input"));
  const int64_t order = s[rank - 1];
  if (order < 1 || order > kMaxDetOrder)
    return n.unsupported(fmt::format("{} x {} matrices (carve unrolls the factorisation: 1..{})", order, order, kMaxDetOrder));
  std::vector<int64_t> batch_dims;
  int64_t batch = 1;
  for (int d = 0; d < rank - 2; ++d) {
    batch_dims.push_back(s[d]);
    batch *= s[d];
  }
  const DType work = x.type.dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  Tensor a = x;
  if (work != x.type.dtype) {
    CARVE_ASSIGN_OR_RETURN(a, n.op(OpKind::kCast, {a}, {{"to", ir::dtype_name(work)}}));
  }
  CARVE_ASSIGN_OR_RETURN(a, n.op(OpKind::kReshape, {a}, {{"shape", std::vector<int64_t>{batch, order, order}}}));
  LuSteps lu(n, work);
  Tensor det = lu.scalar(1);
  for (int64_t m = order; m >= 1; --m) {
    CARVE_ASSIGN_OR_RETURN(a, lu.step(a, m, det));
  }
  CARVE_ASSIGN_OR_RETURN(det, n.op(OpKind::kReshape, {det}, {{"shape", batch_dims}}));
  if (work != x.type.dtype) {
    CARVE_ASSIGN_OR_RETURN(det, n.op(OpKind::kCast, {det}, {{"to", ir::dtype_name(x.type.dtype)}}));
  }
  return n.set_output(0, det);
}

}  // namespace

void register_linalg_ops(std::map<std::string, OpEntry, std::less<>>& t) { t["Det"] = {lower_det, {}}; }

}  // namespace carve::onnx::detail
