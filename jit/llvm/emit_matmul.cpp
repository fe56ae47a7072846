// matmul / gemm, and the blocked GEMM core shared with conv2d (emit_gemm).
//
// f32/f64: per work unit (batch b, row tile, column tile; see tiling::GemmTiles) the B
// column tile is packed K-block by K-block into a panel (row stride panel_ld, padded so
// rows do not alias in L1), then an MR x NR register-blocked micro-kernel runs with K
// innermost: NR = 2 vectors of W lanes (W = vector_width_f32, halved for f64), MR = 12
// rows with 32 vector registers (AVX-512), 6 with 16. Each k step loads 2 B vectors,
// broadcasts MR A elements and issues 2*MR llvm.fmuladd on <W x T>. Tails: a micro-tile
// of mr < MR rows runs a kernel of MR/3 or 2MR/3 rows (the smallest that covers mr,
// clamping its A rows to the last valid one) and stores its rows as vectors; tiles with
// fewer than NR columns go through a small stack buffer and scalar stores. K blocks after
// the first accumulate into the output (only when the output has the anchor dtype and may
// not alias an input; otherwise the whole K is packed at once in narrower column blocks).
// A with rows a multiple of 4 KiB apart is copied per row micro-tile (pack_a below).
// GEMV (m <= tiling::kGemvMaxRows: classifier heads, decode steps): a micro-kernel of
// exactly m rows over strips of 8/m vectors (at least 2), then single vectors, then single
// columns. B is read from (a) the strip panels the runtime packed at compile time
// (attribute tiling::kPrepackedAttr: each strip's K rows contiguous, streamed once, K
// blocks summed in registers), (b) B itself when row-major (no packing), or (c) the panel
// packed per run. Per output element the K blocks (KC as above), k order and fused
// multiply-adds are the MR-row kernel's, so every variant writes the same bytes.
// Other dtypes (f16/bf16 via float, integers wrapping) use a simple per-element loop.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "emit_gemm.h"

