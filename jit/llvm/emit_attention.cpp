// Attention as one kernel: O[b] = softmax(chain(Q[b] x K[b])) x V[b] (fusion.h,
// tiling::attention_shape), f32.
//
// One tile per (batch b, block of up to kAttentionRows query rows). The block's scores live in
// a rows x keys buffer on the tile's stack (at most 8 x 2048 floats: 64 KB), never in the arena:
//  1. scores: column chunks of two vectors; per chunk a rows x 2-vector FMA block over
//     the depth (K's rows are contiguous: K is [.., depth, keys]); the fused chain (scale,
//     mask) runs on each vector as it leaves the registers, at the scores' linear index.
//  2. softmax per row in place: max (four accumulators), e = exp(s - max) stored while
//     summed (one accumulator, keys ascending), then times 1 / sum, as the softmax kernel.
//  3. O = P x V: value columns in chunks of two vectors (the last one masked), a rows x
//     2-vector block over the keys, V's rows contiguous.
// Rows past the last query row repeat it (clamped): they compute and store the last row's
// bytes again, so a short block needs no other code. Every sum runs in a fixed order
// inside one tile, so the bytes never depend on the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "carve/jit/tiles.h"
#include "emit.h"
#include "emit_util.h"

namespace carve::jit::detail {

using llvm::Type;
using llvm::Value;
using namespace util;

namespace {

// A compile-time lane mask: lanes [0, on) set.
llvm::Constant* first_lanes(EmitContext& ec, int lanes, int64_t on) {
  std::vector<llvm::Constant*> m;
  for (int l = 0; l < lanes; ++l) m.push_back(l < on ? ec.b.getTrue() : ec.b.getFalse());
  return llvm::ConstantVector::get(m);
}

// Sums step's multiply-adds over i in [0, n) into `count` vector accumulators. With few
// accumulators (a decode step's one-row block) the range is split into up to 4
// interleaved partial sums, so more FMA chains are in flight; they are added at the end
// in a fixed order (the bytes depend on the block's shape only).
std::vector<Value*> fma_sum(EmitContext& ec, llvm::Type* vt, int64_t n, size_t count, const char* name,
                            const std::function<void(Value* i, std::vector<Value*>& acc)>& step) {
  auto& b = ec.b;
  int64_t sets = count >= 8 ? 1 : count >= 4 ? 2 : 4;
  while (sets > 1 && n < sets) sets /= 2;
  const int64_t whole = n / sets * sets;
  auto run = [&](int64_t from, int64_t to, int64_t stride, int64_t parts, std::vector<Value*> init) {
    return for_range_carry(ec, i64c(ec, from), i64c(ec, to), stride, init, [&](Value* i, const std::vector<Value*>& in) {
      std::vector<Value*> out = in;
      for (int64_t p = 0; p < parts; ++p) {
        std::vector<Value*> part(out.begin() + p * count, out.begin() + (p + 1) * count);
        step(b.CreateAdd(i, i64c(ec, p)), part);
        std::copy(part.begin(), part.end(), out.begin() + p * count);
      }
      return out;
    }, name);
  };
  std::vector<Value*> acc(count * static_cast<size_t>(sets), zero(vt));
  if (whole > 0) acc = run(0, whole, sets, sets, acc);
  for (int64_t w = 1; w < sets; w *= 2)
    for (int64_t p = 0; p + w < sets; p += 2 * w)
      for (size_t c = 0; c < count; ++c) acc[p * count + c] = b.CreateFAdd(acc[p * count + c], acc[(p + w) * count + c]);
  acc.resize(count);
  if (whole < n) acc = run(whole, n, 1, 1, acc);
  return acc;
}

}  // namespace

Status emit_attention(EmitContext& ec) {
  auto& b = ec.b;
  const ir::Graph& g = ec.graph;
  const std::vector<ir::NodeId>& nodes = ec.group.nodes;
  const tiling::AttentionShape a = tiling::attention_shape(g, nodes);
  if (!a.valid) return Status(ErrorCode::kInternal, fmt::format("group '{}' is not an attention group", ec.group.name));
  const ir::Node& qk = g.node(nodes.front());
  const ir::Node& pv = g.node(nodes.back());
  Value* Q = operand_ptr(ec, qk.inputs[0]);
  Value* K = operand_ptr(ec, qk.inputs[1]);
  Value* V = operand_ptr(ec, pv.inputs[1]);
  Value* O = operand_ptr(ec, pv.outputs[0]);
  if (!Q || !K || !V || !O) return Status(ErrorCode::kInternal, fmt::format("group '{}': missing operand", ec.group.name));
  // The chain between the first matmul and the softmax (none: an empty epilogue).
  const Epilogue chain = make_chain_epilogue(ec, std::span<const ir::NodeId>(nodes.data(), nodes.size() - 2));

  const ir::DType f32 = ir::DType::kF32;
  Type* ft = b.getFloatTy();
  const int L = ec.vector_width_f32;
  Type* VT = vec_type(ft, L);
  const int64_t R = a.block_rows(), N = a.keys, D = a.depth, DV = a.value_depth, T = a.rows;
  const int64_t blocks = (T + R - 1) / R;
  const llvm::Align align(4);
  Value* S = entry_alloca(ec, ft, R * N, "scores");

  for_units(ec, a.tiles(), [&](Value*, Value* unit) {
    Value* batch = b.CreateUDiv(unit, i64c(ec, blocks));
    Value* row0 = b.CreateMul(b.CreateURem(unit, i64c(ec, blocks)), i64c(ec, R));
    std::vector<Value*> row(static_cast<size_t>(R));  // batch * T + the clamped query row
    for (int64_t r = 0; r < R; ++r)
      row[r] = b.CreateAdd(b.CreateMul(batch, i64c(ec, T)), min_i64(ec, b.CreateAdd(row0, i64c(ec, r)), i64c(ec, T - 1)));
    Value* k_base = b.CreateMul(batch, i64c(ec, D * N));
    Value* v_base = b.CreateMul(batch, i64c(ec, N * DV));

    // 1. Scores for columns [j, j + width * L).
    auto score_chunk = [&](Value* j, int width) {
      std::vector<Value*> acc = fma_sum(ec, VT, D, static_cast<size_t>(R * width), "qk",
                                        [&](Value* k, std::vector<Value*>& out) {
        Value* krow = b.CreateAdd(k_base, b.CreateAdd(b.CreateMul(k, i64c(ec, N)), j));
        std::vector<Value*> kv;
        for (int c = 0; c < width; ++c) kv.push_back(load_n(ec, f32, K, b.CreateAdd(krow, i64c(ec, c * L)), L));
        for (int64_t r = 0; r < R; ++r) {
          Value* q = splat(ec, L, load_elem(ec, f32, Q, b.CreateAdd(b.CreateMul(row[r], i64c(ec, D)), k)));
          for (int c = 0; c < width; ++c) out[r * width + c] = mul_add(ec, q, kv[c], out[r * width + c]);
        }
      });
      for (int64_t r = 0; r < R; ++r) {
        for (int c = 0; c < width; ++c) {
          Value* col = b.CreateAdd(j, i64c(ec, c * L));
          Value* v = acc[r * width + c];
          if (chain) v = chain(ec, v, b.CreateAdd(b.CreateMul(row[r], i64c(ec, N)), col), col);
          store_vec(ec, v, b.CreateGEP(ft, S, b.CreateAdd(i64c(ec, r * N), col)));
        }
      }
    };
    const int64_t pairs = N / (2 * L) * (2 * L);
    if (pairs > 0) for_range(ec, i64c(ec, 0), i64c(ec, pairs), 2 * L, [&](Value* j) { score_chunk(j, 2); }, "sj");
    for (int64_t j = pairs; j < N; j += L) score_chunk(i64c(ec, j), 1);

    // 2. Softmax of each row, in place.
    for (int64_t r = 0; r < R; ++r) {
      Value* srow = b.CreateGEP(ft, S, i64c(ec, r * N));
      auto at = [&](Value* j) { return b.CreateGEP(ft, srow, j); };
      const int chains = N % (4 * L) == 0 ? 4 : 1;
      std::vector<Value*> minit(static_cast<size_t>(chains), splat(ec, L, lowest(ec, f32, ft)));
      std::vector<Value*> m = for_range_carry(ec, i64c(ec, 0), i64c(ec, N), chains * L, minit,
                                              [&](Value* j, const std::vector<Value*>& in) {
        std::vector<Value*> out(in.size());
        for (int c = 0; c < chains; ++c)
          out[c] = max(ec, f32, in[c], load_vec(ec, VT, at(b.CreateAdd(j, i64c(ec, c * L)))));
        return out;
      }, "mx");
      for (int c = 1; c < chains; ++c) m[0] = max(ec, f32, m[0], m[c]);
      Value* mx = splat(ec, L, horizontal(ec, m[0], [&](Value* x, Value* y) { return max(ec, f32, x, y); }));
      Value* sum = for_range_carry(ec, i64c(ec, 0), i64c(ec, N), L, {zero(VT)}, [&](Value* j, const std::vector<Value*>& in) {
        Value* e = exp_nonpos_f32(ec, b.CreateFSub(load_vec(ec, VT, at(j)), mx));
        store_vec(ec, e, at(j));
        return std::vector<Value*>{b.CreateFAdd(in[0], e)};
      }, "ex")[0];
      Value* inv = splat(ec, L, b.CreateFDiv(fpc(ft, 1.0), horizontal(ec, sum, [&](Value* x, Value* y) { return b.CreateFAdd(x, y); })));
      for_range(ec, i64c(ec, 0), i64c(ec, N), L, [&](Value* j) { store_vec(ec, b.CreateFMul(load_vec(ec, VT, at(j)), inv), at(j)); }, "sc");
    }

    // 3. O = P x V, value columns [c0, c0 + cols) per pass (cols <= 2 * L).
    for (int64_t c0 = 0; c0 < DV; c0 += 2 * L) {
      const int64_t cols = std::min<int64_t>(2 * L, DV - c0);
      const int width = static_cast<int>((cols + L - 1) / L);
      std::vector<llvm::Constant*> mask;  // per vector: null when whole
      for (int c = 0; c < width; ++c) {
        const int64_t on = std::min<int64_t>(L, cols - c * L);
        mask.push_back(on == L ? nullptr : first_lanes(ec, L, on));
      }
      std::vector<Value*> acc = fma_sum(ec, VT, N, static_cast<size_t>(R * width), "pv",
                                        [&](Value* n, std::vector<Value*>& out) {
        Value* vrow = b.CreateAdd(v_base, b.CreateAdd(b.CreateMul(n, i64c(ec, DV)), i64c(ec, c0)));
        std::vector<Value*> vv;
        for (int c = 0; c < width; ++c) {
          Value* ptr = b.CreateGEP(ft, V, b.CreateAdd(vrow, i64c(ec, c * L)));
          vv.push_back(mask[c] ? b.CreateMaskedLoad(VT, ptr, align, mask[c], zero(VT)) : load_vec(ec, VT, ptr));
        }
        for (int64_t r = 0; r < R; ++r) {
          Value* p = splat(ec, L, b.CreateLoad(ft, b.CreateGEP(ft, S, b.CreateAdd(i64c(ec, r * N), n))));
          for (int c = 0; c < width; ++c) out[r * width + c] = mul_add(ec, p, vv[c], out[r * width + c]);
        }
      });
      for (int64_t r = 0; r < R; ++r) {
        for (int c = 0; c < width; ++c) {
          Value* ptr = b.CreateGEP(ft, O, b.CreateAdd(b.CreateMul(row[r], i64c(ec, DV)), i64c(ec, c0 + c * L)));
          if (mask[c]) {
            b.CreateMaskedStore(acc[r * width + c], ptr, align, mask[c]);
          } else {
            store_vec(ec, acc[r * width + c], ptr);
          }
        }
      }
    }
  });
  return Status();
}

}  // namespace carve::jit::detail
