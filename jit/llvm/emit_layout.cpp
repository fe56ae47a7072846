// Layout ops: transpose, concat, split, slice (any steps, negative included), pad, gather,
// gather_elements, views materialised as copies (reshape, flatten, squeeze, unsqueeze,
// identity), and the state ops read_handle / write_handle / write_handle_at; at the end
// the indexing ops gather_nd, scatter_nd and top_k (emit_index).
//
// Everything but scatter_nd's reductions and top_k is a copy of raw element bits (no value conversion), so every dtype works.
// Most ops are "strided regions": out[i] = in[base + sum(idx_j * stride_j)], walked row by
// row along the innermost dim (contiguous rows become memcpy). Tiles split the op's item
// space (output elements; for concat and the handle writes, the elements copied) into
// group.num_tiles contiguous chunks.
//
// Out-of-range behaviour (no UB, unlike the reference interpreter, which reports errors):
//  - gather: an index outside [-n, n) writes zeros for that slice; negative indices in
//    range count from the end. gather_elements the same, per element.
//  - write_handle_at: pos is clamped to [0, handle_dim - value_dim] along the axis.
#include <llvm/IR/Intrinsics.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "carve/ir/half.h"
#include "emit.h"
#include "emit_util.h"

namespace carve::jit::detail {

using llvm::Type;
using llvm::Value;
using namespace util;

namespace {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  int64_t s = 1;
  for (size_t j = dims.size(); j-- > 0;) {
    st[j] = s;
    s *= dims[j];
  }
  return st;
}

int64_t product(const std::vector<int64_t>& dims, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t j = from; j < std::min(to, dims.size()); ++j) p *= dims[j];
  return p;
}

Type* bits_type(llvm::LLVMContext& ctx, ir::DType d) {
  return llvm::Type::getIntNTy(ctx, static_cast<unsigned>(ir::dtype_size(d) * 8));
}

Status bad(const EmitContext& ec, const ir::Node& node, const std::string& why) {
  return Status(ErrorCode::kInvalidArgument, fmt::format("group '{}': {}: {}", ec.group.name, ir::describe_node(ec.graph, node.id), why));
}

// One strided copy: dst[dst_base + sum idx*dst_st] = src[src_base + sum idx*src_st] for
// every index of `dims`, restricted to the linear (row-major over dims) items [lo, hi).
struct Region {
  std::vector<int64_t> dims;
  Value* src = nullptr;
  Value* src_base = nullptr;  // i64 element offset
  std::vector<int64_t> src_st;
  Value* dst = nullptr;
  Value* dst_base = nullptr;
  std::vector<int64_t> dst_st;
};

void copy_region(EmitContext& ec, Region r, ir::DType dtype, Value* lo, Value* hi) {
  llvm::IRBuilder<>& b = ec.b;
  Type* et = bits_type(ec.ctx, dtype);
  const int64_t esize = ir::dtype_size(dtype);
  // Drop extent-1 dims, merge dims that are contiguous for both sides.
  std::vector<int64_t> dims, ss, ds;
  for (size_t j = 0; j < r.dims.size(); ++j) {
    if (r.dims[j] == 1) continue;
    if (!dims.empty() && ss.back() == r.src_st[j] * r.dims[j] && ds.back() == r.dst_st[j] * r.dims[j]) {
      dims.back() *= r.dims[j];
      ss.back() = r.src_st[j];
      ds.back() = r.dst_st[j];
      continue;
    }
    dims.push_back(r.dims[j]);
    ss.push_back(r.src_st[j]);
    ds.push_back(r.dst_st[j]);
  }
  if (dims.empty()) {  // all extents 1, or rank 0: one element
    dims = {1};
    ss = {1};
    ds = {1};
  }
  const size_t m = dims.size();
  if (m == 1 && ss[0] == 1 && ds[0] == 1) {
    // contiguous: one memcpy of the range
    if_then(ec, b.CreateICmpSLT(lo, hi), [&] {
      Value* sp = b.CreateInBoundsGEP(et, r.src, b.CreateAdd(r.src_base, lo));
      Value* dp = b.CreateInBoundsGEP(et, r.dst, b.CreateAdd(r.dst_base, lo));
      Value* bytes = b.CreateMul(b.CreateSub(hi, lo), i64c(ec, esize));
      b.CreateMemCpy(dp, llvm::MaybeAlign(esize), sp, llvm::MaybeAlign(esize), bytes);
    });
    return;
  }
  const std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
  Value* soff = nullptr;
  Value* doff = nullptr;
  for_rows(ec, lo, hi, dims.back(), [&](Value* row) {
    std::vector<Value*> idx = unravel(ec, row, outer);
    soff = strided_offset(ec, r.src_base, idx, ss);
    doff = strided_offset(ec, r.dst_base, idx, ds);
  }, [&](Value*, Value* c) {
    Value* s = b.CreateAdd(soff, b.CreateMul(c, i64c(ec, ss.back())));
    Value* d = b.CreateAdd(doff, b.CreateMul(c, i64c(ec, ds.back())));
    Value* v = b.CreateAlignedLoad(et, b.CreateInBoundsGEP(et, r.src, s), llvm::Align(esize));
    b.CreateAlignedStore(v, b.CreateInBoundsGEP(et, r.dst, d), llvm::Align(esize));
  });
}

