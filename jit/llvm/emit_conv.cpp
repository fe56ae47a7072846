// conv2d (NCHW input, OIHW weight, optional bias, fused epilogue).
//
//  - f32/f64, cg = C/groups > 1: implicit GEMM per (image, group): A = the group's
//    weights [og x cg*kh*kw] (already row-major), B = im2col of the input, packed per K
//    block straight from the input into the GEMM panel (row segments copied with vector
//    runs when stride_w == 1, padding zero-filled), C = the output planes (row stride
//    OH*OW, so NCHW falls out directly); bias is added in the GEMM store. Uses the
//    register-blocked micro-kernel of emit_matmul.cpp (emit_gemm).
//  - f32/f64, cg == 1 (depthwise, incl. channel multipliers): direct, one tile unit per
//    output plane. Per output row, the valid kernel-row range is computed once; interior
//    columns are vectorised over output width (W lanes; stride_w > 1 loads a contiguous
//    run and de-interleaves it with a shuffle), border columns run scalar with clamped,
//    masked loads.
//  - other dtypes: a plain per-output loop (f16/bf16 in float, integers wrapping).
// Padding: the direct and plain paths skip padded taps like the reference. The GEMM path
// packs padding as zeros, so a padded tap adds 0 * w: identical for finite weights, but
// an infinite/NaN weight makes outputs whose window overlaps the padding NaN where the
// reference skips the tap (and an all-zero sum may differ in the sign of zero).
#include "emit_gemm.h"