namespace carve::jit::detail {
namespace {

using llvm::Type;
using llvm::Value;
using namespace util;

struct Kernel {
  int w = 8;    // lanes per vector
  int nrv = 2;  // vectors per micro-tile row
  int mr = 6;   // rows per micro-tile
  int nr() const { return w * nrv; }
};

Kernel pick_kernel(EmitContext& ec, ir::DType dtype) {
  Kernel k;
  int wf = std::max(4, ec.vector_width_f32);
  k.w = dtype == ir::DType::kF64 ? std::max(2, wf / 2) : wf;
  k.mr = wf >= 16 ? 12 : 6;  // 32 vector registers with AVX-512, else 16
  return k;
}

Value* scratch_ptr(EmitContext& ec) {
  for (size_t i = 0; i < ec.group.operands.size(); ++i) {
    if (ec.group.operands[i].role == OperandRole::kScratch) return ec.operand_ptrs[i];
  }
  return nullptr;
}

// Work unit u of a GEMM: batch bi, rows [i0, i1) and columns [j0, j1) of C[bi].
struct WorkUnit {
  Value *bi, *i0, *i1, *j0, *j1;
};
WorkUnit work_unit(EmitContext& ec, const tiling::GemmTiles& tiles, Value* u) {
  auto& b = ec.b;
  const int64_t per_gemm = tiles.row_tiles * tiles.col_tiles;
  Value* bi = b.CreateUDiv(u, i64c(ec, per_gemm));
  Value* rem = b.CreateURem(u, i64c(ec, per_gemm));
  Value* i0 = b.CreateMul(b.CreateUDiv(rem, i64c(ec, tiles.col_tiles)), i64c(ec, tiles.rows_per_tile));
  Value* j0 = b.CreateMul(b.CreateURem(rem, i64c(ec, tiles.col_tiles)), i64c(ec, tiles.cols_per_tile));
  return {bi, i0, min_i64(ec, b.CreateAdd(i0, i64c(ec, tiles.rows_per_tile)), i64c(ec, tiles.m)), j0,
          min_i64(ec, b.CreateAdd(j0, i64c(ec, tiles.cols_per_tile)), i64c(ec, tiles.n))};
}

// One k step of the GEMV micro-kernel: arow.size() rows x nv B values (vectors of
// `lanes`, 0: scalars) from B row `brow` (step apart), A elements at arow[r] + koff.
std::vector<Value*> gemv_k_step(EmitContext& ec, Type* T, Value* brow, const std::vector<Value*>& arow,
                                Value* koff, int nv, int lanes, const std::vector<Value*>& in) {
  auto& b = ec.b;
  const int step = lanes == 0 ? 1 : lanes;
  std::vector<Value*> bv;
  for (int v = 0; v < nv; ++v) {
    Value* ptr = b.CreateGEP(T, brow, i64c(ec, v * step));
    bv.push_back(lanes == 0 ? static_cast<Value*>(b.CreateLoad(T, ptr)) : load_vec(ec, vec_type(T, lanes), ptr));
  }
  std::vector<Value*> out(in.size());
  for (size_t r = 0; r < arow.size(); ++r) {
    Value* s = splat_like(ec, b.CreateLoad(T, b.CreateGEP(T, arow[r], koff)), lanes);
    for (int v = 0; v < nv; ++v) {
      size_t x = r * static_cast<size_t>(nv) + static_cast<size_t>(v);
      out[x] = mul_add(ec, s, bv[static_cast<size_t>(v)], in[x]);
    }
  }
  return out;
}

// GEMV columns [begin, end): strip(c, nv, lanes) over strips of `wide` columns (wide / vec
// vectors), then single vectors of `vec` lanes, then single columns (lanes 0).
void gemv_columns(EmitContext& ec, Value* begin, Value* end, int64_t wide, int vec,
                  const std::function<void(Value* c, int nv, int lanes)>& strip) {
  auto& b = ec.b;
  Value* n = b.CreateSub(end, begin);
  Value* wide_end = b.CreateAdd(begin, b.CreateMul(b.CreateUDiv(n, i64c(ec, wide)), i64c(ec, wide)));
  Value* vec_end = b.CreateAdd(begin, b.CreateMul(b.CreateUDiv(n, i64c(ec, vec)), i64c(ec, vec)));
  for_range(ec, begin, wide_end, wide, [&](Value* c) { strip(c, static_cast<int>(wide / vec), vec); }, "gw");
  for_range(ec, wide_end, vec_end, vec, [&](Value* c) { strip(c, 1, vec); }, "gv");
  for_range(ec, vec_end, end, 1, [&](Value* c) { strip(c, 1, 0); }, "gs");
}

}  // namespace

Status emit_gemm(EmitContext& ec, const ir::Node& node, const tiling::GemmTiles& tiles,
                 const GemmSpec& spec, const Epilogue& epilogue) {
  auto& b = ec.b;
  if (tiles.batch == 0 || tiles.m == 0 || tiles.n == 0) return Status();
  const Kernel kn = pick_kernel(ec, spec.dtype);
  const int W = kn.w, NRV = kn.nrv, MR = kn.mr, NR = kn.nr();
  Type* T = storage_type(ec, spec.dtype);
  Type* VT = vec_type(T, W);
  const StoreTarget target = store_target(ec, node, epilogue);
  ir::ValueId target_value =
      epilogue ? ec.graph.node(ec.group.nodes.back()).outputs[0] : node.outputs[0];
  const bool kblock_ok = target.dtype == spec.dtype && !output_may_alias(ec, target_value);

  const int64_t K = tiles.k, N_total = tiles.n;
  const int64_t units = tiles.tiles();
  // GEMV: every row tile has all m <= kGemvMaxRows rows (rows_per_tile >= m), so the
  // micro-kernel has exactly m rows, and strips of wide / vec vectors keep >= 8
  // accumulators (tiling::gemv_strips).
  const bool gemv = tiles.m <= tiling::kGemvMaxRows && tiles.rows_per_tile >= tiles.m;
  const int gemv_rows = static_cast<int>(tiles.m);
  const tiling::GemvStrips strips = tiling::gemv_strips(tiles.m, spec.dtype, ec.vector_width_f32);
  // Pre-packed B: streamed strip by strip, no panel (the `streamed` branch below).
  const bool streamed = gemv && spec.b_prepacked;
  // Pre-packed B with more rows: the MR-row kernel reads the strips of NR columns in
  // place (no per-run packing); the last, narrower strip is gathered.
  const bool panels = !gemv && spec.b_prepacked;
  if (spec.b_prepacked && (strips.vec != W || strips.wide != spec.strips.wide || spec.strips.vec != W ||
                           (panels && strips.wide != NR))) {
    return Status(ErrorCode::kInternal,
                  fmt::format("{}: B pre-packed for strips of {}/{} columns, the kernel needs {}/{} (m {})",
                              ir::describe_node(ec.graph, node.id), spec.strips.wide, spec.strips.vec,
                              strips.wide, strips.vec, tiles.m));
  }
  const int64_t chunk = units_per_kernel_tile(ec, units);
  const int64_t slots = (units + chunk - 1) / chunk;
  // The panel lives in the group's scratch (slot per kernel tile) when the group has
  // enough; else on the stack, with a K block of at most 64 rows to bound the frame.
  Value* scratch = scratch_ptr(ec);
  if (scratch && ec.group.scratch_bytes < slots * tiles.panel_bytes) scratch = nullptr;
  // Pre-packed B is read in place: no panel, no scratch (compute_op_scratch_bytes is 0).
  const bool prepacked = streamed || panels;
  int64_t KC = scratch || prepacked ? tiles.kc : std::min<int64_t>(tiles.kc, 64);
  int64_t ldp = tiles.panel_ld, ncb = tiles.cols_per_tile;
  const int64_t capacity = KC * tiles.panel_ld;  // panel elements
  if (K > KC && !kblock_ok) {
    // Pack all of K at once, in column blocks narrow enough to fit the panel.
    int64_t cols = capacity / K - 16;
    ncb = cols / NR * NR;
    if (streamed || panels) {
      ncb = tiles.cols_per_tile;  // pre-packed B needs no panel: only KC = K matters
    } else if (ncb < NR) {
      return Status(ErrorCode::kUnsupported,
                    fmt::format("{}: K {} too large for an unblocked panel",
                                ir::describe_node(ec.graph, node.id), K));
    }
    KC = K;
    ldp = ncb + 16;
  }
  const bool kblocked = K > KC;
  const int64_t panel_bytes = tiles.panel_bytes;  // scratch slot stride
  Value* stack_panel = scratch ? nullptr
                       : prepacked ? static_cast<Value*>(llvm::ConstantPointerNull::get(b.getPtrTy()))
                                   : entry_alloca(ec, T, capacity, "panel");
  Value* edge = entry_alloca(ec, T, static_cast<int64_t>(MR) * NR, "edge");
  // Row-major A whose rows are a multiple of 4 KiB apart (K = 1024, 2048, 3072...): the
  // MR rows a micro-kernel broadcasts from share L1 sets and evict each other (a K = 1024
  // GEMM ran ~10 % slower than K = 1000 or 1040). Each row micro-tile's A block is then
  // copied a_ld elements apart once per K block and the column strips run inside it.
  const int64_t elem_bytes = static_cast<int64_t>(T->getPrimitiveSizeInBits() / 8);
  const bool pack_a = spec.a_cs == 1 && spec.a_rs > 0 && (spec.a_rs * elem_bytes) % 4096 == 0;
  const int64_t a_ld = KC + 16;
  Value* a_pack = pack_a ? entry_alloca(ec, T, static_cast<int64_t>(MR) * a_ld, "apack") : nullptr;
  Value* vzero = zero(VT);
  const bool direct = gemv && spec.b_direct && spec.b_ld > 0 && !output_may_alias(ec, target_value);

  // The final value of C(row, col) (scalar: lanes 0) from its K sum.
  auto final_store = [&](Value* bi, Value* obase, Value* v, Value* row, Value* col, int lanes) {
    Value* lin = b.CreateAdd(obase, b.CreateAdd(b.CreateMul(row, i64c(ec, spec.ldc)), col));
    if (spec.alpha != 1.0) v = b.CreateFMul(v, fpc(v->getType(), spec.alpha));
    if (spec.cterm) v = b.CreateFAdd(v, spec.cterm(bi, row, col, lanes));
    store_result(ec, target, spec.dtype, epilogue, v, lin, spec.cols_are_last_dim ? col : nullptr);
  };

  if (streamed) {
    // Per strip (columns c.., width w, K rows contiguous at c * K): K blocks of KC rows,
    // each summed from zero with k ascending and added to the previous blocks' sum as
    // the blocked path adds it to the output (+0 for the first) -- the same bytes.
    for_units(ec, units, [&](Value*, Value* u) {
      auto [bi, i0, i1, j0, j1] = work_unit(ec, tiles, u);
      Value* abase = spec.a_base(bi);
      Value* obase = spec.out_base(bi);
      Value* bp = spec.b_prepacked(bi);
      std::vector<Value*> arow(static_cast<size_t>(gemv_rows));
      for (int r = 0; r < gemv_rows; ++r)
        arow[static_cast<size_t>(r)] = b.CreateGEP(T, abase, b.CreateMul(b.CreateAdd(i0, i64c(ec, r)), i64c(ec, spec.a_rs)));
      auto strip = [&](Value* c, int nv, int lanes) {
        Type* AT = lanes == 0 ? T : static_cast<Type*>(vec_type(T, lanes));
        const int step = lanes == 0 ? 1 : lanes;
        const int64_t width = static_cast<int64_t>(nv) * step;
        Value* bcol = b.CreateGEP(T, bp, b.CreateMul(c, i64c(ec, K)));
        std::vector<Value*> init(static_cast<size_t>(gemv_rows * nv), zero(AT));
        std::vector<Value*> sum = for_range_carry(ec, i64c(ec, 0), i64c(ec, K), KC, init,
                                                  [&](Value* k0, const std::vector<Value*>& prev) {
          Value* kend = min_i64(ec, b.CreateAdd(k0, i64c(ec, KC)), i64c(ec, K));
          std::vector<Value*> acc = for_range_carry(ec, k0, kend, 1, init,
                                                    [&](Value* k, const std::vector<Value*>& in) {
            return gemv_k_step(ec, T, b.CreateGEP(T, bcol, b.CreateMul(k, i64c(ec, width))), arow,
                               b.CreateMul(k, i64c(ec, spec.a_cs)), nv, lanes, in);
          }, "sk");
          if (!kblocked) return acc;
          Value* first = b.CreateICmpEQ(k0, i64c(ec, 0));
          std::vector<Value*> out(acc.size());
          for (size_t x = 0; x < acc.size(); ++x)
            out[x] = b.CreateFAdd(acc[x], b.CreateSelect(first, zero(AT), prev[x]));
          return out;
        }, "sb");
        for (int r = 0; r < gemv_rows; ++r) {
          for (int v = 0; v < nv; ++v) {
            final_store(bi, obase, sum[static_cast<size_t>(r * nv + v)], b.CreateAdd(i0, i64c(ec, r)),
                        b.CreateAdd(c, i64c(ec, v * step)), lanes);
          }
        }
      };
      // Column tiles start at multiples of 128 here, which strips.wide divides (tiles.h).
      gemv_columns(ec, j0, j1, strips.wide, W, strip);
    });
    return Status();
  }

  for_units(ec, units, [&](Value* t, Value* u) {
    Value* buf = stack_panel;
    if (scratch) buf = b.CreateGEP(b.getInt8Ty(), scratch, b.CreateMul(t, i64c(ec, panel_bytes)));
    auto [bi, i0, i1, j0, j1] = work_unit(ec, tiles, u);
    Value* abase = spec.a_base(bi);
    Value* obase = spec.out_base(bi);

    for_range(ec, j0, j1, ncb, [&](Value* jb) {
      Value* jn = min_i64(ec, i64c(ec, ncb), b.CreateSub(j1, jb));
      for_range(ec, i64c(ec, 0), i64c(ec, K), KC, [&](Value* k0) {
        Value* kc = min_i64(ec, i64c(ec, KC), b.CreateSub(i64c(ec, K), k0));
        if (!direct && !panels) spec.pack_b(bi, k0, kc, jb, jn, buf, ldp);
        Value* first = kblocked ? b.CreateICmpEQ(k0, i64c(ec, 0)) : b.getTrue();
        Value* last = kblocked ? b.CreateICmpEQ(b.CreateAdd(k0, kc), i64c(ec, K)) : b.getTrue();

        // Finishes one result (scalar: lanes 0) at row `row`, column `col`.
        auto finish = [&](Value* val, Value* row, Value* col, int lanes) {
          Value* lin = b.CreateAdd(obase, b.CreateAdd(b.CreateMul(row, i64c(ec, spec.ldc)), col));
          auto final_store = [&](Value* v) {
            if (spec.alpha != 1.0) v = b.CreateFMul(v, fpc(v->getType(), spec.alpha));
            if (spec.cterm) v = b.CreateFAdd(v, spec.cterm(bi, row, col, lanes));
            store_result(ec, target, spec.dtype, epilogue, v, lin, spec.cols_are_last_dim ? col : nullptr);
          };
          if (!kblocked) {
            final_store(val);
            return;
          }
          Value* prev = load_n(ec, spec.dtype, target.ptr, lin, lanes);
          val = b.CreateFAdd(val, b.CreateSelect(first, zero(val->getType()), prev));
          if_then_else(
              ec, last, [&] { final_store(val); },
              [&] {
                if (lanes == 0) {
                  store_elem(ec, spec.dtype, target.ptr, lin, val);
                } else {
                  store_vec(ec, val, elem_ptr(ec, spec.dtype, target.ptr, lin));
                }
              });
        };

        if (gemv) {
          // B rows k0.. from column jb: the panel, or B itself (direct).
          Value* bsrc = buf;
          int64_t ld = ldp;
          if (direct) {
            bsrc = b.CreateGEP(T, spec.b_direct(bi),
                               b.CreateAdd(b.CreateMul(k0, i64c(ec, spec.b_ld)), jb));
            ld = spec.b_ld;
          }
          std::vector<Value*> arow(static_cast<size_t>(gemv_rows));
          for (int r = 0; r < gemv_rows; ++r) {
            Value* row = b.CreateAdd(i0, i64c(ec, r));
            arow[static_cast<size_t>(r)] = b.CreateGEP(
                T, abase,
                b.CreateAdd(b.CreateMul(row, i64c(ec, spec.a_rs)), b.CreateMul(k0, i64c(ec, spec.a_cs))));
          }
          // gemv_rows x nv vectors of `lanes` (0: one scalar) at columns p...
          auto strip = [&](Value* p, int nv, int lanes) {
            Type* AT = lanes == 0 ? T : static_cast<Type*>(vec_type(T, lanes));
            const int step = lanes == 0 ? 1 : lanes;
            std::vector<Value*> init(static_cast<size_t>(gemv_rows * nv), zero(AT));
            Value* bcol = b.CreateGEP(T, bsrc, p);
            std::vector<Value*> acc = for_range_carry(ec, i64c(ec, 0), kc, 1, init,
                                                      [&](Value* k, const std::vector<Value*>& in) {
              return gemv_k_step(ec, T, b.CreateGEP(T, bcol, b.CreateMul(k, i64c(ec, ld))), arow,
                                 b.CreateMul(k, i64c(ec, spec.a_cs)), nv, lanes, in);
            }, "gk");
            Value* col = b.CreateAdd(jb, p);
            for (int r = 0; r < gemv_rows; ++r) {
              for (int v = 0; v < nv; ++v) {
                finish(acc[static_cast<size_t>(r * nv + v)], b.CreateAdd(i0, i64c(ec, r)),
                       b.CreateAdd(col, i64c(ec, v * step)), lanes);
              }
            }
          };
          gemv_columns(ec, i64c(ec, 0), jn, strips.wide, W, strip);
          return;
        }

        // One strip of NR columns at p, for every row micro-tile or only the one at `row`
        // when given (pack_a); `tail`: the last strip of pre-packed B, columns
        // [N / NR * NR, N), stored as vector strips then single columns (gathered).
        auto strip_body = [&](Value* p, bool tail, Value* row) {
          Value* nr = min_i64(ec, i64c(ec, NR), b.CreateSub(jn, p));
          Value* bpanel = b.CreateGEP(T, buf, p);
          int64_t bld = ldp;
          Value* bp = panels ? spec.b_prepacked(bi) : nullptr;
          std::vector<Value*> tail_off, tail_step;  // per vector: <W x i64> element offsets at k 0, per k
          if (panels && !tail) {
            bpanel = b.CreateGEP(T, bp, b.CreateAdd(b.CreateMul(b.CreateAdd(jb, p), i64c(ec, K)),
                                                    b.CreateMul(k0, i64c(ec, NR))));
            bld = NR;
          } else if (panels) {
            const int64_t wide_end = N_total / NR * NR, vec_end = N_total / W * W;
            for (int v = 0; v < NRV; ++v) {
              Value* off = llvm::PoisonValue::get(vec_type(b.getInt64Ty(), W));
              Value* step = off;
              for (int l = 0; l < W; ++l) {
                // Columns past the last one repeat it (their results are discarded).
                Value* j = b.CreateAdd(jb, min_i64(ec, b.CreateAdd(p, i64c(ec, v * W + l)),
                                                   b.CreateSub(jn, i64c(ec, 1))));
                Value* in_vec = b.CreateICmpSLT(j, i64c(ec, vec_end));
                Value* c = b.CreateSelect(
                    in_vec,
                    b.CreateAdd(i64c(ec, wide_end),
                                b.CreateMul(b.CreateUDiv(b.CreateSub(j, i64c(ec, wide_end)), i64c(ec, W)), i64c(ec, W))),
                    j);
                Value* w = b.CreateSelect(in_vec, i64c(ec, W), i64c(ec, 1));
                Value* o = b.CreateAdd(b.CreateMul(c, i64c(ec, K)), b.CreateSub(j, c));
                o = b.CreateAdd(o, b.CreateMul(k0, w));
                off = b.CreateInsertElement(off, o, static_cast<uint64_t>(l));
                step = b.CreateInsertElement(step, w, static_cast<uint64_t>(l));
              }
              tail_off.push_back(off);
              tail_step.push_back(step);
            }
          }
          // The NRV vectors of B row k (k from the K block's start).
          auto load_b = [&](Value* k) {
            std::vector<Value*> bv;
            if (panels && tail) {
              llvm::Constant* all = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(static_cast<unsigned>(W)),
                                                                   b.getTrue());
              Value* kv = b.CreateVectorSplat(static_cast<unsigned>(W), k);
              for (int v = 0; v < NRV; ++v) {
                Value* idx = b.CreateAdd(tail_off[static_cast<size_t>(v)], b.CreateMul(kv, tail_step[static_cast<size_t>(v)]));
                Value* ptrs = b.CreateGEP(T, bp, idx);
                bv.push_back(b.CreateMaskedGather(VT, ptrs, llvm::Align(T->getScalarSizeInBits() / 8), all));
              }
              return bv;
            }
            Value* brow = b.CreateGEP(T, bpanel, b.CreateMul(k, i64c(ec, bld)));
            for (int v = 0; v < NRV; ++v)
              bv.push_back(load_vec(ec, VT, b.CreateGEP(T, brow, i64c(ec, v * W))));
            return bv;
          };
          auto row_body = [&](Value* i) {
            Value* mr = min_i64(ec, i64c(ec, MR), b.CreateSub(i1, i));
            // The micro-kernel of `rows` rows (MR, or fewer for a tail); `uniform` rows
            // are i..i+rows-1, else clamped to mr-1. Accumulators of rows past `rows` are 0.
            auto micro = [&](int rows, bool uniform) {
              std::vector<Value*> arow(static_cast<size_t>(rows));
              for (int r = 0; r < rows; ++r) {
                if (pack_a) {  // copied by the row loop, clamped rows included
                  arow[static_cast<size_t>(r)] = b.CreateGEP(T, a_pack, i64c(ec, r * a_ld));
                  continue;
                }
                Value* row = b.CreateAdd(i, i64c(ec, r));
                if (!uniform) row = b.CreateAdd(i, min_i64(ec, i64c(ec, r), b.CreateSub(mr, i64c(ec, 1))));
                arow[static_cast<size_t>(r)] = b.CreateGEP(
                    T, abase,
                    b.CreateAdd(b.CreateMul(row, i64c(ec, spec.a_rs)), b.CreateMul(k0, i64c(ec, spec.a_cs))));
              }
              std::vector<Value*> init(static_cast<size_t>(rows * NRV), vzero);
              std::vector<Value*> acc = for_range_carry(ec, i64c(ec, 0), kc, 1, init,
                                     [&](Value* k, const std::vector<Value*>& acc) {
                std::vector<Value*> bv = load_b(k);
                Value* koff = b.CreateMul(k, i64c(ec, spec.a_cs));
                std::vector<Value*> out(acc.size());
                for (int r = 0; r < rows; ++r) {
                  Value* a = b.CreateLoad(T, b.CreateGEP(T, arow[static_cast<size_t>(r)], koff));
                  Value* s = splat(ec, W, a);
                  for (int v = 0; v < NRV; ++v) {
                    size_t x = static_cast<size_t>(r * NRV + v);
                    out[x] = mul_add(ec, s, bv[static_cast<size_t>(v)], acc[x]);
                  }
                }
                return out;
              }, "kk");
              acc.resize(static_cast<size_t>(MR * NRV), vzero);
              return acc;
            };
            // Full rows: the MR-row kernel. A tail of mr < MR rows runs the smallest of
            // the MR/3, 2MR/3 and MR-row kernels that covers it (clamped rows are
            // computed and dropped), not MR rows for a few. Only the tails this tiling
            // has are emitted. Each element's K sum is the same in every variant, so
            // are its bytes.
            std::vector<int> tail_kernels;  // rows of each tail kernel, ascending
            for (int64_t t : {tiles.rows_per_tile % MR, (tiles.m - (tiles.row_tiles - 1) * tiles.rows_per_tile) % MR}) {
              if (t == 0) continue;
              int rows = MR;
              for (int cand : {MR / 3, 2 * (MR / 3)}) {
                if (cand >= t && cand < rows) rows = cand;
              }
              if (std::find(tail_kernels.begin(), tail_kernels.end(), rows) == tail_kernels.end())
                tail_kernels.push_back(rows);
            }
            std::sort(tail_kernels.begin(), tail_kernels.end());
            auto* jb2 = llvm::BasicBlock::Create(ec.ctx, "mk.join", ec.fn);
            std::vector<std::pair<std::vector<Value*>, llvm::BasicBlock*>> results;
            // Emits `kernel` where `take` holds, else continues at a new block.
            auto variant = [&](Value* take, const std::function<std::vector<Value*>()>& kernel) {
              auto* body = llvm::BasicBlock::Create(ec.ctx, "mk.body", ec.fn);
              auto* next = llvm::BasicBlock::Create(ec.ctx, "mk.pick", ec.fn);
              b.CreateCondBr(take, body, next);
              b.SetInsertPoint(body);
              std::vector<Value*> acc_v = kernel();
              results.emplace_back(std::move(acc_v), b.GetInsertBlock());
              b.CreateBr(jb2);
              b.SetInsertPoint(next);
            };
            if (tail_kernels.empty()) {
              results.emplace_back(micro(MR, true), nullptr);
              b.CreateBr(jb2);
              results.back().second = b.GetInsertBlock();
            } else {
              variant(b.CreateICmpEQ(mr, i64c(ec, MR)), [&] { return micro(MR, true); });
              for (size_t ti = 0; ti + 1 < tail_kernels.size(); ++ti) {
                const int rows = tail_kernels[ti];
                variant(b.CreateICmpSLE(mr, i64c(ec, rows)), [&] { return micro(rows, false); });
              }
              std::vector<Value*> acc_v = micro(tail_kernels.back(), false);
              results.emplace_back(std::move(acc_v), b.GetInsertBlock());
              b.CreateBr(jb2);
            }
            b.SetInsertPoint(jb2);
            std::vector<Value*> acc(static_cast<size_t>(MR * NRV));
            for (size_t x = 0; x < acc.size(); ++x) {
              llvm::PHINode* phi = b.CreatePHI(VT, static_cast<unsigned>(results.size()));
              for (auto& [vals, from] : results) phi->addIncoming(vals[x], from);
              acc[x] = phi;
            }
            Value* colp = b.CreateAdd(jb, p);
            // Spills the tile and finishes its mr rows of full vectors row by row (the
            // epilogue's code is emitted NRV times, not MR * NRV times).
            auto spill = [&] {
              for (int r = 0; r < MR; ++r) {
                for (int v = 0; v < NRV; ++v) {
                  store_vec(ec, acc[static_cast<size_t>(r * NRV + v)],
                            b.CreateGEP(T, edge, i64c(ec, r * NR + v * W)));
                }
              }
            };
            auto finish_rows_spilled = [&] {
              spill();
              for_range(ec, i64c(ec, 0), mr, 1, [&](Value* r) {
                for (int v = 0; v < NRV; ++v) {
                  Value* val = load_vec(ec, VT, b.CreateGEP(T, edge, b.CreateAdd(b.CreateMul(r, i64c(ec, NR)), i64c(ec, v * W))));
                  finish(val, b.CreateAdd(i, r), b.CreateAdd(colp, i64c(ec, v * W)), W);
                }
              }, "fr");
            };
            Value* full_cols = b.CreateICmpEQ(nr, i64c(ec, NR));
            Value* full = b.CreateAnd(b.CreateICmpEQ(mr, i64c(ec, MR)), full_cols);
            if_then_else(
                ec, full_cols,
                [&] {
                  if (!epilogue) {
                    if_then_else(
                        ec, full,
                        [&] {
                          for (int r = 0; r < MR; ++r) {
                            for (int v = 0; v < NRV; ++v) {
                              finish(acc[static_cast<size_t>(r * NRV + v)], b.CreateAdd(i, i64c(ec, r)),
                                     b.CreateAdd(colp, i64c(ec, v * W)), W);
                            }
                          }
                        },
                        finish_rows_spilled);
                    return;
                  }
                  finish_rows_spilled();
                },
                [&] {
                  spill();
                  for_range(ec, i64c(ec, 0), mr, 1, [&](Value* r) {
                    for_range(ec, i64c(ec, 0), nr, 1, [&](Value* c) {
                      Value* v = b.CreateLoad(
                          T, b.CreateGEP(T, edge, b.CreateAdd(b.CreateMul(r, i64c(ec, NR)), c)));
                      finish(v, b.CreateAdd(i, r), b.CreateAdd(colp, c), 0);
                    }, "ec");
                  }, "er");
                });
          };
          if (row) {
            row_body(row);
          } else {
            for_range(ec, i0, i1, MR, row_body, "ir");
          }
        };
        auto strips = [&](Value* row) {
          if (!panels) {
            for_range(ec, i64c(ec, 0), jn, NR, [&](Value* p) { strip_body(p, false, row); }, "jp");
          } else {
            // Full strips: global columns below N / NR * NR (jb is a multiple of NR).
            Value* full = min_i64(ec, jn, max_i64(ec, i64c(ec, 0), b.CreateSub(i64c(ec, N_total / NR * NR), jb)));
            for_range(ec, i64c(ec, 0), full, NR, [&](Value* p) { strip_body(p, false, row); }, "jp");
            for_range(ec, full, jn, NR, [&](Value* p) { strip_body(p, true, row); }, "jt");
          }
        };
        if (!pack_a) {
          strips(nullptr);
        } else {
          // Row micro-tiles outside the strips: each one's MR x kc block of A (rows past
          // the tile's end clamped to its last, as the micro-kernels read them) is copied
          // once, a_ld apart, then every strip reads it.
          for_range(ec, i0, i1, MR, [&](Value* i) {
            Value* last = b.CreateSub(min_i64(ec, i64c(ec, MR), b.CreateSub(i1, i)), i64c(ec, 1));
            for (int r = 0; r < MR; ++r) {
              Value* row = b.CreateAdd(i, min_i64(ec, i64c(ec, r), last));
              Value* src = b.CreateGEP(T, abase, b.CreateAdd(b.CreateMul(row, i64c(ec, spec.a_rs)), k0));
              copy_run(ec, T, b.CreateGEP(T, a_pack, i64c(ec, r * a_ld)), src, kc);
            }
            strips(i);
          }, "ia");
        }
      }, "kc");
    }, "jb");
  });
  return Status();
}

