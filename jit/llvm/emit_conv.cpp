// conv2d (NCHW input, OIHW weight, optional bias, fused epilogue).
//
//  - f32/f64, cg = C/groups > 1: implicit GEMM per (image, group): A = the group's
//    weights [og x cg*kh*kw] (already row-major), B = im2col of the input, packed per K
//    block straight from the input into the GEMM panel (row segments copied with vector
//    runs when stride_w == 1, padding zero-filled), C = the output planes (row stride
//    OH*OW, so NCHW falls out directly); bias is added in the GEMM store. Uses the
//    register-blocked micro-kernel of emit_matmul.cpp (emit_gemm).
//  - f32/f64, cg == 1 (depthwise, incl. channel multipliers): direct, one tile unit per
//    output plane, vectorised over output width (W lanes; stride_w > 1 loads a
//    contiguous run and de-interleaves it with a shuffle) on a fixed grid of column
//    chunks. Chunks touching left/right padding, the tail of a row and rows narrower
//    than W (7, 14) stay vectorised with compile-time lane masks (masked loads, padded
//    taps selected away). Output rows go R (<= 4) at a time for independent FMA chains,
//    kernel taps unrolled; blocks touching top/bottom padding are emitted one by one
//    with their padded kernel rows left out (checked at run time when there are many).
//    An epilogue runs over the finished plane in place, vectorised.
//  - other dtypes: a plain per-output loop (f16/bf16 in float, integers wrapping).
// Padding: the direct and plain paths skip padded taps like the reference. The GEMM path
// packs padding as zeros, so a padded tap adds 0 * w: identical for finite weights, but
// an infinite/NaN weight makes outputs whose window overlaps the padding NaN where the
// reference skips the tap (and an all-zero sum may differ in the sign of zero).
#include <algorithm>

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

// Which lanes of output-column chunk [c0, c0 + W) have an in-range input for tap column kw.
std::vector<bool> chunk_lane_mask(const tiling::ConvShape& c, int W, int64_t c0, int64_t kw) {
  std::vector<bool> m(static_cast<size_t>(W), false);
  for (int l = 0; l < W; ++l) {
    const int64_t ow = c0 + l;
    const int64_t iw = ow * c.sw - c.pl + kw * c.dw;
    m[static_cast<size_t>(l)] = ow < c.ow && iw >= 0 && iw < c.w;
  }
  return m;
}