// Several regions sharing one item space (split: one per output, concat: one per input).
Status copy_regions(EmitContext& ec, const std::vector<Region>& regions, ir::DType dtype) {
  llvm::IRBuilder<>& b = ec.b;
  int64_t total = 0;
  for (const Region& r : regions) total += product(r.dims);
  Range range = tile_items(ec, total);
  int64_t start = 0;
  for (const Region& r : regions) {
    int64_t n = product(r.dims);
    if (n > 0) {
      auto local = [&](Value* x) {
        return min_i64(ec, max_i64(ec, b.CreateSub(x, i64c(ec, start)), i64c(ec, 0)), i64c(ec, n));
      };
      copy_region(ec, r, dtype, local(range.lo), local(range.hi));
    }
    start += n;
  }
  return Status();
}

int norm_axis(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// The pad fill value's bits for `dtype` (cast rules of the reference).
uint64_t fill_bits(ir::DType d, double v) {
  switch (d) {
    case ir::DType::kF32: return std::bit_cast<uint32_t>(static_cast<float>(v));
    case ir::DType::kF64: return std::bit_cast<uint64_t>(v);
    case ir::DType::kF16: return ir::double_to_f16(v);
    case ir::DType::kBf16: return ir::double_to_bf16(v);
    case ir::DType::kBool: return v != 0 ? 1 : 0;
    default: return saturated_int_bits(d, v);
  }
}

Status emit_pad(EmitContext& ec, const ir::Node& node) {
  llvm::IRBuilder<>& b = ec.b;
  const ir::Graph& g = ec.graph;
  const ir::TensorType& in = g.value(node.inputs[0]).type;
  const ir::TensorType& out = g.value(node.outputs[0]).type;
  std::vector<int64_t> pads = attr_ints(node, "pads", {});
  const int rank = in.shape.rank();
  if (pads.size() != static_cast<size_t>(2 * rank)) return bad(ec, node, "pads must have 2*rank entries");
  auto vit = node.attrs.find("value");
  double value = vit == node.attrs.end() ? 0.0 : (vit->second.is_float() ? vit->second.as_float() : static_cast<double>(vit->second.as_int()));
  Type* et = bits_type(ec.ctx, in.dtype);
  const int64_t esize = ir::dtype_size(in.dtype);
  Value* fill = llvm::ConstantInt::get(et, fill_bits(in.dtype, value));
  Value* src = operand_ptr(ec, node.inputs[0]);
  Value* dst = operand_ptr(ec, node.outputs[0]);

  std::vector<int64_t> od = out.shape.dims(), id = in.shape.dims();
  std::vector<int64_t> begin(pads.begin(), pads.begin() + rank);
  if (rank == 0) {
    od = {1};
    id = {1};
    begin = {0};
  }
  const int64_t total = product(od);
  const bool empty_in = product(id) == 0;
  std::vector<int64_t> ist = contiguous_strides(id);
  Range range = tile_items(ec, total);
  const size_t m = od.size();
  // Input coordinate x = o - begin[j] of output coordinate o along dim j, and whether it
  // is inside the input.
  auto inside = [&](Value* o, size_t j) {
    Value* x = b.CreateSub(o, i64c(ec, begin[j]));
    return std::pair{x, b.CreateAnd(b.CreateICmpSGE(x, i64c(ec, 0)), b.CreateICmpSLT(x, i64c(ec, id[j])))};
  };
  const std::vector<int64_t> outer(od.begin(), od.end() - 1);
  Value* valid = nullptr;  // the row's outer coordinates are inside the input
  Value* base = nullptr;   // input offset of the row's (clamped) outer coordinates
  for_rows(ec, range.lo, range.hi, od.back(), [&](Value* row) {
    valid = b.getTrue();
    base = i64c(ec, 0);
    if (empty_in) return;
    std::vector<Value*> o = unravel(ec, row, outer);
    for (size_t j = o.size(); j-- > 0;) {
      auto [x, ok] = inside(o[j], j);
      valid = b.CreateAnd(valid, ok);
      base = b.CreateAdd(base, b.CreateMul(b.CreateSelect(ok, x, i64c(ec, 0)), i64c(ec, ist[j])));
    }
  }, [&](Value* row_start, Value* c) {
    Value* v = fill;
    if (!empty_in) {
      auto [x, in] = inside(c, m - 1);
      Value* ok = b.CreateAnd(valid, in);
      Value* xc = b.CreateSelect(ok, x, i64c(ec, 0));
      Value* ld = b.CreateAlignedLoad(et, b.CreateInBoundsGEP(et, src, b.CreateAdd(base, xc)), llvm::Align(esize));
      v = b.CreateSelect(ok, ld, fill);
    }
    b.CreateAlignedStore(v, b.CreateInBoundsGEP(et, dst, b.CreateAdd(row_start, c)), llvm::Align(esize));
  });
  return Status();
}

// Index `at` of an i32/i64 index tensor, a negative one counted from `dim`: (inside
// [0, dim), the index clamped to 0 when outside: safe to read at).
std::pair<Value*, Value*> load_index(EmitContext& ec, Type* it, Value* indices, Value* at, int64_t dim) {
  llvm::IRBuilder<>& b = ec.b;
  Value* raw = b.CreateAlignedLoad(it, b.CreateInBoundsGEP(it, indices, at), llvm::Align(it->getScalarSizeInBits() / 8));
  Value* k = b.CreateSExt(raw, b.getInt64Ty());
  k = b.CreateSelect(b.CreateICmpSLT(k, i64c(ec, 0)), b.CreateAdd(k, i64c(ec, dim)), k);
  Value* ok = b.CreateAnd(b.CreateICmpSGE(k, i64c(ec, 0)), b.CreateICmpSLT(k, i64c(ec, dim)));
  return {ok, b.CreateSelect(ok, k, i64c(ec, 0))};
}

Status emit_gather(EmitContext& ec, const ir::Node& node) {
  llvm::IRBuilder<>& b = ec.b;
  const ir::Graph& g = ec.graph;
  const ir::TensorType& data = g.value(node.inputs[0]).type;
  const ir::TensorType& indices = g.value(node.inputs[1]).type;
  const int rank = data.shape.rank();
  if (rank < 1) return bad(ec, node, "data must have rank >= 1");
  const int axis = norm_axis(attr_int(node, "axis", 0), rank);
  const std::vector<int64_t>& dd = data.shape.dims();
  const int64_t outer = product(dd, 0, static_cast<size_t>(axis));
  const int64_t dim = dd[static_cast<size_t>(axis)];
  const int64_t inner = product(dd, static_cast<size_t>(axis) + 1);
  const int64_t nidx = product(indices.shape.dims());
  const int64_t total = outer * nidx * inner;
  Type* et = bits_type(ec.ctx, data.dtype);
  const int64_t esize = ir::dtype_size(data.dtype);
  Value* src = operand_ptr(ec, node.inputs[0]);
  Value* idx_ptr = operand_ptr(ec, node.inputs[1]);
  Value* dst = operand_ptr(ec, node.outputs[0]);
  Type* it = indices.dtype == ir::DType::kI32 ? b.getInt32Ty() : b.getInt64Ty();
  Range range = tile_items(ec, total);
  if (total == 0) return Status();
  Value* zero = llvm::ConstantInt::get(et, 0);
  Value* ok = nullptr;    // the row's index is inside [0, dim)
  Value* base = nullptr;  // input offset of the row
  for_rows(ec, range.lo, range.hi, inner, [&](Value* row) {
    Value* j = b.CreateURem(row, i64c(ec, nidx));
    Value* o = b.CreateUDiv(row, i64c(ec, nidx));
    Value* kc = nullptr;
    std::tie(ok, kc) = load_index(ec, it, idx_ptr, j, dim);
    base = b.CreateMul(b.CreateAdd(b.CreateMul(o, i64c(ec, dim)), kc), i64c(ec, inner));
  }, [&](Value* row_start, Value* c) {
    Value* v = zero;
    if (dim > 0) {
      Value* ld = b.CreateAlignedLoad(et, b.CreateInBoundsGEP(et, src, b.CreateAdd(base, c)), llvm::Align(esize));
      v = b.CreateSelect(ok, ld, zero);
    }
    b.CreateAlignedStore(v, b.CreateInBoundsGEP(et, dst, b.CreateAdd(row_start, c)), llvm::Align(esize));
  });
  return Status();
}

// gather_elements: walked over indices' rows (its innermost dim); a row's data offset
// over the other dims is computed once, the axis coordinate per element from its index.
Status emit_gather_elements(EmitContext& ec, const ir::Node& node) {
  llvm::IRBuilder<>& b = ec.b;
  const ir::Graph& g = ec.graph;
  const ir::TensorType& data = g.value(node.inputs[0]).type;
  const ir::TensorType& indices = g.value(node.inputs[1]).type;
  const int rank = data.shape.rank();
  if (rank < 1 || indices.shape.rank() != rank) return bad(ec, node, "indices must have data's rank >= 1");
  const auto axis = static_cast<size_t>(norm_axis(attr_int(node, "axis", 0), rank));
  const std::vector<int64_t>& id = indices.shape.dims();
  const std::vector<int64_t> dst = contiguous_strides(data.shape.dims());
  const int64_t dim = data.shape[static_cast<int>(axis)];
  const int64_t width = id.back();
  const int64_t total = product(id);
  std::vector<int64_t> outer = id, outer_st = dst;  // the dims before the innermost
  outer.pop_back();
  outer_st.pop_back();
  if (axis + 1 < static_cast<size_t>(rank)) outer_st[axis] = 0;  // from the index instead
  const int64_t col_st = axis + 1 == static_cast<size_t>(rank) ? 0 : 1;
  Type* et = bits_type(ec.ctx, data.dtype);
  const int64_t esize = ir::dtype_size(data.dtype);
  Value* src = operand_ptr(ec, node.inputs[0]);
  Value* idx_ptr = operand_ptr(ec, node.inputs[1]);
  Value* out = operand_ptr(ec, node.outputs[0]);
  Type* it = indices.dtype == ir::DType::kI32 ? b.getInt32Ty() : b.getInt64Ty();
  Range range = tile_items(ec, total);
  if (total == 0) return Status();
  Value* zero = llvm::ConstantInt::get(et, 0);
  Value* base = nullptr;  // data offset of the row's coordinates off the axis
  for_rows(ec, range.lo, range.hi, width, [&](Value* row) {
    base = strided_offset(ec, i64c(ec, 0), unravel(ec, row, outer), outer_st);
  }, [&](Value* row_start, Value* c) {
    Value* i = b.CreateAdd(row_start, c);
    Value* v = zero;
    if (dim > 0) {
      auto [ok, kc] = load_index(ec, it, idx_ptr, i, dim);
      Value* at = b.CreateAdd(b.CreateAdd(base, b.CreateMul(c, i64c(ec, col_st))),
                              b.CreateMul(kc, i64c(ec, dst[axis])));
      Value* ld = b.CreateAlignedLoad(et, b.CreateInBoundsGEP(et, src, at), llvm::Align(esize));
      v = b.CreateSelect(ok, ld, zero);
    }
    b.CreateAlignedStore(v, b.CreateInBoundsGEP(et, out, i), llvm::Align(esize));
  });
  return Status();
}

// The regions of split (whole = the input, the source) or concat (whole = the output, the
// destination): part k sits at the sum of the earlier parts' extents along "axis".
std::vector<Region> axis_regions(EmitContext& ec, const ir::Node& node, ir::ValueId whole,
                                 const std::vector<ir::ValueId>& parts, bool whole_is_src) {
  const ir::Shape& ws = ec.graph.value(whole).type.shape;
  const int axis = norm_axis(attr_int(node, "axis", 0), ws.rank());
  const std::vector<int64_t> wst = contiguous_strides(ws.dims());
  std::vector<Region> regions;
  int64_t offset = 0;
  for (ir::ValueId v : parts) {
    const ir::Shape& ps = ec.graph.value(v).type.shape;
    Region r{ps.dims(), operand_ptr(ec, whole), i64c(ec, offset * wst[static_cast<size_t>(axis)]), wst,
             operand_ptr(ec, v), i64c(ec, 0), contiguous_strides(ps.dims())};
    if (!whole_is_src) r = Region{r.dims, r.dst, r.dst_base, r.dst_st, r.src, r.src_base, r.src_st};
    regions.push_back(std::move(r));
    offset += ps[axis];
  }
  return regions;
}

// ONNX slice start for one axis (same clamping as shape inference).
int64_t slice_start(int64_t d, int64_t start, int64_t step) {
  if (start < 0) start += d;
  if (step > 0) return std::clamp<int64_t>(start, 0, d);
  return d == 0 ? 0 : std::clamp<int64_t>(start, 0, d - 1);
}

}  // namespace

