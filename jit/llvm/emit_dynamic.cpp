// The ops with a data-dependent extent (ir/extent.h): non_zero, unique and
// non_max_suppression. Each is one tile (its extent is a count over the whole input) and
// writes what the reference writes: the result packed at the actual extent from the
// output's first byte, zeros after it, and the extent to its last output.
//
//  - non_zero: a count, then the coordinates of each nonzero element in row-major order.
//  - unique: slices along the axis (the flattened elements without one) are compared
//    lexicographically, NaN equal to NaN and after every number. inverse_indices first
//    holds each slice's first occurrence; a first occurrence's position is the number of
//    first occurrences before it (sorted: smaller slices; else: earlier ones);
//    O(len^2 * slice), no scratch.
//  - non_max_suppression: per batch and class, the candidates are visited in score order
//    (the best after the one visited before: O(boxes^2)) and checked against the boxes kept
//    so far, read back from the output rows; IoU in f32 with the reference's formula.
#include <llvm/IR/IRBuilder.h>

#include <fmt/format.h>

#include <algorithm>

#include "emit.h"
#include "emit_util.h"

namespace carve::jit::detail {

using llvm::Type;
using llvm::Value;
using namespace util;

namespace {

int64_t numel(const ir::TensorType& t) {
  int64_t n = 1;
  for (int64_t d : t.shape.dims()) n *= d;
  return n;
}

Value* nonzero(EmitContext& ec, Value* v) {
  if (v->getType()->isFloatingPointTy()) return ec.b.CreateFCmpUNE(v, zero(v->getType()));  // NaN is nonzero
  return ec.b.CreateICmpNE(v, zero(v->getType()));
}

void zero_i64(EmitContext& ec, Value* out, int64_t n) {
  for_range(ec, i64c(ec, 0), i64c(ec, n), 1, [&](Value* i) { store_elem(ec, ir::DType::kI64, out, i, i64c(ec, 0)); }, "z");
}

// An i64 variable in the entry block, set to `init`.
Value* variable(EmitContext& ec, Value* init, const char* name) {
  Value* slot = entry_alloca(ec, ec.b.getInt64Ty(), 1, name);
  ec.b.CreateStore(init, slot);
  return slot;
}
Value* get(EmitContext& ec, Value* slot) { return ec.b.CreateLoad(ec.b.getInt64Ty(), slot); }

Status emit_non_zero(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::TensorType& tx = ec.graph.value(node.inputs[0]).type;
  const std::vector<int64_t> dims = tx.shape.rank() == 0 ? std::vector<int64_t>{1} : tx.shape.dims();
  const int64_t n = numel(tx);
  Value* x = operand_ptr(ec, node.inputs[0]);
  Value* out = operand_ptr(ec, node.outputs[0]);
  Value* extent = operand_ptr(ec, node.outputs[1]);
  Range once = tile_items(ec, 1);
  for_range(ec, once.lo, once.hi, 1, [&](Value*) {
    zero_i64(ec, out, static_cast<int64_t>(dims.size()) * n);
    auto found = for_range_carry(ec, i64c(ec, 0), i64c(ec, n), 1, {i64c(ec, 0)}, [&](Value* i, const std::vector<Value*>& c) {
      return std::vector<Value*>{b.CreateAdd(c[0], b.CreateZExt(nonzero(ec, load_elem(ec, tx.dtype, x, i)), b.getInt64Ty()))};
    }, "nc");
    if (n > 0) for_range_carry(ec, i64c(ec, 0), i64c(ec, n), 1, {i64c(ec, 0)}, [&](Value* i, const std::vector<Value*>& c) {
      Value* hit = nonzero(ec, load_elem(ec, tx.dtype, x, i));
      if_then(ec, hit, [&] {
        std::vector<Value*> coords = unravel(ec, i, dims);
        for (size_t d = 0; d < dims.size(); ++d) {
          Value* at = b.CreateAdd(b.CreateMul(i64c(ec, static_cast<int64_t>(d)), found[0]), c[0]);
          store_elem(ec, ir::DType::kI64, out, at, coords[d]);
        }
      });
      return std::vector<Value*>{b.CreateAdd(c[0], b.CreateZExt(hit, b.getInt64Ty()))};
    }, "nw");
    store_elem(ec, ir::DType::kI64, extent, i64c(ec, 0), found[0]);
  }, "n1");
  return Status();
}

// -1, 0 or 1 (i64): a before, equal to, after b (unique's order).
Value* compare_elems(EmitContext& ec, ir::DType dtype, Value* a, Value* b_) {
  auto& b = ec.b;
  auto pick = [&](Value* less, Value* greater) {
    return b.CreateSelect(less, i64c(ec, -1), b.CreateSelect(greater, i64c(ec, 1), i64c(ec, 0)));
  };
  if (!is_fp(dtype)) {
    if (dtype == ir::DType::kBool) return pick(b.CreateICmpULT(a, b_), b.CreateICmpUGT(a, b_));
    const bool s = is_signed_int(dtype);
    return pick(s ? b.CreateICmpSLT(a, b_) : b.CreateICmpULT(a, b_), s ? b.CreateICmpSGT(a, b_) : b.CreateICmpUGT(a, b_));
  }
  Value* na = b.CreateFCmpUNO(a, a);
  Value* nb = b.CreateFCmpUNO(b_, b_);
  Value* numbers = pick(b.CreateFCmpOLT(a, b_), b.CreateFCmpOGT(a, b_));
  Value* nans = pick(b.CreateAnd(b.CreateNot(na), nb), b.CreateAnd(na, b.CreateNot(nb)));
  return b.CreateSelect(b.CreateOr(na, nb), nans, numbers);
}

struct UniqueShape {
  int64_t outer = 1, len = 1, inner = 1;
};

// Compares slices s and t of x lexicographically: -1, 0, 1 (i64).
Value* compare_slices(EmitContext& ec, ir::DType dtype, const UniqueShape& u, Value* x, Value* s, Value* t) {
  auto& b = ec.b;
  auto r = for_range_carry(ec, i64c(ec, 0), i64c(ec, u.outer * u.inner), 1, {i64c(ec, 0)},
                           [&](Value* k, const std::vector<Value*>& c) {
    Value* o = b.CreateUDiv(k, i64c(ec, std::max<int64_t>(1, u.inner)));  // no division by 0 (empty slices)
    Value* in = b.CreateURem(k, i64c(ec, std::max<int64_t>(1, u.inner)));
    Value* row = b.CreateMul(o, i64c(ec, u.len));
    Value* xs = load_elem(ec, dtype, x, b.CreateAdd(b.CreateMul(b.CreateAdd(row, s), i64c(ec, u.inner)), in));
    Value* xt = load_elem(ec, dtype, x, b.CreateAdd(b.CreateMul(b.CreateAdd(row, t), i64c(ec, u.inner)), in));
    Value* here = compare_elems(ec, dtype, xs, xt);
    return std::vector<Value*>{b.CreateSelect(b.CreateICmpEQ(c[0], i64c(ec, 0)), here, c[0])};
  }, "uk");
  return r[0];
}

Status emit_unique(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  // LLVM 22's SLP vectorizer at O2 miscompiles these slice comparisons: an i32/i64 unique
  // along the last axis of a 3x3 tensor came out in the wrong order (O0, O1, O3 and O2
  // without SLP were right). A kernel this small gains nothing from it.
  ec.module.addModuleFlag(llvm::Module::Override, kNoSlpFlag, 1);
  const ir::TensorType& tx = ec.graph.value(node.inputs[0]).type;
  const ir::Shape& ys = ec.graph.value(node.outputs[0]).type.shape;  // x's shape, or x flattened
  const bool sorted = attr_int(node, "sorted", 1) != 0;
  int64_t axis = node.attrs.contains("axis") ? attr_int(node, "axis", 0) : 0;
  if (axis < 0) axis += ys.rank();
  UniqueShape u;
  for (int d = 0; d < ys.rank(); ++d) {
    if (d < axis) u.outer *= ys[d];
    if (d > axis) u.inner *= ys[d];
  }
  u.len = ys[static_cast<int>(axis)];
  const int64_t inner_divisor = std::max<int64_t>(1, u.inner);  // no division by 0 when a slice is empty
  const ir::DType dt = tx.dtype;
  const ir::DType i64 = ir::DType::kI64;
  Value* x = operand_ptr(ec, node.inputs[0]);
  Value* y = operand_ptr(ec, node.outputs[0]);
  Value* indices = operand_ptr(ec, node.outputs[1]);
  Value* inverse = operand_ptr(ec, node.outputs[2]);
  Value* counts = operand_ptr(ec, node.outputs[3]);
  Value* extent = operand_ptr(ec, node.outputs[4]);
  Value* len = i64c(ec, u.len);
  Range once = tile_items(ec, 1);
  for_range(ec, once.lo, once.hi, 1, [&](Value*) {
    for_range(ec, i64c(ec, 0), i64c(ec, u.outer * u.len * u.inner), 1, [&](Value* i) {
      store_elem(ec, dt, y, i, zero(compute_type(ec, dt)));
    }, "uz");
    zero_i64(ec, indices, u.len);
    zero_i64(ec, counts, u.len);
    // inverse[s] = the first slice equal to s.
    for_range(ec, i64c(ec, 0), len, 1, [&](Value* s) {
      auto first = for_range_carry(ec, i64c(ec, 0), s, 1, {s}, [&](Value* t, const std::vector<Value*>& f) {
        Value* open = b.CreateICmpEQ(f[0], s);
        Value* r = f[0];
        // Compare only while no earlier equal slice was found (the loop still runs).
        Value* found = b.CreateAnd(open, b.CreateICmpEQ(compare_slices(ec, dt, u, x, t, s), i64c(ec, 0)));
        return std::vector<Value*>{b.CreateSelect(found, t, r)};
      }, "uf");
      store_elem(ec, i64, inverse, s, first[0]);
    }, "us");
    auto is_first = [&](Value* s) { return b.CreateICmpEQ(load_elem(ec, i64, inverse, s), s); };
    auto unique_count = for_range_carry(ec, i64c(ec, 0), len, 1, {i64c(ec, 0)}, [&](Value* s, const std::vector<Value*>& c) {
      return std::vector<Value*>{b.CreateAdd(c[0], b.CreateZExt(is_first(s), b.getInt64Ty()))};
    }, "uc");
    Value* n_unique = unique_count[0];
    for_range(ec, i64c(ec, 0), len, 1, [&](Value* s) {
      if_then(ec, is_first(s), [&] {
        auto pos = for_range_carry(ec, i64c(ec, 0), len, 1, {i64c(ec, 0)}, [&](Value* t, const std::vector<Value*>& c) {
          Value* before = sorted ? b.CreateICmpSLT(compare_slices(ec, dt, u, x, t, s), i64c(ec, 0)) : b.CreateICmpSLT(t, s);
          return std::vector<Value*>{b.CreateAdd(c[0], b.CreateZExt(b.CreateAnd(is_first(t), before), b.getInt64Ty()))};
        }, "up");
        auto seen = for_range_carry(ec, i64c(ec, 0), len, 1, {i64c(ec, 0)}, [&](Value* t, const std::vector<Value*>& c) {
          Value* same = b.CreateICmpEQ(load_elem(ec, i64, inverse, t), s);
          return std::vector<Value*>{b.CreateAdd(c[0], b.CreateZExt(same, b.getInt64Ty()))};
        }, "un");
        store_elem(ec, i64, indices, pos[0], s);
        store_elem(ec, i64, counts, pos[0], seen[0]);
        for_range(ec, i64c(ec, 0), i64c(ec, u.outer * u.inner), 1, [&](Value* k) {
          Value* o = b.CreateUDiv(k, i64c(ec, inner_divisor));
          Value* in = b.CreateURem(k, i64c(ec, inner_divisor));
          Value* from = b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(o, len), s), i64c(ec, u.inner)), in);
          Value* to = b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(o, n_unique), pos[0]), i64c(ec, u.inner)), in);
          store_elem(ec, dt, y, to, load_elem(ec, dt, x, from));
        }, "uy");
      });
    }, "uw");
    // inverse[s]: from the first occurrence to its position (indices holds the firsts).
    for_range(ec, i64c(ec, 0), len, 1, [&](Value* s) {
      Value* first = load_elem(ec, i64, inverse, s);
      auto pos = for_range_carry(ec, i64c(ec, 0), n_unique, 1, {i64c(ec, 0)}, [&](Value* p, const std::vector<Value*>& c) {
        Value* match = b.CreateICmpEQ(load_elem(ec, i64, indices, p), first);
        return std::vector<Value*>{b.CreateSelect(match, p, c[0])};
      }, "ui");
      store_elem(ec, i64, inverse, s, pos[0]);
    }, "uv");
    store_elem(ec, i64, extent, i64c(ec, 0), n_unique);
  }, "u1");
  return Status();
}

