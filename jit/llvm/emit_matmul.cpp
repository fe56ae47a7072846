// matmul / gemm, and the blocked GEMM core shared with conv2d (emit_gemm).
//
// f32/f64: per work unit (batch b, row tile, column tile; see tiling::GemmTiles) the B
// column tile is packed K-block by K-block into a panel (row stride panel_ld, padded so
// rows do not alias in L1), then an MR x NR register-blocked micro-kernel runs with K
// innermost: NR = 2 vectors of W lanes (W = vector_width_f32, halved for f64), MR = 12
// rows with 32 vector registers (AVX-512), 6 with 16. Each k step loads 2 B vectors,
// broadcasts MR A elements and issues 2*MR llvm.fmuladd on <W x T>. Tails: a micro-tile
// with fewer rows clamps its A rows to the last valid one; partial tiles go through a
// small stack buffer and scalar stores. K blocks after the first accumulate into the
// output (only when the output has the anchor dtype and may not alias an input;
// otherwise the whole K is packed at once in narrower column blocks).
// Other dtypes (f16/bf16 via float, integers wrapping) use a simple per-element loop.
#include <fmt/format.h>

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

  const int64_t K = tiles.k;
  const int64_t units = tiles.tiles();
  const int64_t chunk = units_per_kernel_tile(ec, units);
  const int64_t slots = (units + chunk - 1) / chunk;
  // The panel lives in the group's scratch (slot per kernel tile) when the group has
  // enough; else on the stack, with a K block of at most 64 rows to bound the frame.
  Value* scratch = scratch_ptr(ec);
  if (scratch && ec.group.scratch_bytes < slots * tiles.panel_bytes) scratch = nullptr;
  int64_t KC = scratch ? tiles.kc : std::min<int64_t>(tiles.kc, 64);
  int64_t ldp = tiles.panel_ld, ncb = tiles.cols_per_tile;
  const int64_t capacity = KC * tiles.panel_ld;  // panel elements
  if (K > KC && !kblock_ok) {
    // Pack all of K at once, in column blocks narrow enough to fit the panel.
    int64_t cols = capacity / K - 16;
    ncb = cols / NR * NR;
    if (ncb < NR) {
      return Status(ErrorCode::kUnsupported,
                    fmt::format("{}: K {} too large for an unblocked panel",
                                ir::describe_node(ec.graph, node.id), K));
    }
    KC = K;
    ldp = ncb + 16;
  }
  const bool kblocked = K > KC;
  const int64_t panel_bytes = tiles.panel_bytes;  // scratch slot stride
  Value* stack_panel = scratch ? nullptr : entry_alloca(ec, T, capacity, "panel");
  Value* edge = entry_alloca(ec, T, static_cast<int64_t>(MR) * NR, "edge");
  Value* vzero = zero(VT);

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
        spec.pack_b(bi, k0, kc, jb, jn, buf, ldp);
        Value* first = kblocked ? b.CreateICmpEQ(k0, i64c(ec, 0)) : b.getTrue();
        Value* last = kblocked ? b.CreateICmpEQ(b.CreateAdd(k0, kc), i64c(ec, K)) : b.getTrue();

        // Finishes one result (scalar: lanes 0) at row `row`, column `col`.
        auto finish = [&](Value* val, Value* row, Value* col, int lanes) {
          Value* lin = b.CreateAdd(obase, b.CreateAdd(b.CreateMul(row, i64c(ec, spec.ldc)), col));
          auto final_store = [&](Value* v) {
            if (spec.alpha != 1.0) v = b.CreateFMul(v, fpc(v->getType(), spec.alpha));
            if (spec.cterm) v = b.CreateFAdd(v, spec.cterm(bi, row, col, lanes));
            store_result(ec, target, spec.dtype, epilogue, v, lin);
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

        for_range(ec, i64c(ec, 0), jn, NR, [&](Value* p) {
          Value* nr = min_i64(ec, i64c(ec, NR), b.CreateSub(jn, p));
          Value* bpanel = b.CreateGEP(T, buf, p);
          for_range(ec, i0, i1, MR, [&](Value* i) {
            Value* mr = min_i64(ec, i64c(ec, MR), b.CreateSub(i1, i));
            // The micro-kernel; `uniform` rows are i..i+MR-1, else clamped to mr-1.
            auto micro = [&](bool uniform) {
              std::vector<Value*> arow(static_cast<size_t>(MR));
              for (int r = 0; r < MR; ++r) {
                Value* row = b.CreateAdd(i, i64c(ec, r));
                if (!uniform) row = b.CreateAdd(i, min_i64(ec, i64c(ec, r), b.CreateSub(mr, i64c(ec, 1))));
                arow[static_cast<size_t>(r)] = b.CreateGEP(
                    T, abase,
                    b.CreateAdd(b.CreateMul(row, i64c(ec, spec.a_rs)), b.CreateMul(k0, i64c(ec, spec.a_cs))));
              }
              std::vector<Value*> init(static_cast<size_t>(MR * NRV), vzero);
              return for_range_carry(ec, i64c(ec, 0), kc, 1, init,
                                     [&](Value* k, const std::vector<Value*>& acc) {
                Value* brow = b.CreateGEP(T, bpanel, b.CreateMul(k, i64c(ec, ldp)));
                std::vector<Value*> bv;
                for (int v = 0; v < NRV; ++v)
                  bv.push_back(load_vec(ec, VT, b.CreateGEP(T, brow, i64c(ec, v * W))));
                Value* koff = b.CreateMul(k, i64c(ec, spec.a_cs));
                std::vector<Value*> out(acc.size());
                for (int r = 0; r < MR; ++r) {
                  Value* a = b.CreateLoad(T, b.CreateGEP(T, arow[static_cast<size_t>(r)], koff));
                  Value* s = splat(ec, W, a);
                  for (int v = 0; v < NRV; ++v) {
                    size_t x = static_cast<size_t>(r * NRV + v);
                    out[x] = mul_add(ec, s, bv[static_cast<size_t>(v)], acc[x]);
                  }
                }
                return out;
              }, "kk");
            };
            // acc = full rows ? micro(uniform) : micro(clamped), merged with phis.
            auto* ub = llvm::BasicBlock::Create(ec.ctx, "mk.full", ec.fn);
            auto* cb = llvm::BasicBlock::Create(ec.ctx, "mk.edge", ec.fn);
            auto* jb2 = llvm::BasicBlock::Create(ec.ctx, "mk.join", ec.fn);
            b.CreateCondBr(b.CreateICmpEQ(mr, i64c(ec, MR)), ub, cb);
            b.SetInsertPoint(ub);
            std::vector<Value*> acc_u = micro(true);
            llvm::BasicBlock* ub_end = b.GetInsertBlock();
            b.CreateBr(jb2);
            b.SetInsertPoint(cb);
            std::vector<Value*> acc_c = micro(false);
            llvm::BasicBlock* cb_end = b.GetInsertBlock();
            b.CreateBr(jb2);
            b.SetInsertPoint(jb2);
            std::vector<Value*> acc(acc_u.size());
            for (size_t x = 0; x < acc.size(); ++x) {
              llvm::PHINode* phi = b.CreatePHI(VT, 2);
              phi->addIncoming(acc_u[x], ub_end);
              phi->addIncoming(acc_c[x], cb_end);
              acc[x] = phi;
            }
            Value* full = b.CreateAnd(b.CreateICmpEQ(mr, i64c(ec, MR)), b.CreateICmpEQ(nr, i64c(ec, NR)));
            Value* colp = b.CreateAdd(jb, p);
            if_then_else(
                ec, full,
                [&] {
                  if (!epilogue) {
                    for (int r = 0; r < MR; ++r) {
                      for (int v = 0; v < NRV; ++v) {
                        finish(acc[static_cast<size_t>(r * NRV + v)], b.CreateAdd(i, i64c(ec, r)),
                               b.CreateAdd(colp, i64c(ec, v * W)), W);
                      }
                    }
                    return;
                  }
                  // With an epilogue: spill the tile and finish it row by row, so the
                  // epilogue's code is emitted NRV times, not MR * NRV times.
                  for (int r = 0; r < MR; ++r) {
                    for (int v = 0; v < NRV; ++v) {
                      store_vec(ec, acc[static_cast<size_t>(r * NRV + v)],
                                b.CreateGEP(T, edge, i64c(ec, r * NR + v * W)));
                    }
                  }
                  for_range(ec, i64c(ec, 0), i64c(ec, MR), 1, [&](Value* r) {
                    for (int v = 0; v < NRV; ++v) {
                      Value* val = load_vec(ec, VT, b.CreateGEP(T, edge, b.CreateAdd(b.CreateMul(r, i64c(ec, NR)), i64c(ec, v * W))));
                      finish(val, b.CreateAdd(i, r), b.CreateAdd(colp, i64c(ec, v * W)), W);
                    }
                  }, "fr");
                },
                [&] {
                  for (int r = 0; r < MR; ++r) {
                    for (int v = 0; v < NRV; ++v) {
                      store_vec(ec, acc[static_cast<size_t>(r * NRV + v)],
                                b.CreateGEP(T, edge, i64c(ec, r * NR + v * W)));
                    }
                  }
                  for_range(ec, i64c(ec, 0), mr, 1, [&](Value* r) {
                    for_range(ec, i64c(ec, 0), nr, 1, [&](Value* c) {
                      Value* v = b.CreateLoad(
                          T, b.CreateGEP(T, edge, b.CreateAdd(b.CreateMul(r, i64c(ec, NR)), c)));
                      finish(v, b.CreateAdd(i, r), b.CreateAdd(colp, c), 0);
                    }, "ec");
                  }, "er");
                });
          }, "ir");
        }, "jp");
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
        store_result(ec, target, s.dtype, epilogue, v, lin);
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
  bool packed = (dtype == ir::DType::kF32 || dtype == ir::DType::kF64) && K > 0;
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
    if (st.code() != ErrorCode::kUnsupported) return st;
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