Status emit_direct_conv(EmitContext& ec, const ir::Node& node, const tiling::ConvShape& c,
                        ir::DType dtype, const Epilogue& epilogue) {
  auto& b = ec.b;
  const auto [X, Wt, Bias, target] = conv_io(ec, node, epilogue);
  Type* T = storage_type(ec, dtype);
  // Lanes: the host's vector width, halved while a row fits in half (a 7-wide row in 8
  // lanes rather than 16: half the work where 512-bit ops run as two 256-bit halves).
  int W = dtype == ir::DType::kF64 ? std::max(2, ec.vector_width_f32 / 2) : ec.vector_width_f32;
  while (W > 4 && W / 2 >= c.ow) W /= 2;
  const int64_t HW = c.h * c.w, OHW = c.oh * c.ow, KK = c.kh * c.kw;
  // Output columns in chunks [k * W, k * W + W) on a fixed grid. A chunk is clean when
  // every lane of every tap column is an output column with its input inside [0, w);
  // clean chunks are contiguous and run in a loop with plain vector loads. The others
  // (left/right padding, the tail of a row, a whole row narrower than W) are emitted one
  // by one with compile-time lane masks: masked loads (nothing outside the row is read)
  // and a select that skips padded taps like the reference.
  const int64_t chunks = (c.ow + W - 1) / W;
  std::vector<std::vector<std::vector<bool>>> masks(static_cast<size_t>(chunks));
  std::vector<bool> clean(static_cast<size_t>(chunks), true);
  for (int64_t k = 0; k < chunks; ++k) {
    for (int64_t kw = 0; kw < c.kw; ++kw) {
      masks[k].push_back(chunk_lane_mask(c, W, k * W, kw));
      for (bool v : masks[k].back()) clean[k] = clean[k] && v;
    }
  }
  int64_t clean_a = 0;
  while (clean_a < chunks && !clean[clean_a]) ++clean_a;
  int64_t clean_b = clean_a;
  while (clean_b < chunks && clean[clean_b]) ++clean_b;
  // A tap reads the run of span elements whose every sw-th element is a lane. It is
  // loaded as W-element pieces at offsets 0, W, 2W, ..., the last one ending at the run's
  // end (so nothing past the run is read), and the lanes are gathered from the pieces
  // with shuffles (one two-source permute for stride 2).
  const llvm::Align align(static_cast<uint64_t>(ir::dtype_size(dtype)));
  const int64_t span = static_cast<int64_t>(W - 1) * c.sw + 1;
  Type* VT = vec_type(T, W);
  std::vector<int64_t> piece_off;
  for (int64_t off = 0; off < span; off += W) piece_off.push_back(std::min(off, span - W));
  std::vector<int64_t> lane_piece(static_cast<size_t>(W));  // the piece each lane comes from
  for (int l = 0; l < W; ++l) {
    const int64_t e = l * c.sw;
    size_t p = 0;
    while (!(e >= piece_off[p] && e < piece_off[p] + W)) ++p;
    lane_piece[static_cast<size_t>(l)] = static_cast<int64_t>(p);
  }
  // Loads the tap's lanes at xptr; em: the run's element mask (null: every lane valid).
  auto load_lanes = [&](Value* xptr, const std::vector<bool>* em) -> Value* {
    std::vector<Value*> piece(piece_off.size(), nullptr);
    for (size_t p = 0; p < piece_off.size(); ++p) {
      Value* pp = b.CreateGEP(T, xptr, i64c(ec, piece_off[p]));
      if (!em) {
        piece[p] = load_vec(ec, VT, pp);
        continue;
      }
      std::vector<llvm::Constant*> m;
      bool any = false;
      for (int j = 0; j < W; ++j) {
        const bool on = (*em)[static_cast<size_t>(piece_off[p] + j)];
        any = any || on;
        m.push_back(on ? b.getTrue() : b.getFalse());
      }
      piece[p] = any ? b.CreateMaskedLoad(VT, pp, align, llvm::ConstantVector::get(m), zero(VT)) : zero(VT);
    }
    if (piece.size() == 1) return piece[0];
    Value* cur = nullptr;
    for (size_t p = 1; p < piece.size(); ++p) {
      std::vector<int> sh(static_cast<size_t>(W), -1);
      for (int l = 0; l < W; ++l) {
        const int64_t lp = lane_piece[static_cast<size_t>(l)], e = l * c.sw;
        if (lp < static_cast<int64_t>(p)) sh[l] = cur ? l : static_cast<int>(e - piece_off[0]);
        else if (lp == static_cast<int64_t>(p)) sh[l] = W + static_cast<int>(e - piece_off[p]);
      }
      cur = b.CreateShuffleVector(cur ? cur : piece[0], piece[p], sh);
    }
    return cur;
  };

  // With an epilogue, the tail chunks would run it on masked vectors or one element at a
  // time: store the plane raw and finish it in place, vectorised, while it is in cache --
  // unless the output may share bytes with an epilogue input.
  ir::ValueId target_value = ec.graph.node(ec.group.nodes.back()).outputs[0];
  const bool plane_pass = epilogue && target.dtype == dtype && !output_may_alias(ec, target_value);
  const Epilogue per_store = plane_pass ? Epilogue() : epilogue;
  const tiling::UnitTiles ut = tiling::unit_tiles_for(ec.graph, node);
  // Output rows in blocks of R: R independent accumulator chains per chunk (one chain of
  // kh * kw dependent FMAs per row is latency-bound on narrow planes). Kernel rows and
  // columns are unrolled. A block whose rows all have every kernel row inside [0, h)
  // runs unguarded; others (top/bottom padding, the last oh % R rows) load from the
  // clamped input row and select the tap away when its row is padding. Each output is
  // still bias + its taps in (kh, kw) order, whatever the blocking.
  const int64_t R = std::clamp<int64_t>(256 / std::max<int64_t>(1, KK), 1, 4);
  for_units(ec, ut.units, [&](Value*, Value* u) {
    Value* o = b.CreateURem(u, i64c(ec, c.o));
    Value* n = b.CreateUDiv(u, i64c(ec, c.o));
    Value* cin = b.CreateAdd(b.CreateMul(n, i64c(ec, c.c)), b.CreateUDiv(o, i64c(ec, c.og)));
    Value* xp = b.CreateGEP(T, X, b.CreateMul(cin, i64c(ec, HW)));
    Value* wp = b.CreateGEP(T, Wt, b.CreateMul(o, i64c(ec, KK)));
    Value* bias = Bias ? load_elem(ec, dtype, Bias, o) : zero(T);
    Value* obase = b.CreateMul(u, i64c(ec, OHW));
    // The weights of this plane, splatted once.
    std::vector<Value*> wv(static_cast<size_t>(KK));
    for (int64_t t = 0; t < KK; ++t) wv[t] = splat(ec, W, b.CreateLoad(T, b.CreateGEP(T, wp, i64c(ec, t))));
    // Rows [oh0, oh0 + rows). oh_const >= 0: oh0 is that constant, so padded kernel rows
    // are known here and skipped; else guarded: checked at run time (or not at all when
    // the caller knows every kernel row of the block is inside).
    auto block = [&](Value* oh0, int64_t rows, bool guarded, int64_t oh_const) {
      std::vector<Value*> lin(rows);
      std::vector<std::vector<Value*>> xrow(rows), ok(rows);  // per (row, kernel row)
      std::vector<std::vector<bool>> skip(rows, std::vector<bool>(static_cast<size_t>(c.kh), false));
      for (int64_t r = 0; r < rows; ++r) {
        Value* ohr = b.CreateAdd(oh0, i64c(ec, r));
        lin[r] = b.CreateAdd(obase, b.CreateMul(ohr, i64c(ec, c.ow)));
        Value* ih0 = b.CreateSub(b.CreateMul(ohr, i64c(ec, c.sh)), i64c(ec, c.pt));
        for (int64_t kh = 0; kh < c.kh; ++kh) {
          Value* ih = b.CreateAdd(ih0, i64c(ec, kh * c.dh));
          if (oh_const >= 0) {
            const int64_t ihc = (oh_const + r) * c.sh - c.pt + kh * c.dh;
            skip[r][kh] = ihc < 0 || ihc >= c.h;
          } else if (guarded) {
            ok[r].push_back(b.CreateAnd(b.CreateICmpSGE(ih, i64c(ec, 0)), b.CreateICmpSLT(ih, i64c(ec, c.h))));
            ih = clamp_i(ec, ih, i64c(ec, 0), i64c(ec, c.h - 1));
          }
          xrow[r].push_back(b.CreateGEP(T, xp, b.CreateMul(ih, i64c(ec, c.w))));
        }
      }
      if (oh_const >= 0) guarded = false;
      // One chunk starting at output column ow; k >= 0: a masked chunk (its masks).
      auto chunk = [&](Value* ow, int64_t k) {
        Value* col0 = b.CreateSub(b.CreateMul(ow, i64c(ec, c.sw)), i64c(ec, c.pl));
        std::vector<Value*> acc(rows, splat(ec, W, bias));
        for (int64_t kh = 0; kh < c.kh; ++kh) {
          for (int64_t kw = 0; kw < c.kw; ++kw) {
            bool any = true, all = true;
            if (k >= 0) {
              const auto& m = masks[k][kw];
              any = std::find(m.begin(), m.end(), true) != m.end();
              all = std::find(m.begin(), m.end(), false) == m.end();
            }
            if (!any) continue;  // every lane's tap is padding
            Value* lane_mask = nullptr;
            std::vector<bool> em(static_cast<size_t>(span), false);
            if (!all) {
              std::vector<llvm::Constant*> lm;
              for (int l = 0; l < W; ++l) {
                lm.push_back(masks[k][kw][l] ? b.getTrue() : b.getFalse());
                if (masks[k][kw][l]) em[static_cast<size_t>(l * c.sw)] = true;
              }
              lane_mask = llvm::ConstantVector::get(lm);
            }
            for (int64_t r = 0; r < rows; ++r) {
              if (skip[r][kh]) continue;  // a padded kernel row of this output row
              Value* xptr = b.CreateGEP(T, xrow[r][kh], b.CreateAdd(col0, i64c(ec, kw * c.dw)));
              Value* xv = load_lanes(xptr, all ? nullptr : &em);
              Value* nv = mul_add(ec, wv[kh * c.kw + kw], xv, acc[r]);
              // A padded tap is skipped (not 0 * w, which is NaN for an infinite w).
              if (lane_mask) nv = b.CreateSelect(lane_mask, nv, acc[r]);
              if (guarded) nv = b.CreateSelect(ok[r][kh], nv, acc[r]);
              acc[r] = nv;
            }
          }
        }
        const int64_t lanes = k < 0 ? W : std::min<int64_t>(W, c.ow - k * W);
        for (int64_t r = 0; r < rows; ++r) {
          Value* at = b.CreateAdd(lin[r], ow);
          if (lanes == W) {
            store_result(ec, target, dtype, per_store, acc[r], at);
          } else if (!per_store && target.dtype == dtype) {
            std::vector<llvm::Constant*> sm;
            for (int l = 0; l < W; ++l) sm.push_back(l < lanes ? b.getTrue() : b.getFalse());
            b.CreateMaskedStore(acc[r], elem_ptr(ec, dtype, target.ptr, at), align, llvm::ConstantVector::get(sm));
          } else {
            for (int64_t l = 0; l < lanes; ++l)
              store_result(ec, target, dtype, per_store, b.CreateExtractElement(acc[r], static_cast<uint64_t>(l)),
                           b.CreateAdd(at, i64c(ec, l)));
          }
        }
      };
      for (int64_t k = 0; k < clean_a; ++k) chunk(i64c(ec, k * W), k);
      if (clean_b > clean_a)
        for_range(ec, i64c(ec, clean_a * W), i64c(ec, clean_b * W), W, [&](Value* ow) { chunk(ow, -1); }, "ow");
      for (int64_t k = clean_b; k < chunks; ++k) chunk(i64c(ec, k * W), k);
    };
    // Blocks of R rows, then the last oh % R rows. Blocks whose kernel rows are all inside
    // [0, h) (a contiguous run) loop unguarded; the others -- top/bottom padding, a few --
    // are emitted one by one with their padded kernel rows left out at compile time.
    const int64_t nblocks = c.oh / R;
    auto inside = [&](int64_t bi) {
      const int64_t top = bi * R * c.sh - c.pt;
      return top >= 0 && top + (R - 1) * c.sh + (c.kh - 1) * c.dh < c.h;
    };
    int64_t in_a = 0;
    while (in_a < nblocks && !inside(in_a)) ++in_a;
    int64_t in_b = in_a;
    while (in_b < nblocks && inside(in_b)) ++in_b;
    if (in_a + (nblocks - in_b) <= 8) {
      for (int64_t bi = 0; bi < in_a; ++bi) block(i64c(ec, bi * R), R, false, bi * R);
      if (in_b > in_a)
        for_range(ec, i64c(ec, in_a * R), i64c(ec, in_b * R), R, [&](Value* oh0) { block(oh0, R, false, -1); }, "oh");
      for (int64_t bi = in_b; bi < nblocks; ++bi) block(i64c(ec, bi * R), R, false, bi * R);
    } else if (nblocks > 0) {  // many padded blocks (a kernel about as tall as the input)
      for_range(ec, i64c(ec, 0), i64c(ec, nblocks * R), R, [&](Value* oh0) {
        Value* top = b.CreateSub(b.CreateMul(oh0, i64c(ec, c.sh)), i64c(ec, c.pt));
        Value* bottom = b.CreateAdd(top, i64c(ec, (R - 1) * c.sh + (c.kh - 1) * c.dh));
        Value* in = b.CreateAnd(b.CreateICmpSGE(top, i64c(ec, 0)), b.CreateICmpSLT(bottom, i64c(ec, c.h)));
        if_then_else(ec, in, [&] { block(oh0, R, false, -1); }, [&] { block(oh0, R, true, -1); });
      }, "oh");
    }
    if (nblocks * R < c.oh) block(i64c(ec, nblocks * R), c.oh - nblocks * R, false, nblocks * R);
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
