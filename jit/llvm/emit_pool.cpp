// max_pool / avg_pool (NCHW, pads, strides, ceil_mode, count_include_pad).
//
// One tile unit per (image, channel) plane. Per output row the window's valid input rows
// are clipped once; interior output columns (whole window inside the row) are computed
// W at a time with vector loads (stride_w > 1: a contiguous run de-interleaved by a
// shuffle), border columns scalar with the window clipped to [0, W). Max propagates NaN
// (the reference's max: ties keep the earlier value); avg divides by the clipped window size (count_include_pad = 0) or by
// the window clipped to the padded extent (count_include_pad = 1), as the reference does.
#include <llvm/IR/Intrinsics.h>

#include "carve/jit/tiles.h"
#include "emit_util.h"

namespace carve::jit::detail {

using llvm::Type;
using llvm::Value;
using namespace util;

Status emit_pool(EmitContext& ec, const ir::Node& node) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  const ir::TensorType& xt = g.value(node.inputs[0]).type;
  const ir::TensorType& yt = g.value(node.outputs[0]).type;
  const ir::DType dtype = xt.dtype;
  const bool is_max = node.op == ir::OpKind::kMaxPool;
  auto kernel = attr_ints(node, "kernel", {1, 1});
  auto strides = attr_ints(node, "strides", {1, 1});
  auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
  const bool include_pad = attr_int(node, "count_include_pad", 0) != 0;
  const int64_t H = xt.shape[2], Wd = xt.shape[3], OH = yt.shape[2], OW = yt.shape[3];
  const int64_t KH = kernel[0], KW = kernel[1], SH = strides[0], SW = strides[1];
  const int64_t PT = pads[0], PL = pads[1], PB = pads[2], PR = pads[3];
  Value* X = operand_ptr(ec, node.inputs[0]);
  Value* Y = operand_ptr(ec, node.outputs[0]);
  Type* ct = compute_type(ec, dtype);
  const bool fp = is_fp(dtype);
  const int lanes = dtype == ir::DType::kF64 ? std::max(2, ec.vector_width_f32 / 2) : ec.vector_width_f32;

  auto combine = [&](Value* acc, Value* v) -> Value* {
    if (!is_max) return add(ec, acc, v);
    return max(ec, dtype, acc, v);
  };
  auto init = [&](Type* t) { return is_max ? lowest(ec, dtype, t) : zero(t); };

  // Interior columns for vectors: window fully inside [0, Wd).
  int64_t ow_a = std::min(OW, (PL + SW - 1) / SW);
  int64_t num = Wd - KW + PL;  // last valid window start + pl
  int64_t ow_b = num < 0 ? 0 : std::min(OW, num / SW + 1);
  const bool vec_ok = fp && ow_b - ow_a >= lanes;
  const int64_t vec_end = vec_ok ? ow_a + (ow_b - ow_a) / lanes * lanes : ow_a;
  // f32/f64 pools run their border columns as masked vector blocks too; capped so that a
  // wide row without an interior (huge padding) does not unroll into many blocks. Not
  // f16/bf16: LLVM 22 turned a one-lane masked store of their truncated lanes into a
  // 32-bit store that also wrote the next column.
  const bool masked_ok = (dtype == ir::DType::kF32 || dtype == ir::DType::kF64) && (vec_ok ? ow_a + (OW - vec_end) : OW) <= 4 * static_cast<int64_t>(lanes);
  const int64_t span = static_cast<int64_t>(lanes - 1) * SW + 1;
  std::vector<int> deint;
  for (int l = 0; l < lanes; ++l) deint.push_back(l * static_cast<int>(SW));
  Type* VC = vec_type(ct, lanes);

