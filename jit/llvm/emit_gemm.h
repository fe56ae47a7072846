// The batched, blocked GEMM of matmul, gemm and conv2d (defined in emit_matmul.cpp).
#pragma once

#include <functional>

#include "carve/jit/tiles.h"
#include "emit_util.h"

namespace carve::jit::detail {

// The batched, blocked GEMM used by matmul, gemm and conv2d (f32/f64):
//   C[b](i, j) = epilogue(alpha * sum_k A[b](i, k) * B[b](k, j) + cterm(b, i, j))
// Per work unit (batch b, row tile, column tile of tiling::GemmTiles) it packs a K-block
// of B's column tile into a panel (scratch slot of the kernel tile, or a stack buffer)
// and runs an MR x (2 vectors) register-blocked FMA micro-kernel, K innermost.

struct GemmSpec {
  ir::DType dtype = ir::DType::kF32;  // f32 or f64
  // Address of A[b](0, 0); element (i, k) at + i * a_rs + k * a_cs.
  std::function<llvm::Value*(llvm::Value* b)> a_base;
  int64_t a_rs = 0, a_cs = 1;
  // Packs B[b] rows [k0, k0 + kc) x columns [j0, j0 + nc) into dst (row stride ld
  // elements); columns past nc may be left unset.
  std::function<void(llvm::Value* b, llvm::Value* k0, llvm::Value* kc, llvm::Value* j0,
                     llvm::Value* nc, llvm::Value* dst, int64_t ld)>
      pack_b;
  // Optional: address of B[b](0, 0) when B is row-major in memory (element (k, j) at
  // + k * b_ld + j). The GEMV path (m <= tiling::kGemvMaxRows) then streams B from there instead
  // of packing it; absent, or when the output may alias an input, it reads packed panels.
  std::function<llvm::Value*(llvm::Value* b)> b_direct;
  int64_t b_ld = 0;
  // Optional: address of B[b] pre-packed in the GEMV strip layout (tiling::pack_gemv_b
  // with `strips`). Only for m <= tiling::kGemvMaxRows; the K loop then streams each
  // strip's contiguous panel, K blocks summed in registers (the blocked GEMM's order).
  std::function<llvm::Value*(llvm::Value* b)> b_prepacked;
  tiling::GemvStrips strips;
  // Linear index (in the anchor output) of C[b](0, 0); element (i, j) at + i * ldc + j.
  std::function<llvm::Value*(llvm::Value* b)> out_base;
  int64_t ldc = 0;
  double alpha = 1.0;
  // Optional term added after alpha: scalar (lanes 0) or <lanes x T> for columns j...
  std::function<llvm::Value*(llvm::Value* b, llvm::Value* i, llvm::Value* j, int lanes)> cterm;
  ir::ValueId out_value = ir::kNoValue;  // anchor output value
  // C's columns are the output's last dim (matmul/gemm; not conv's [o, h*w] view): the
  // epilogue then reads a bias by column (Epilogue's last_dim_index).
  bool cols_are_last_dim = false;
};
Status emit_gemm(EmitContext& ec, const ir::Node& node, const tiling::GemmTiles& tiles,
                 const GemmSpec& spec, const Epilogue& epilogue);

}  // namespace carve::jit::detail