struct Corners {
  Value *x_min, *y_min, *x_max, *y_max;
};

// std::min / std::max of two f32 (the reference's choice when one is NaN).
Value* min_f32(EmitContext& ec, Value* p, Value* q) { return ec.b.CreateSelect(ec.b.CreateFCmpOLT(q, p), q, p); }
Value* max_f32(EmitContext& ec, Value* p, Value* q) { return ec.b.CreateSelect(ec.b.CreateFCmpOLT(p, q), q, p); }

// Box `box` (an index into boxes [.., 4]) as the reference's corners(), in f32.
Corners corners(EmitContext& ec, Value* boxes, Value* box, bool center) {
  auto& b = ec.b;
  Value* at = b.CreateMul(box, i64c(ec, 4));
  Value* v[4];
  for (int j = 0; j < 4; ++j) v[j] = load_elem(ec, ir::DType::kF32, boxes, b.CreateAdd(at, i64c(ec, j)));
  Type* f = b.getFloatTy();
  if (center) {
    Value* half_w = b.CreateFDiv(v[2], fpc(f, 2.0));
    Value* half_h = b.CreateFDiv(v[3], fpc(f, 2.0));
    return {b.CreateFSub(v[0], half_w), b.CreateFSub(v[1], half_h), b.CreateFAdd(v[0], half_w), b.CreateFAdd(v[1], half_h)};
  }
  return {min_f32(ec, v[1], v[3]), min_f32(ec, v[0], v[2]), max_f32(ec, v[1], v[3]), max_f32(ec, v[0], v[2])};
}