  const tiling::UnitTiles ut = tiling::unit_tiles_for(g, node);
  for_units(ec, ut.units, [&](Value*, Value* plane) {
    Value* xbase = b.CreateMul(plane, i64c(ec, H * Wd));
    Value* ybase = b.CreateMul(plane, i64c(ec, OH * OW));
    for_range(ec, i64c(ec, 0), i64c(ec, OH), 1, [&](Value* oh) {
      Value* y0 = b.CreateSub(b.CreateMul(oh, i64c(ec, SH)), i64c(ec, PT));
      Value* y1 = b.CreateAdd(y0, i64c(ec, KH));
      Value* h_lo = max_i64(ec, y0, i64c(ec, 0));
      Value* h_hi = min_i64(ec, y1, i64c(ec, H));
      Value* rows = max_i64(ec, b.CreateSub(h_hi, h_lo), i64c(ec, 0));
      Value* prow = b.CreateSub(min_i64(ec, y1, i64c(ec, H + PB)), y0);
      Value* yrow = b.CreateAdd(ybase, b.CreateMul(oh, i64c(ec, OW)));
      auto finish = [&](Value* acc, Value* count) {
        if (is_max) return acc;
        Value* cf = b.CreateSIToFP(count, acc->getType()->getScalarType());
        if (acc->getType()->isVectorTy()) cf = splat(ec, lanes, cf);
        return b.CreateFDiv(acc, cf);
      };
      if (vec_ok) {
        for_range(ec, i64c(ec, ow_a), i64c(ec, vec_end), lanes, [&](Value* ow) {
          Value* x0 = b.CreateSub(b.CreateMul(ow, i64c(ec, SW)), i64c(ec, PL));
          auto acc = for_range_carry(ec, h_lo, h_hi, 1, {init(VC)},
                                     [&](Value* ih, const std::vector<Value*>& a) {
            Value* row = b.CreateAdd(xbase, b.CreateAdd(b.CreateMul(ih, i64c(ec, Wd)), x0));
            Value* v = a[0];
            for (int64_t kw = 0; kw < KW; ++kw) {
              Type* rt = vec_type(storage_type(ec, dtype), static_cast<int>(span));
              Value* xv = load_vec(ec, rt, elem_ptr(ec, dtype, X, b.CreateAdd(row, i64c(ec, kw))));
              if (SW != 1) xv = b.CreateShuffleVector(xv, deint);
              v = combine(v, from_storage(ec, dtype, xv));
            }
            return std::vector<Value*>{v};
          }, "ih");
          // Interior: the window is inside the row, so count = rows * KW.
          Value* count = include_pad ? b.CreateMul(prow, i64c(ec, KW)) : b.CreateMul(rows, i64c(ec, KW));
          Value* r = finish(acc[0], count);
          store_vec(ec, to_storage(ec, dtype, r), elem_ptr(ec, dtype, Y, b.CreateAdd(yrow, ow)));
        }, "ow");
      }
      // Border columns (and whole rows narrower than a vector) of a float pool: blocks of
      // lanes outputs at compile-time columns, with compile-time masks: a masked load
      // reads only columns inside [0, Wd), lanes whose tap column is outside take init,
      // and a masked store writes only the block's own columns.
      auto masked_block = [&](int64_t ow0, int64_t ow_end) {
        const llvm::Align align(static_cast<uint64_t>(ir::dtype_size(dtype)));
        Type* ST = storage_type(ec, dtype);
        Type* RT = vec_type(ST, static_cast<int>(span));
        auto lane_on = [&](int l) { return ow0 + l < ow_end; };
        auto acc = for_range_carry(ec, h_lo, h_hi, 1, {init(VC)}, [&](Value* ih, const std::vector<Value*>& a) {
          Value* row = b.CreateAdd(xbase, b.CreateMul(ih, i64c(ec, Wd)));
          Value* v = a[0];
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t c0 = ow0 * SW - PL + kw;  // input column of position 0
            std::vector<llvm::Constant*> load_mask, take;
            bool any = false, all_loaded = true, all_taken = true;
            for (int64_t pos = 0; pos < span; ++pos) {
              const bool in = c0 + pos >= 0 && c0 + pos < Wd;
              all_loaded = all_loaded && in;
              load_mask.push_back(in ? b.getTrue() : b.getFalse());
            }
            for (int l = 0; l < lanes; ++l) {
              const int64_t col = c0 + l * SW;
              const bool on = lane_on(l) && col >= 0 && col < Wd;
              any = any || on;
              all_taken = all_taken && on;
              take.push_back(on ? b.getTrue() : b.getFalse());
            }
            if (!any) continue;
            Value* ptr = b.CreateGEP(ST, X, b.CreateAdd(row, i64c(ec, c0)));
            Value* xv = all_loaded ? load_vec(ec, RT, ptr)
                                   : b.CreateMaskedLoad(RT, ptr, align, llvm::ConstantVector::get(load_mask), zero(RT));
            if (SW != 1) xv = b.CreateShuffleVector(xv, deint);
            xv = from_storage(ec, dtype, xv);
            if (!all_taken) xv = b.CreateSelect(llvm::ConstantVector::get(take), xv, init(VC));
            v = combine(v, xv);
          }
          return std::vector<Value*>{v};
        }, "ih");
        Value* r = acc[0];
        if (!is_max) {
          // Per-lane window width, clipped to the row (or to the padded row), times the rows.
          std::vector<llvm::Constant*> widths;
          for (int l = 0; l < lanes; ++l) {
            const int64_t x0 = (ow0 + l) * SW - PL, x1 = x0 + KW;
            int64_t w = include_pad ? std::min(x1, Wd + PR) - x0
                                    : std::max<int64_t>(std::min(x1, Wd) - std::max<int64_t>(x0, 0), 0);
            if (!lane_on(l)) w = 1;  // not stored
            widths.push_back(b.getInt64(static_cast<uint64_t>(w)));
          }
          Value* h = include_pad ? prow : rows;
          Value* count = b.CreateMul(splat(ec, lanes, h), llvm::ConstantVector::get(widths));
          r = b.CreateFDiv(r, b.CreateSIToFP(count, VC));
        }
        Value* out = to_storage(ec, dtype, r);
        Value* yptr = elem_ptr(ec, dtype, Y, b.CreateAdd(yrow, i64c(ec, ow0)));
        if (ow0 + lanes <= ow_end) {
          store_vec(ec, out, yptr);
          return;
        }
        std::vector<llvm::Constant*> sm;
        for (int l = 0; l < lanes; ++l) sm.push_back(lane_on(l) ? b.getTrue() : b.getFalse());
        b.CreateMaskedStore(out, yptr, align, llvm::ConstantVector::get(sm));
      };
      auto border_cols = [&](int64_t from, int64_t to) {
        for (int64_t ow0 = from; ow0 < to; ow0 += lanes) masked_block(ow0, to);
      };
      auto scalar_cols = [&](int64_t from, int64_t to) {
        if (from >= to) return;
        for_range(ec, i64c(ec, from), i64c(ec, to), 1, [&](Value* ow) {
          Value* x0 = b.CreateSub(b.CreateMul(ow, i64c(ec, SW)), i64c(ec, PL));
          Value* x1 = b.CreateAdd(x0, i64c(ec, KW));
          Value* w_lo = max_i64(ec, x0, i64c(ec, 0));
          Value* w_hi = min_i64(ec, x1, i64c(ec, Wd));
          auto acc = for_range_carry(ec, h_lo, h_hi, 1, {init(ct)},
                                     [&](Value* ih, const std::vector<Value*>& a) {
            Value* row = b.CreateAdd(xbase, b.CreateMul(ih, i64c(ec, Wd)));
            return for_range_carry(ec, w_lo, w_hi, 1, {a[0]}, [&](Value* iw, const std::vector<Value*>& a2) {
              return std::vector<Value*>{combine(a2[0], load_elem(ec, dtype, X, b.CreateAdd(row, iw)))};
            }, "iw");
          }, "ih");
          Value* cols = max_i64(ec, b.CreateSub(w_hi, w_lo), i64c(ec, 0));
          Value* pcol = b.CreateSub(min_i64(ec, x1, i64c(ec, Wd + PR)), x0);
          Value* count = include_pad ? b.CreateMul(prow, pcol) : b.CreateMul(rows, cols);
          store_elem(ec, dtype, Y, b.CreateAdd(yrow, ow), finish(acc[0], count));
        }, "bw");
      };
      if (masked_ok && vec_ok) {
        border_cols(0, ow_a);
        border_cols(vec_end, OW);
      } else if (masked_ok) {
        border_cols(0, OW);
      } else {
        scalar_cols(0, ow_a);
        scalar_cols(vec_end, OW);
      }
    }, "oh");
  });
  return Status();
}

}  // namespace carve::jit::detail