Status emit_layout(EmitContext& ec, const ir::Node& node) {
  llvm::IRBuilder<>& b = ec.b;
  const ir::Graph& g = ec.graph;
  for (ir::ValueId v : node.inputs) {
    if (!g.has_value(v) || !operand_ptr(ec, v)) return bad(ec, node, fmt::format("input {} is not an operand", v));
  }
  for (ir::ValueId v : node.outputs) {
    if (!g.has_value(v) || !operand_ptr(ec, v)) return bad(ec, node, fmt::format("output {} is not an operand", v));
  }
  auto zero = [&] { return i64c(ec, 0); };

  switch (node.op) {
    case ir::OpKind::kReshape:
    case ir::OpKind::kFlatten:
    case ir::OpKind::kSqueeze:
    case ir::OpKind::kUnsqueeze:
    case ir::OpKind::kIdentity: {
      const ir::TensorType& t = g.value(node.outputs[0]).type;
      int64_t n = product(t.shape.dims());
      Region r{{n}, operand_ptr(ec, node.inputs[0]), zero(), {1}, operand_ptr(ec, node.outputs[0]), zero(), {1}};
      return copy_regions(ec, {r}, t.dtype);
    }
    case ir::OpKind::kReadHandle:
    case ir::OpKind::kWriteHandle: {
      Value* handle = operand_ptr(ec, ir::kNoValue);
      if (!handle) return bad(ec, node, "no handle operand (value kNoValue)");
      ir::ValueId v = node.op == ir::OpKind::kReadHandle ? node.outputs[0] : node.inputs[0];
      const ir::TensorType& t = g.value(v).type;
      Value* vp = operand_ptr(ec, v);
      int64_t n = product(t.shape.dims());
      Region r{{n}, handle, zero(), {1}, vp, zero(), {1}};
      if (node.op == ir::OpKind::kWriteHandle) std::swap(r.src, r.dst);
      return copy_regions(ec, {r}, t.dtype);
    }
    case ir::OpKind::kWriteHandleAt: {
      Value* handle = operand_ptr(ec, ir::kNoValue);
      if (!handle) return bad(ec, node, "no handle operand (value kNoValue)");
      auto hit = node.attrs.find("handle");
      const ir::Handle* h = hit != node.attrs.end() && hit->second.is_string() ? g.find_handle(hit->second.as_string()) : nullptr;
      if (!h) return bad(ec, node, "unknown handle");
      const ir::TensorType& vt = g.value(node.inputs[0]).type;
      const int rank = h->type.shape.rank();
      const int axis = norm_axis(attr_int(node, "axis", 0), rank);
      if (vt.shape.rank() != rank || axis < 0 || axis >= rank) return bad(ec, node, "value does not fit the handle");
      std::vector<int64_t> hst = contiguous_strides(h->type.shape.dims());
      int64_t max_pos = h->type.shape[axis] - vt.shape[axis];
      Value* pos = b.CreateAlignedLoad(b.getInt64Ty(), operand_ptr(ec, node.inputs[1]), llvm::Align(8));
      pos = b.CreateSelect(b.CreateICmpSLT(pos, zero()), zero(), pos);
      pos = b.CreateSelect(b.CreateICmpSGT(pos, i64c(ec, max_pos)), i64c(ec, max_pos), pos);
      Value* base = b.CreateMul(pos, i64c(ec, hst[static_cast<size_t>(axis)]));
      Region r{vt.shape.dims(), operand_ptr(ec, node.inputs[0]), zero(), contiguous_strides(vt.shape.dims()),
               handle, base, hst};
      return copy_regions(ec, {r}, vt.dtype);
    }
    case ir::OpKind::kTranspose: {
      const ir::TensorType& in = g.value(node.inputs[0]).type;
      const ir::TensorType& out = g.value(node.outputs[0]).type;
      const int rank = in.shape.rank();
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      for (int j = 0; j < rank; ++j) perm[static_cast<size_t>(j)] = rank - 1 - j;
      perm = attr_ints(node, "perm", perm);
      std::vector<int64_t> ist = contiguous_strides(in.shape.dims());
      std::vector<int64_t> sst;
      for (int64_t p : perm) sst.push_back(ist[static_cast<size_t>(p)]);
      Region r{out.shape.dims(), operand_ptr(ec, node.inputs[0]), zero(), sst, operand_ptr(ec, node.outputs[0]), zero(),
               contiguous_strides(out.shape.dims())};
      return copy_regions(ec, {r}, in.dtype);
    }
    case ir::OpKind::kSlice: {
      const ir::TensorType& in = g.value(node.inputs[0]).type;
      const ir::TensorType& out = g.value(node.outputs[0]).type;
      const int rank = in.shape.rank();
      std::vector<int64_t> starts = attr_ints(node, "starts", {});
      std::vector<int64_t> ends = attr_ints(node, "ends", {});
      size_t n = starts.size();
      std::vector<int64_t> axes(n);
      for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
      axes = attr_ints(node, "axes", axes);
      std::vector<int64_t> steps = attr_ints(node, "steps", std::vector<int64_t>(n, 1));
      if (ends.size() != n || axes.size() != n || steps.size() != n) return bad(ec, node, "inconsistent slice attributes");
      std::vector<int64_t> ist = contiguous_strides(in.shape.dims());
      std::vector<int64_t> sst = ist;
      int64_t base = 0;
      for (size_t i = 0; i < n; ++i) {
        auto a = static_cast<size_t>(norm_axis(axes[i], rank));
        int64_t d = in.shape[static_cast<int>(a)];
        if (out.shape[static_cast<int>(a)] == 0) continue;  // nothing is read
        base += slice_start(d, starts[i], steps[i]) * ist[a];
        // a step beyond the extent only matters for length-1 outputs: avoid overflow
        sst[a] = out.shape[static_cast<int>(a)] > 1 ? steps[i] * ist[a] : 0;
      }
      Region r{out.shape.dims(), operand_ptr(ec, node.inputs[0]), i64c(ec, base), sst,
               operand_ptr(ec, node.outputs[0]), zero(), contiguous_strides(out.shape.dims())};
      return copy_regions(ec, {r}, in.dtype);
    }
    case ir::OpKind::kSplit: {
      return copy_regions(ec, axis_regions(ec, node, node.inputs[0], node.outputs, true), g.value(node.inputs[0]).type.dtype);
    }
    case ir::OpKind::kConcat: {
      return copy_regions(ec, axis_regions(ec, node, node.outputs[0], node.inputs, false), g.value(node.outputs[0]).type.dtype);
    }
    case ir::OpKind::kPad:
      return emit_pad(ec, node);
    case ir::OpKind::kGather:
      return emit_gather(ec, node);
    case ir::OpKind::kGatherElements:
      return emit_gather_elements(ec, node);
    default:
      break;
  }
  return Status(ErrorCode::kUnsupported,
                fmt::format("group '{}': no emitter for {}", ec.group.name, ir::describe_node(g, node.id)));
}