// Whether kept box a suppresses box c: IoU > threshold (the reference's suppresses()).
Value* suppresses(EmitContext& ec, const Corners& a, const Corners& c, Value* threshold) {
  auto& b = ec.b;
  Value* ix_min = max_f32(ec, a.x_min, c.x_min);
  Value* iy_min = max_f32(ec, a.y_min, c.y_min);
  Value* ix_max = min_f32(ec, a.x_max, c.x_max);
  Value* iy_max = min_f32(ec, a.y_max, c.y_max);
  Value* overlap = b.CreateAnd(b.CreateFCmpOGT(ix_max, ix_min), b.CreateFCmpOGT(iy_max, iy_min));
  Value* inter = b.CreateFMul(b.CreateFSub(ix_max, ix_min), b.CreateFSub(iy_max, iy_min));
  Value* area_a = b.CreateFMul(b.CreateFSub(a.x_max, a.x_min), b.CreateFSub(a.y_max, a.y_min));
  Value* area_c = b.CreateFMul(b.CreateFSub(c.x_max, c.x_min), b.CreateFSub(c.y_max, c.y_min));
  Value* f0 = zero(b.getFloatTy());
  Value* areas = b.CreateAnd(b.CreateFCmpOGT(area_a, f0), b.CreateFCmpOGT(area_c, f0));
  Value* union_area = b.CreateFSub(b.CreateFAdd(area_a, area_c), inter);
  Value* iou_above = b.CreateFCmpOGT(b.CreateFDiv(inter, union_area), threshold);
  return b.CreateAnd(b.CreateAnd(overlap, areas), b.CreateAnd(b.CreateFCmpOGT(union_area, f0), iou_above));
}