namespace {

// The simple path for any dtype: per output element, a K loop. The GemmSpec part gives
// A, the output and alpha (pack_b and cterm are not used).
struct SimpleGemm : GemmSpec {
  std::function<Value*(Value* b)> b_base;
  int64_t b_rs = 0, b_cs = 0;
  double beta = 1.0;
  // c term as a compute-type scalar (null when absent).
  std::function<Value*(Value* b, Value* i, Value* j)> c_elem;
};

Status emit_simple_gemm(EmitContext& ec, const ir::Node& node, const tiling::GemmTiles& tiles,
                        const SimpleGemm& s, const Epilogue& epilogue) {
  auto& b = ec.b;
  if (tiles.batch == 0 || tiles.m == 0 || tiles.n == 0) return Status();
  const StoreTarget target = store_target(ec, node, epilogue);
  Type* ct = compute_type(ec, s.dtype);
  bool fp = is_fp(s.dtype);
  for_units(ec, tiles.tiles(), [&](Value*, Value* u) {
    auto [bi, i0, i1, j0, j1] = work_unit(ec, tiles, u);
    Value* ab = s.a_base(bi);
    Value* bb = s.b_base(bi);
    Value* ob = s.out_base(bi);
    for_range(ec, i0, i1, 1, [&](Value* i) {
      for_range(ec, j0, j1, 1, [&](Value* j) {
        Value* a_row = b.CreateMul(i, i64c(ec, s.a_rs));
        Value* b_col = b.CreateMul(j, i64c(ec, s.b_cs));
        std::vector<Value*> acc = for_range_carry(
            ec, i64c(ec, 0), i64c(ec, tiles.k), 1, {zero(ct)},
            [&](Value* k, const std::vector<Value*>& c) {
              Value* av = load_elem(ec, s.dtype, ab, b.CreateAdd(a_row, b.CreateMul(k, i64c(ec, s.a_cs))));
              Value* bv = load_elem(ec, s.dtype, bb, b.CreateAdd(b_col, b.CreateMul(k, i64c(ec, s.b_rs))));
              return std::vector<Value*>{fp ? b.CreateFAdd(c[0], b.CreateFMul(av, bv))
                                            : b.CreateAdd(c[0], b.CreateMul(av, bv))};
            });
        Value* v = acc[0];
        if (fp) {
          if (s.alpha != 1.0) v = b.CreateFMul(v, fpc(ct, s.alpha));
          if (s.c_elem) v = b.CreateFAdd(v, b.CreateFMul(s.c_elem(bi, i, j), fpc(ct, s.beta)));
        } else if (s.alpha == 1.0 && s.beta == 1.0) {
          if (s.c_elem) v = b.CreateAdd(v, s.c_elem(bi, i, j));
        } else {
          // alpha * acc + beta * c in double, converted back saturating (cast rules).
          Type* d = b.getDoubleTy();
          bool sgn = is_signed_int(s.dtype);
          Value* x = b.CreateFMul(sgn ? b.CreateSIToFP(v, d) : b.CreateUIToFP(v, d), fpc(d, s.alpha));
          if (s.c_elem) {
            Value* c = s.c_elem(bi, i, j);
            x = b.CreateFAdd(x, b.CreateFMul(sgn ? b.CreateSIToFP(c, d) : b.CreateUIToFP(c, d),
                                             fpc(d, s.beta)));
          }
          v = b.CreateIntrinsic(sgn ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
                                {ct, d}, {x});
        }
        Value* lin = b.CreateAdd(ob, b.CreateAdd(b.CreateMul(i, i64c(ec, s.ldc)), j));
        store_result(ec, target, s.dtype, epilogue, v, lin, s.cols_are_last_dim ? j : nullptr);
      }, "j");
    }, "i");
  });
  return Status();
}

// Linear batch offset of operand `strides` for output batch index bi.
Value* batch_offset(EmitContext& ec, Value* bi, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& strides) {
  auto& b = ec.b;
  Value* off = i64c(ec, 0);
  Value* rem = bi;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] == 1) continue;
    Value* coord = b.CreateURem(rem, i64c(ec, dims[d]));
    rem = b.CreateUDiv(rem, i64c(ec, dims[d]));
    if (strides[d] != 0) off = b.CreateAdd(off, b.CreateMul(coord, i64c(ec, strides[d])));
  }
  return off;
}

}  // namespace