namespace carve::jit::detail {
namespace {

using llvm::Type;
using llvm::Value;
using namespace util;

// Zero-fills dst[0, n) (runtime n).
void zero_run(EmitContext& ec, Type* t, Value* dst, Value* n) {
  for_range(ec, i64c(ec, 0), n, 1, [&](Value* j) { ec.b.CreateStore(zero(t), ec.b.CreateGEP(t, dst, j)); }, "z");
}

// ceil(a / b) for b > 0 and any sign of a, as i64 IR (a runtime).
Value* ceil_div_i(EmitContext& ec, Value* a, int64_t b) {
  auto& B = ec.b;
  // floor((a + b - 1) / b) with floor division for negatives.
  Value* n = B.CreateAdd(a, i64c(ec, b - 1));
  Value* q = B.CreateSDiv(n, i64c(ec, b));
  Value* r = B.CreateSRem(n, i64c(ec, b));
  Value* adj = B.CreateAnd(B.CreateICmpNE(r, i64c(ec, 0)), B.CreateICmpSLT(n, i64c(ec, 0)));
  return B.CreateSub(q, B.CreateZExt(adj, B.getInt64Ty()));
}

Value* clamp_i(EmitContext& ec, Value* v, Value* lo, Value* hi) {
  return min_i64(ec, max_i64(ec, v, lo), hi);
}

Status emit_gemm_conv(EmitContext& ec, const ir::Node& node, const tiling::ConvShape& c,
                      ir::DType dtype, const Epilogue& epilogue) {
  auto& b = ec.b;
  const tiling::GemmTiles tiles = tiling::conv_gemm_tiles(ec.graph, node);
  Value* X = operand_ptr(ec, node.inputs[0]);
  Value* Wt = operand_ptr(ec, node.inputs[1]);
  Value* Bias = node.inputs.size() > 2 ? operand_ptr(ec, node.inputs[2]) : nullptr;
  Type* T = storage_type(ec, dtype);
  const int64_t K = c.cg * c.kh * c.kw, OHW = c.oh * c.ow, HW = c.h * c.w;
  GemmSpec spec;
  spec.dtype = dtype;
  spec.a_base = [&](Value* bi) {
    return b.CreateGEP(T, Wt, b.CreateMul(b.CreateURem(bi, i64c(ec, c.groups)), i64c(ec, c.og * K)));
  };
  spec.a_rs = K;
  spec.a_cs = 1;
  spec.out_base = [&](Value* bi) { return b.CreateMul(bi, i64c(ec, c.og * OHW)); };
  spec.ldc = OHW;
  spec.out_value = node.outputs[0];
  if (Bias) {
    spec.cterm = [&](Value* bi, Value* i, Value*, int lanes) -> Value* {
      Value* o = b.CreateAdd(b.CreateMul(b.CreateURem(bi, i64c(ec, c.groups)), i64c(ec, c.og)), i);
      Value* v = load_elem(ec, dtype, Bias, o);
      return lanes == 0 ? v : splat(ec, lanes, v);
    };
  }
  const bool pointwise = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.pt == 0 &&
                         c.pl == 0 && c.pb == 0 && c.pr == 0;
  spec.pack_b = [&](Value* bi, Value* k0, Value* kc, Value* j0, Value* nc, Value* dst, int64_t ld) {
    Value* xb = b.CreateGEP(T, X, b.CreateMul(bi, i64c(ec, c.cg * HW)));
    if (pointwise) {
      for_range(ec, i64c(ec, 0), kc, 1, [&](Value* kk) {
        Value* src = b.CreateGEP(T, xb, b.CreateAdd(b.CreateMul(b.CreateAdd(k0, kk), i64c(ec, HW)), j0));
        copy_run(ec, T, b.CreateGEP(T, dst, b.CreateMul(kk, i64c(ec, ld))), src, nc);
      }, "pk");
      return;
    }
    Value* oh_a = b.CreateSDiv(j0, i64c(ec, c.ow));
    Value* oh_b = b.CreateAdd(b.CreateSDiv(b.CreateSub(b.CreateAdd(j0, nc), i64c(ec, 1)), i64c(ec, c.ow)),
                              i64c(ec, 1));
    for_range(ec, i64c(ec, 0), kc, 1, [&](Value* kk) {
      Value* k = b.CreateAdd(k0, kk);
      Value* ci = b.CreateUDiv(k, i64c(ec, c.kh * c.kw));
      Value* r = b.CreateURem(k, i64c(ec, c.kh * c.kw));
      Value* kh = b.CreateUDiv(r, i64c(ec, c.kw));
      Value* kw = b.CreateURem(r, i64c(ec, c.kw));
      Value* drow = b.CreateGEP(T, dst, b.CreateMul(kk, i64c(ec, ld)));
      Value* xc = b.CreateGEP(T, xb, b.CreateMul(ci, i64c(ec, HW)));
      Value* hoff = b.CreateSub(b.CreateMul(kh, i64c(ec, c.dh)), i64c(ec, c.pt));
      Value* woff = b.CreateSub(b.CreateMul(kw, i64c(ec, c.dw)), i64c(ec, c.pl));
      // Output columns whose input column is inside [0, W): [a, e).
      Value* a = ceil_div_i(ec, b.CreateNeg(woff), c.sw);
      Value* e = ceil_div_i(ec, b.CreateSub(i64c(ec, c.w), woff), c.sw);
      for_range(ec, oh_a, oh_b, 1, [&](Value* oh) {
        Value* row0 = b.CreateMul(oh, i64c(ec, c.ow));
        Value* lo = max_i64(ec, i64c(ec, 0), b.CreateSub(j0, row0));
        Value* hi = min_i64(ec, i64c(ec, c.ow), b.CreateSub(b.CreateAdd(j0, nc), row0));
        Value* dseg = b.CreateGEP(T, drow, b.CreateSub(row0, j0));  // + ow
        Value* ih = b.CreateAdd(b.CreateMul(oh, i64c(ec, c.sh)), hoff);
        Value* row_ok = b.CreateAnd(b.CreateICmpSGE(ih, i64c(ec, 0)), b.CreateICmpSLT(ih, i64c(ec, c.h)));
        if_then_else(
            ec, row_ok,
            [&] {
              Value* va = clamp_i(ec, a, lo, hi);
              Value* ve = clamp_i(ec, e, va, hi);
              zero_run(ec, T, b.CreateGEP(T, dseg, lo), b.CreateSub(va, lo));
              Value* xrow = b.CreateGEP(T, xc, b.CreateAdd(b.CreateMul(ih, i64c(ec, c.w)), woff));
              if (c.sw == 1) {
                copy_run(ec, T, b.CreateGEP(T, dseg, va), b.CreateGEP(T, xrow, va), b.CreateSub(ve, va));
              } else {
                for_range(ec, va, ve, 1, [&](Value* ow) {
                  b.CreateStore(b.CreateLoad(T, b.CreateGEP(T, xrow, b.CreateMul(ow, i64c(ec, c.sw)))),
                                b.CreateGEP(T, dseg, ow));
                }, "sc");
              }
              zero_run(ec, T, b.CreateGEP(T, dseg, ve), b.CreateSub(hi, ve));
            },
            [&] { zero_run(ec, T, b.CreateGEP(T, dseg, lo), b.CreateSub(hi, lo)); });
      }, "oh");
    }, "pk");
  };
  return emit_gemm(ec, node, tiles, spec, epilogue);
}

// Valid kernel rows [kh_lo, kh_hi) for output row oh.
std::pair<Value*, Value*> kernel_rows(EmitContext& ec, const tiling::ConvShape& c, Value* oh) {
  auto& b = ec.b;
  Value* t0 = b.CreateSub(i64c(ec, c.pt), b.CreateMul(oh, i64c(ec, c.sh)));  // -(ih at kh=0)
  Value* lo = max_i64(ec, i64c(ec, 0), ceil_div_i(ec, t0, c.dh));
  Value* t1 = b.CreateAdd(t0, i64c(ec, c.h - 1));
  // floor(t1 / dh) + 1, t1 may be negative
  Value* hi = b.CreateAdd(ceil_div_i(ec, b.CreateSub(t1, i64c(ec, c.dh - 1)), c.dh), i64c(ec, 1));
  hi = min_i64(ec, i64c(ec, c.kh), hi);
  hi = max_i64(ec, hi, lo);
  return {lo, hi};
}

// The operands of a conv2d: input, weights, bias (null when absent) and where the result goes.
struct ConvIO {
  Value *X, *Wt, *Bias;
  StoreTarget target;
};
ConvIO conv_io(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue) {
  return {operand_ptr(ec, node.inputs[0]), operand_ptr(ec, node.inputs[1]),
          node.inputs.size() > 2 ? operand_ptr(ec, node.inputs[2]) : nullptr,
          store_target(ec, node, epilogue)};
}

Status emit_direct_conv(EmitContext& ec, const ir::Node& node, const tiling::ConvShape& c,
                        ir::DType dtype, const Epilogue& epilogue) {
  auto& b = ec.b;
  const auto [X, Wt, Bias, target] = conv_io(ec, node, epilogue);
  Type* T = storage_type(ec, dtype);
  const int W = dtype == ir::DType::kF64 ? std::max(2, ec.vector_width_f32 / 2) : ec.vector_width_f32;
  const int64_t HW = c.h * c.w, OHW = c.oh * c.ow, KK = c.kh * c.kw;
  // Interior output columns: every tap of every lane inside [0, W).
  int64_t ow_a = (c.pl + c.sw - 1) / c.sw;
  int64_t num = c.w - 1 + c.pl - (c.kw - 1) * c.dw;
  int64_t ow_b = num < 0 ? 0 : std::min(c.ow, num / c.sw + 1);
  ow_a = std::min(ow_a, c.ow);
  int64_t vec_blocks = ow_b - ow_a >= W ? (ow_b - ow_a) / W : 0;
  int64_t vec_end = ow_a + vec_blocks * W;
  const int64_t span = static_cast<int64_t>(W - 1) * c.sw + 1;  // loaded run per tap
  Type* RT = vec_type(T, static_cast<int>(span));
  std::vector<int> deint;
  for (int l = 0; l < W; ++l) deint.push_back(l * static_cast<int>(c.sw));

  // With an epilogue, border columns (and whole planes narrower than a vector) would run
  // it one element at a time: store the plane raw and finish it in place, vectorised,
  // while it is in cache -- unless the output may share bytes with an epilogue input.
  ir::ValueId target_value = ec.graph.node(ec.group.nodes.back()).outputs[0];
  const bool plane_pass = epilogue && target.dtype == dtype && !output_may_alias(ec, target_value);
  const Epilogue per_store = plane_pass ? Epilogue() : epilogue;
  const tiling::UnitTiles ut = tiling::unit_tiles_for(ec.graph, node);
  for_units(ec, ut.units, [&](Value*, Value* u) {
    Value* o = b.CreateURem(u, i64c(ec, c.o));
    Value* n = b.CreateUDiv(u, i64c(ec, c.o));
    Value* cin = b.CreateAdd(b.CreateMul(n, i64c(ec, c.c)), b.CreateUDiv(o, i64c(ec, c.og)));
    Value* xp = b.CreateGEP(T, X, b.CreateMul(cin, i64c(ec, HW)));
    Value* wp = b.CreateGEP(T, Wt, b.CreateMul(o, i64c(ec, KK)));
    Value* bias = Bias ? load_elem(ec, dtype, Bias, o) : zero(T);
    Value* obase = b.CreateMul(u, i64c(ec, OHW));
    for_range(ec, i64c(ec, 0), i64c(ec, c.oh), 1, [&](Value* oh) {
      auto [kh_lo, kh_hi] = kernel_rows(ec, c, oh);
      Value* ih0 = b.CreateSub(b.CreateMul(oh, i64c(ec, c.sh)), i64c(ec, c.pt));
      Value* lin_row = b.CreateAdd(obase, b.CreateMul(oh, i64c(ec, c.ow)));
      // Vector interior.
      if (vec_blocks > 0) {
        for_range(ec, i64c(ec, ow_a), i64c(ec, vec_end), W, [&](Value* ow) {
          Value* col0 = b.CreateSub(b.CreateMul(ow, i64c(ec, c.sw)), i64c(ec, c.pl));
          auto acc = for_range_carry(ec, kh_lo, kh_hi, 1, {splat(ec, W, bias)},
                                     [&](Value* kh, const std::vector<Value*>& a) {
            Value* ih = b.CreateAdd(ih0, b.CreateMul(kh, i64c(ec, c.dh)));
            Value* xrow = b.CreateGEP(T, xp, b.CreateAdd(b.CreateMul(ih, i64c(ec, c.w)), col0));
            Value* wrow = b.CreateGEP(T, wp, b.CreateMul(kh, i64c(ec, c.kw)));
            Value* v = a[0];
            for (int64_t kw = 0; kw < c.kw; ++kw) {
              Value* wv = splat(ec, W, b.CreateLoad(T, b.CreateGEP(T, wrow, i64c(ec, kw))));
              Value* xv = load_vec(ec, RT, b.CreateGEP(T, xrow, i64c(ec, kw * c.dw)));
              if (c.sw != 1) xv = b.CreateShuffleVector(xv, deint);
              v = mul_add(ec, wv, xv, v);
            }
            return std::vector<Value*>{v};
          }, "kh");
          store_result(ec, target, dtype, per_store, acc[0], b.CreateAdd(lin_row, ow));
        }, "ow");
      }
      // Scalar border columns.
      auto scalar_cols = [&](int64_t from, int64_t to) {
        if (from >= to) return;
        for_range(ec, i64c(ec, from), i64c(ec, to), 1, [&](Value* ow) {
          Value* col0 = b.CreateSub(b.CreateMul(ow, i64c(ec, c.sw)), i64c(ec, c.pl));
          auto acc = for_range_carry(ec, kh_lo, kh_hi, 1, {bias},
                                     [&](Value* kh, const std::vector<Value*>& a) {
            Value* ih = b.CreateAdd(ih0, b.CreateMul(kh, i64c(ec, c.dh)));
            Value* xrow = b.CreateGEP(T, xp, b.CreateMul(ih, i64c(ec, c.w)));
            Value* wrow = b.CreateGEP(T, wp, b.CreateMul(kh, i64c(ec, c.kw)));
            auto r = for_range_carry(ec, i64c(ec, 0), i64c(ec, c.kw), 1, {a[0]},
                                     [&](Value* kw, const std::vector<Value*>& a2) {
              Value* iw = b.CreateAdd(col0, b.CreateMul(kw, i64c(ec, c.dw)));
              Value* ok = b.CreateAnd(b.CreateICmpSGE(iw, i64c(ec, 0)), b.CreateICmpSLT(iw, i64c(ec, c.w)));
              Value* xv = b.CreateLoad(T, b.CreateGEP(T, xrow, clamp_i(ec, iw, i64c(ec, 0), i64c(ec, c.w - 1))));
              Value* wv = b.CreateLoad(T, b.CreateGEP(T, wrow, kw));
              // A padded tap is skipped (not 0 * w, which is NaN for an infinite w).
              return std::vector<Value*>{b.CreateSelect(ok, mul_add(ec, wv, xv, a2[0]), a2[0])};
            }, "kw");
            return r;
          }, "kh");
          store_result(ec, target, dtype, per_store, acc[0], b.CreateAdd(lin_row, ow));
        }, "bw");
      };
      scalar_cols(0, ow_a);
      scalar_cols(vec_end, c.ow);
    }, "oh");
    if (plane_pass) epilogue_in_place(ec, target, epilogue, obase, OHW, W);
  });
  return Status();
}

// Any dtype: per output element, sum over (ci, kh, kw) in the compute type.
Status emit_simple_conv(EmitContext& ec, const ir::Node& node, const tiling::ConvShape& c,
                        ir::DType dtype, const Epilogue& epilogue) {
  auto& b = ec.b;
  const auto [X, Wt, Bias, target] = conv_io(ec, node, epilogue);
  Type* ct = compute_type(ec, dtype);
  const int64_t HW = c.h * c.w, OHW = c.oh * c.ow, KK = c.kh * c.kw;
  // One output plane range [j0, j1) of image n, output channel o.
  auto region = [&](Value* n, Value* o, Value* j0, Value* j1) {
    Value* g = b.CreateUDiv(o, i64c(ec, c.og));
    Value* xbase = b.CreateMul(b.CreateAdd(b.CreateMul(n, i64c(ec, c.c)), b.CreateMul(g, i64c(ec, c.cg))),
                               i64c(ec, HW));
    Value* wbase = b.CreateMul(o, i64c(ec, c.cg * KK));
    Value* obase = b.CreateMul(b.CreateAdd(b.CreateMul(n, i64c(ec, c.o)), o), i64c(ec, OHW));
    for_range(ec, j0, j1, 1, [&](Value* j) {
      Value* oh = b.CreateUDiv(j, i64c(ec, c.ow));
      Value* ow = b.CreateURem(j, i64c(ec, c.ow));
      Value* ih0 = b.CreateSub(b.CreateMul(oh, i64c(ec, c.sh)), i64c(ec, c.pt));
      Value* iw0 = b.CreateSub(b.CreateMul(ow, i64c(ec, c.sw)), i64c(ec, c.pl));
      auto acc = for_range_carry(ec, i64c(ec, 0), i64c(ec, c.cg * KK), 1, {zero(ct)},
                                 [&](Value* k, const std::vector<Value*>& a) {
        Value* ci = b.CreateUDiv(k, i64c(ec, KK));
        Value* r = b.CreateURem(k, i64c(ec, KK));
        Value* ih = b.CreateAdd(ih0, b.CreateMul(b.CreateUDiv(r, i64c(ec, c.kw)), i64c(ec, c.dh)));
        Value* iw = b.CreateAdd(iw0, b.CreateMul(b.CreateURem(r, i64c(ec, c.kw)), i64c(ec, c.dw)));
        Value* ok = b.CreateAnd(
            b.CreateAnd(b.CreateICmpSGE(ih, i64c(ec, 0)), b.CreateICmpSLT(ih, i64c(ec, c.h))),
            b.CreateAnd(b.CreateICmpSGE(iw, i64c(ec, 0)), b.CreateICmpSLT(iw, i64c(ec, c.w))));
        Value* xi = b.CreateAdd(b.CreateAdd(xbase, b.CreateMul(ci, i64c(ec, HW))),
                                b.CreateAdd(b.CreateMul(clamp_i(ec, ih, i64c(ec, 0), i64c(ec, c.h - 1)), i64c(ec, c.w)),
                                            clamp_i(ec, iw, i64c(ec, 0), i64c(ec, c.w - 1))));
        Value* xv = load_elem(ec, dtype, X, xi);
        Value* wv = load_elem(ec, dtype, Wt, b.CreateAdd(wbase, k));
        return std::vector<Value*>{b.CreateSelect(ok, add(ec, a[0], mul(ec, wv, xv)), a[0])};
      }, "k");
      Value* v = acc[0];
      if (Bias) v = add(ec, v, load_elem(ec, dtype, Bias, o));
      store_result(ec, target, dtype, epilogue, v, b.CreateAdd(obase, j));
    }, "j");
  };
  if (c.direct()) {
    const tiling::UnitTiles ut = tiling::unit_tiles_for(ec.graph, node);
    for_units(ec, ut.units, [&](Value*, Value* u) {
      region(b.CreateUDiv(u, i64c(ec, c.o)), b.CreateURem(u, i64c(ec, c.o)), i64c(ec, 0), i64c(ec, OHW));
    });
  } else {
    const tiling::GemmTiles t = tiling::conv_gemm_tiles(ec.graph, node);
    if (t.batch == 0) return Status();
    const int64_t per = t.row_tiles * t.col_tiles;
    for_units(ec, t.tiles(), [&](Value*, Value* u) {
      Value* bi = b.CreateUDiv(u, i64c(ec, per));
      Value* rem = b.CreateURem(u, i64c(ec, per));
      Value* i0 = b.CreateMul(b.CreateUDiv(rem, i64c(ec, t.col_tiles)), i64c(ec, t.rows_per_tile));
      Value* i1 = min_i64(ec, b.CreateAdd(i0, i64c(ec, t.rows_per_tile)), i64c(ec, t.m));
      Value* j0 = b.CreateMul(b.CreateURem(rem, i64c(ec, t.col_tiles)), i64c(ec, t.cols_per_tile));
      Value* j1 = min_i64(ec, b.CreateAdd(j0, i64c(ec, t.cols_per_tile)), i64c(ec, t.n));
      Value* n = b.CreateUDiv(bi, i64c(ec, c.groups));
      Value* g = b.CreateURem(bi, i64c(ec, c.groups));
      for_range(ec, i0, i1, 1, [&](Value* i) {
        region(n, b.CreateAdd(b.CreateMul(g, i64c(ec, c.og)), i), j0, j1);
      }, "oc");
    });
  }
  return Status();
}

}  // namespace

Status emit_conv(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue) {
  const ir::DType dtype = ec.graph.value(node.inputs[0]).type.dtype;
  const tiling::ConvShape c = tiling::conv_shape(ec.graph, node);
  if (c.n == 0 || c.o == 0 || c.oh == 0 || c.ow == 0) return Status();
  bool fast = dtype == ir::DType::kF32 || dtype == ir::DType::kF64;
  if (fast && c.direct()) return emit_direct_conv(ec, node, c, dtype, epilogue);
  if (fast && c.cg * c.kh * c.kw > 0) {
    Status st = emit_gemm_conv(ec, node, c, dtype, epilogue);
    if (st.code() != ErrorCode::kUnsupported) return st;
  }
  return emit_simple_conv(ec, node, c, dtype, epilogue);
}

}  // namespace carve::jit::detail