Status emit_non_max_suppression(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::Shape& bs = ec.graph.value(node.inputs[0]).type.shape;
  const int64_t n = bs[1], classes = ec.graph.value(node.inputs[1]).type.shape[1];
  const int64_t pairs = bs[0] * classes;
  const bool center = attr_int(node, "center_point_box", 0) != 0;
  const bool has_score_threshold = node.inputs.size() > 4;
  const ir::DType f32 = ir::DType::kF32, i64 = ir::DType::kI64;
  Value* boxes = operand_ptr(ec, node.inputs[0]);
  Value* scores = operand_ptr(ec, node.inputs[1]);
  Value* out = operand_ptr(ec, node.outputs[0]);
  Value* extent = operand_ptr(ec, node.outputs[1]);
  Range once = tile_items(ec, 1);
  Value* written = variable(ec, i64c(ec, 0), "written");
  Value* prev = variable(ec, i64c(ec, -1), "prev");  // the candidate visited last; -1: none yet
  Value* done = variable(ec, i64c(ec, 0), "done");
  for_range(ec, once.lo, once.hi, 1, [&](Value*) {
    Value* max_per_class = load_elem(ec, i64, operand_ptr(ec, node.inputs[2]), i64c(ec, 0));
    Value* iou_threshold = load_elem(ec, f32, operand_ptr(ec, node.inputs[3]), i64c(ec, 0));
    Value* score_threshold =
        has_score_threshold ? load_elem(ec, f32, operand_ptr(ec, node.inputs[4]), i64c(ec, 0)) : nullptr;
    zero_i64(ec, out, pairs * n * 3);
    b.CreateStore(i64c(ec, 0), written);
    for_range(ec, i64c(ec, 0), i64c(ec, pairs), 1, [&](Value* bc) {
      Value* batch = b.CreateUDiv(bc, i64c(ec, std::max<int64_t>(1, classes)));  // no class: no iteration
      Value* cls = b.CreateURem(bc, i64c(ec, std::max<int64_t>(1, classes)));
      Value* s_base = b.CreateMul(bc, i64c(ec, n));
      Value* box_base = b.CreateMul(batch, i64c(ec, n));
      Value* class_start = get(ec, written);
      b.CreateStore(i64c(ec, -1), prev);
      b.CreateStore(i64c(ec, 0), done);
      for_range(ec, i64c(ec, 0), i64c(ec, n), 1, [&](Value*) {
        Value* kept = b.CreateSub(get(ec, written), class_start);
        Value* open = b.CreateAnd(b.CreateICmpEQ(get(ec, done), i64c(ec, 0)), b.CreateICmpSLT(kept, max_per_class));
        if_then(ec, open, [&] {
          Value* p = get(ec, prev);
          Value* p_score = load_elem(ec, f32, scores, b.CreateAdd(s_base, max_i64(ec, p, i64c(ec, 0))));
          auto best = for_range_carry(ec, i64c(ec, 0), i64c(ec, n), 1, {i64c(ec, -1), zero(b.getFloatTy())},
                                      [&](Value* i, const std::vector<Value*>& c) {
            Value* v = load_elem(ec, f32, scores, b.CreateAdd(s_base, i));
            Value* candidate = has_score_threshold ? b.CreateFCmpOGT(v, score_threshold) : b.CreateFCmpORD(v, v);
            Value* after_prev = b.CreateOr(b.CreateICmpSLT(p, i64c(ec, 0)),
                                           b.CreateOr(b.CreateFCmpOLT(v, p_score),
                                                      b.CreateAnd(b.CreateFCmpOEQ(v, p_score), b.CreateICmpSGT(i, p))));
            Value* better = b.CreateOr(b.CreateICmpSLT(c[0], i64c(ec, 0)), b.CreateFCmpOGT(v, c[1]));
            Value* take = b.CreateAnd(candidate, b.CreateAnd(after_prev, better));
            return std::vector<Value*>{b.CreateSelect(take, i, c[0]), b.CreateSelect(take, v, c[1])};
          }, "nb");
          Value* none = b.CreateICmpSLT(best[0], i64c(ec, 0));
          if_then_else(ec, none, [&] { b.CreateStore(i64c(ec, 1), done); }, [&] {
            b.CreateStore(best[0], prev);
            const Corners box = corners(ec, boxes, b.CreateAdd(box_base, best[0]), center);
            auto hit = for_range_carry(ec, class_start, get(ec, written), 1, {b.getFalse()},
                                       [&](Value* r, const std::vector<Value*>& c) {
              Value* k = load_elem(ec, i64, out, b.CreateAdd(b.CreateMul(r, i64c(ec, 3)), i64c(ec, 2)));
              const Corners other = corners(ec, boxes, b.CreateAdd(box_base, k), center);
              return std::vector<Value*>{b.CreateOr(c[0], suppresses(ec, other, box, iou_threshold))};
            }, "ns");
            if_then(ec, b.CreateNot(hit[0]), [&] {
              Value* row = b.CreateMul(get(ec, written), i64c(ec, 3));
              store_elem(ec, i64, out, row, batch);
              store_elem(ec, i64, out, b.CreateAdd(row, i64c(ec, 1)), cls);
              store_elem(ec, i64, out, b.CreateAdd(row, i64c(ec, 2)), best[0]);
              b.CreateStore(b.CreateAdd(get(ec, written), i64c(ec, 1)), written);
            });
          });
        });
      }, "nv");
    }, "np");
    store_elem(ec, i64, extent, i64c(ec, 0), get(ec, written));
  }, "n1");
  return Status();
}

}  // namespace

Status emit_dynamic(EmitContext& ec, const ir::Node& node) {
  switch (node.op) {
    case ir::OpKind::kNonZero: return emit_non_zero(ec, node);
    case ir::OpKind::kUnique: return emit_unique(ec, node);
    case ir::OpKind::kNonMaxSuppression: return emit_non_max_suppression(ec, node);
    default: break;
  }
  return Status(ErrorCode::kInternal, fmt::format("emit_dynamic called for {}", ir::describe_node(ec.graph, node.id)));
}

}  // namespace carve::jit::detail