Status emit_matmul(EmitContext& ec, const ir::Node& node, const Epilogue& epilogue) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  const ir::DType dtype = g.value(node.inputs[0]).type.dtype;
  const tiling::GemmTiles tiles = tiling::matmul_tiles(g, node);
  const tiling::MatmulShape shape = tiling::matmul_shape(g, node);
  Value* A = operand_ptr(ec, node.inputs[0]);
  Value* B = operand_ptr(ec, node.inputs[1]);
  const int64_t M = tiles.m, N = tiles.n, K = tiles.k;

  bool gemm = node.op == ir::OpKind::kGemm;
  auto attr_i = [&](const char* n, int64_t d) {
    auto it = node.attrs.find(n);
    return it != node.attrs.end() && it->second.is_int() ? it->second.as_int() : d;
  };
  auto attr_f = [&](const char* n, double d) {
    auto it = node.attrs.find(n);
    if (it == node.attrs.end()) return d;
    if (it->second.is_float()) return it->second.as_float();
    if (it->second.is_int()) return static_cast<double>(it->second.as_int());
    return d;
  };
  bool ta = gemm && attr_i("trans_a", 0) != 0;
  bool tb = gemm && attr_i("trans_b", 0) != 0;
  double alpha = gemm ? attr_f("alpha", 1.0) : 1.0;
  double beta = gemm ? attr_f("beta", 1.0) : 1.0;
  int64_t a_rs = ta ? 1 : K, a_cs = ta ? M : 1;
  int64_t b_rs = tb ? 1 : N, b_cs = tb ? K : 1;

  auto a_base = [&](Value* bi) -> Value* {
    if (gemm) return A;
    return elem_ptr(ec, dtype, A, batch_offset(ec, bi, shape.batch_dims, shape.a_batch_strides));
  };
  auto b_base = [&](Value* bi) -> Value* {
    if (gemm) return B;
    return elem_ptr(ec, dtype, B, batch_offset(ec, bi, shape.batch_dims, shape.b_batch_strides));
  };
  auto out_base = [&](Value* bi) -> Value* { return b.CreateMul(bi, i64c(ec, M * N)); };

  // gemm's c, broadcast to [M, N]: element (i, j) at i * c_rs + j * c_cs.
  Value* C = nullptr;
  int64_t c_rs = 0, c_cs = 0;
  if (gemm && node.inputs.size() > 2) {
    C = operand_ptr(ec, node.inputs[2]);
    const auto& cd = g.value(node.inputs[2]).type.shape.dims();
    if (!cd.empty() && cd.back() != 1) c_cs = 1;
    if (cd.size() >= 2 && cd[cd.size() - 2] != 1) c_rs = cd.back();
  }

  SimpleGemm s;
  s.dtype = dtype;
  s.a_base = a_base;
  s.a_rs = a_rs;
  s.a_cs = a_cs;
  s.out_base = out_base;
  s.ldc = N;
  s.alpha = alpha;
  s.out_value = node.outputs[0];
  s.cols_are_last_dim = true;  // C is [..., m, n]
  bool packed = (dtype == ir::DType::kF32 || dtype == ir::DType::kF64) && K > 0;
  // Set by the runtime's compile-time weight pre-packing: {strip width, vector lanes}.
  std::optional<std::vector<int64_t>> prepacked_b;
  if (auto it = node.attrs.find(tiling::kPrepackedAttr); it != node.attrs.end() && it->second.is_ints() &&
      it->second.as_ints().size() == 2)
    prepacked_b = it->second.as_ints();
  if (packed) {
    GemmSpec spec = s;
    Type* T = storage_type(ec, dtype);
    spec.pack_b = [&, T](Value* bi, Value* k0, Value* kc, Value* j0, Value* nc, Value* dst,
                         int64_t ld) {
      Value* src = b_base(bi);
      if (!tb) {
        for_range(ec, i64c(ec, 0), kc, 1, [&](Value* kk) {
          Value* s = b.CreateGEP(T, src, b.CreateAdd(b.CreateMul(b.CreateAdd(k0, kk), i64c(ec, N)), j0));
          copy_run(ec, T, b.CreateGEP(T, dst, b.CreateMul(kk, i64c(ec, ld))), s, nc);
        }, "pk");
      } else {
        for_range(ec, i64c(ec, 0), nc, 1, [&](Value* jj) {
          Value* s = b.CreateGEP(T, src, b.CreateAdd(b.CreateMul(b.CreateAdd(j0, jj), i64c(ec, K)), k0));
          for_range(ec, i64c(ec, 0), kc, 1, [&](Value* kk) {
            b.CreateStore(b.CreateLoad(T, b.CreateGEP(T, s, kk)),
                          b.CreateGEP(T, dst, b.CreateAdd(b.CreateMul(kk, i64c(ec, ld)), jj)));
          }, "pt");
        }, "pj");
      }
    };
    if (prepacked_b) {  // B is a constant in the GEMV strip layout (tiles.h)
      spec.b_prepacked = b_base;
      spec.strips = {prepacked_b->at(0), prepacked_b->at(1)};
    } else if (!tb) {  // row-major B: the GEMV path streams it without packing
      spec.b_direct = b_base;
      spec.b_ld = N;
    }
    if (C) {
      spec.cterm = [&, T](Value*, Value* i, Value* j, int lanes) -> Value* {
        Value* idx = b.CreateAdd(b.CreateMul(i, i64c(ec, c_rs)), b.CreateMul(j, i64c(ec, c_cs)));
        Value* v;
        if (lanes == 0) {
          v = load_elem(ec, dtype, C, idx);
        } else if (c_cs == 1) {
          v = load_vec(ec, vec_type(T, lanes), elem_ptr(ec, dtype, C, idx));
        } else {
          v = splat(ec, lanes, load_elem(ec, dtype, C, idx));
        }
        if (beta != 1.0) v = b.CreateFMul(v, fpc(v->getType(), beta));
        return v;
      };
    }
    Status st = emit_gemm(ec, node, tiles, spec, epilogue);
    if (st.code() != ErrorCode::kUnsupported || prepacked_b) return st;
  }
  if (prepacked_b) {
    return Status(ErrorCode::kInternal, fmt::format("{}: B pre-packed, but no packed-B kernel for {} with m {}",
                                                    ir::describe_node(ec.graph, node.id),
                                                    ir::dtype_name(dtype), M));
  }

  s.b_base = b_base;
  s.b_rs = b_rs;
  s.b_cs = b_cs;
  s.beta = beta;
  if (C) {
    s.c_elem = [&](Value*, Value* i, Value* j) -> Value* {
      return load_elem(ec, dtype, C,
                       b.CreateAdd(b.CreateMul(i, i64c(ec, c_rs)), b.CreateMul(j, i64c(ec, c_cs))));
    };
  }
  return emit_simple_gemm(ec, node, tiles, s, epilogue);
}

}  // namespace carve::jit::detail