// ---- indexing ops: gather_nd, scatter_nd, top_k ----
//
//  - gather_nd: one output element per item (tile_items), walked by slice rows so the
//    index tuple of a row is read once; an index outside [-n, n) reads zeros for that
//    slice (like gather), the reference reports it.
//  - scatter_nd: one tile (fusion gives ops outside its families one): data is copied to
//    the output, then the updates are applied in row-major order of the indices, so
//    duplicate indices with a reduction give the same result at any thread count. An
//    update whose index is outside [-n, n) is skipped.
//  - top_k: one tile; each element's rank in its row is counted (the elements that
//    precede it: the better values, NaN after every number, ties by lower index) and the
//    element is stored at its rank when that is below k: O(len^2) a row, no scratch.
namespace {

// Index row `row` of indices [rows, k]: coordinates into data dims [first, first + k),
// negative ones wrapped. offset: their element offset in data (out-of-range coordinates
// count as 0); ok: every coordinate in range.
struct IndexRow {
  Value* offset;
  Value* ok;
};
IndexRow index_row(EmitContext& ec, const ir::Node& node, Value* row, int first) {
  auto& b = ec.b;
  const ir::TensorType& data = ec.graph.value(node.inputs[0]).type;
  const ir::TensorType& indices = ec.graph.value(node.inputs[1]).type;
  const std::vector<int64_t>& dims = data.shape.dims();
  const std::vector<int64_t> strides = contiguous_strides(dims);
  const int64_t k = indices.shape[indices.shape.rank() - 1];
  Value* ptr = operand_ptr(ec, node.inputs[1]);
  Value* offset = i64c(ec, 0);
  Value* ok = b.getTrue();
  for (int64_t j = 0; j < k; ++j) {
    const auto d = static_cast<size_t>(first + j);
    Value* raw = load_elem(ec, indices.dtype, ptr, b.CreateAdd(b.CreateMul(row, i64c(ec, k)), i64c(ec, j)));
    raw = b.CreateSExtOrTrunc(raw, b.getInt64Ty());
    Value* v = b.CreateSelect(b.CreateICmpSLT(raw, i64c(ec, 0)), b.CreateAdd(raw, i64c(ec, dims[d])), raw);
    Value* in = b.CreateAnd(b.CreateICmpSGE(v, i64c(ec, 0)), b.CreateICmpSLT(v, i64c(ec, dims[d])));
    ok = b.CreateAnd(ok, in);
    offset = b.CreateAdd(offset, b.CreateMul(b.CreateSelect(in, v, i64c(ec, 0)), i64c(ec, strides[d])));
  }
  return {offset, ok};
}

Status emit_gather_nd(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::TensorType& data = ec.graph.value(node.inputs[0]).type;
  const ir::TensorType& indices = ec.graph.value(node.inputs[1]).type;
  const std::vector<int64_t>& dd = data.shape.dims();
  const auto batch_dims = static_cast<size_t>(attr_int(node, "batch_dims", 0));
  const auto k = static_cast<size_t>(indices.shape[indices.shape.rank() - 1]);
  const int64_t slice = product(dd, batch_dims + k, dd.size());
  const int64_t batch_stride = product(dd, batch_dims, dd.size());
  const std::vector<int64_t>& id = indices.shape.dims();
  const int64_t rows_per_batch = product(id, batch_dims, id.size() - 1);
  const int64_t total = product(id, 0, id.size() - 1) * slice;
  Type* et = bits_type(ec.ctx, data.dtype);
  Value* src = operand_ptr(ec, node.inputs[0]);
  Value* out = operand_ptr(ec, node.outputs[0]);
  Range range = tile_items(ec, total);
  if (total == 0) return Status();
  const bool empty_data = product(dd, 0, dd.size()) == 0;  // every index is out of range
  Value* base = nullptr;
  Value* ok = nullptr;
  for_rows(ec, range.lo, range.hi, slice, [&](Value* row) {
    if (empty_data) return;
    IndexRow ir = index_row(ec, node, row, static_cast<int>(batch_dims));
    Value* batch = b.CreateUDiv(row, i64c(ec, rows_per_batch));
    base = b.CreateAdd(b.CreateMul(batch, i64c(ec, batch_stride)), ir.offset);
    ok = ir.ok;
  }, [&](Value* row_start, Value* col) {
    Value* v = zero(et);
    if (!empty_data) {
      Value* ld = b.CreateLoad(et, b.CreateInBoundsGEP(et, src, b.CreateAdd(base, col)));
      v = b.CreateSelect(ok, ld, zero(et));  // base is in range even when !ok
    }
    b.CreateStore(v, b.CreateInBoundsGEP(et, out, b.CreateAdd(row_start, col)));
  });
  return Status();
}

std::string reduction_of(const ir::Node& node) {
  auto it = node.attrs.find("reduction");
  return it != node.attrs.end() && it->second.is_string() ? it->second.as_string() : std::string("none");
}

// old (op) upd in the compute type; max/min: NaN if either is NaN (the reference's rule).
Value* scatter_combine(EmitContext& ec, ir::DType dtype, const std::string& reduction, Value* old, Value* upd) {
  auto& b = ec.b;
  if (reduction == "add") return add(ec, old, upd);
  if (reduction == "mul") return mul(ec, old, upd);
  if (reduction == "max") return max(ec, dtype, old, upd);
  Value* less = is_fp(dtype) ? b.CreateFCmpOLT(upd, old)
                             : (is_signed_int(dtype) ? b.CreateICmpSLT(upd, old) : b.CreateICmpULT(upd, old));
  Value* r = b.CreateSelect(less, upd, old);
  if (!is_fp(dtype)) return r;
  return b.CreateSelect(b.CreateFCmpUNO(old, upd), b.CreateFAdd(old, upd), r);
}

Status emit_scatter_nd(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::TensorType& data = ec.graph.value(node.inputs[0]).type;
  const ir::TensorType& indices = ec.graph.value(node.inputs[1]).type;
  const std::vector<int64_t>& dd = data.shape.dims();
  const std::vector<int64_t>& id = indices.shape.dims();
  const auto k = static_cast<size_t>(id.back());
  const int64_t slice = product(dd, k, dd.size());
  const int64_t rows = product(id, 0, id.size() - 1);
  const std::string reduction = reduction_of(node);
  const ir::DType dt = data.dtype;
  Type* et = bits_type(ec.ctx, dt);
  Value* src = operand_ptr(ec, node.inputs[0]);
  Value* upd = operand_ptr(ec, node.inputs[2]);
  Value* out = operand_ptr(ec, node.outputs[0]);
  Range once = tile_items(ec, 1);
  for_range(ec, once.lo, once.hi, 1, [&](Value*) {
    if_then(ec, b.CreateICmpNE(src, out), [&] { copy_run(ec, et, out, src, i64c(ec, product(dd, 0, dd.size()))); });
    if (slice == 0) return;
    for_range(ec, i64c(ec, 0), i64c(ec, rows), 1, [&](Value* row) {
      IndexRow ir = index_row(ec, node, row, 0);
      if_then(ec, ir.ok, [&] {
        Value* from = b.CreateMul(row, i64c(ec, slice));
        for_range(ec, i64c(ec, 0), i64c(ec, slice), 1, [&](Value* s) {
          Value* at = b.CreateAdd(ir.offset, s);
          Value* u = b.CreateAdd(from, s);
          if (reduction == "none") {
            b.CreateStore(b.CreateLoad(et, b.CreateInBoundsGEP(et, upd, u)), b.CreateInBoundsGEP(et, out, at));
            return;
          }
          Value* r = scatter_combine(ec, dt, reduction, load_elem(ec, dt, out, at), load_elem(ec, dt, upd, u));
          store_elem(ec, dt, out, at, r);
        }, "ss");
      });
    }, "sr");
  }, "s1");
  return Status();
}

// Whether x_j (at j) precedes x_i (at i) in top_k's order.
Value* precedes(EmitContext& ec, ir::DType dtype, bool largest, Value* xj, Value* j, Value* xi, Value* i) {
  auto& b = ec.b;
  Value* lower = b.CreateICmpSLT(j, i);
  if (!is_fp(dtype)) {
    const bool s = is_signed_int(dtype);
    Value* better = largest ? (s ? b.CreateICmpSGT(xj, xi) : b.CreateICmpUGT(xj, xi))
                            : (s ? b.CreateICmpSLT(xj, xi) : b.CreateICmpULT(xj, xi));
    return b.CreateOr(better, b.CreateAnd(b.CreateICmpEQ(xj, xi), lower));
  }
  Value* better = largest ? b.CreateFCmpOGT(xj, xi) : b.CreateFCmpOLT(xj, xi);
  Value* j_num = b.CreateFCmpORD(xj, xj);
  Value* numbers = b.CreateAnd(j_num, b.CreateOr(better, b.CreateAnd(b.CreateFCmpOEQ(xj, xi), lower)));
  return b.CreateSelect(b.CreateFCmpUNO(xi, xi), b.CreateOr(j_num, lower), numbers);
}

Status emit_top_k(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::TensorType& tx = ec.graph.value(node.inputs[0]).type;
  const std::vector<int64_t>& dims = tx.shape.dims();
  const int rank = tx.shape.rank();
  int64_t axis = attr_int(node, "axis", -1);
  if (axis < 0) axis += rank;
  const auto ax = static_cast<size_t>(axis);
  const int64_t k = attr_int(node, "k", 0);
  const bool largest = attr_int(node, "largest", 1) != 0;
  const int64_t outer = product(dims, 0, ax), len = dims[ax], inner = product(dims, ax + 1, dims.size());
  const ir::DType dt = tx.dtype;
  Value* X = operand_ptr(ec, node.inputs[0]);
  Value* values = operand_ptr(ec, node.outputs[0]);
  Value* indices = operand_ptr(ec, node.outputs[1]);
  Range once = tile_items(ec, 1);
  if (k == 0) return Status();
  for_range(ec, once.lo, once.hi, 1, [&](Value*) {
    for_range(ec, i64c(ec, 0), i64c(ec, outer * inner), 1, [&](Value* u) {
      Value* o = b.CreateUDiv(u, i64c(ec, inner));
      Value* c = b.CreateURem(u, i64c(ec, inner));
      Value* base = b.CreateAdd(b.CreateMul(o, i64c(ec, len * inner)), c);
      Value* out_base = b.CreateAdd(b.CreateMul(o, i64c(ec, k * inner)), c);
      for_range(ec, i64c(ec, 0), i64c(ec, len), 1, [&](Value* i) {
        Value* xi = load_elem(ec, dt, X, b.CreateAdd(base, b.CreateMul(i, i64c(ec, inner))));
        auto rank_of = for_range_carry(ec, i64c(ec, 0), i64c(ec, len), 1, {i64c(ec, 0)},
                                       [&](Value* j, const std::vector<Value*>& count) {
          Value* xj = load_elem(ec, dt, X, b.CreateAdd(base, b.CreateMul(j, i64c(ec, inner))));
          Value* before = precedes(ec, dt, largest, xj, j, xi, i);
          return std::vector<Value*>{b.CreateAdd(count[0], b.CreateZExt(before, b.getInt64Ty()))};
        }, "tj");
        if_then(ec, b.CreateICmpSLT(rank_of[0], i64c(ec, k)), [&] {
          Value* at = b.CreateAdd(out_base, b.CreateMul(rank_of[0], i64c(ec, inner)));
          store_elem(ec, dt, values, at, xi);
          store_elem(ec, ir::DType::kI64, indices, at, i);
        });
      }, "ti");
    }, "tu");
  }, "t1");
  return Status();
}

}  // namespace

Status emit_index(EmitContext& ec, const ir::Node& node) {
  switch (node.op) {
    case ir::OpKind::kGatherNd: return emit_gather_nd(ec, node);
    case ir::OpKind::kScatterNd: return emit_scatter_nd(ec, node);
    case ir::OpKind::kTopK: return emit_top_k(ec, node);
    default: break;
  }
  return Status(ErrorCode::kInternal, fmt::format("emit_index called for {}", ir::describe_node(ec.graph, node.id)));
}

}  // namespace carve::jit::detail
