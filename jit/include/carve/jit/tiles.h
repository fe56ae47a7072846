// Tile spaces of the JIT's compute ops (matmul, gemm, conv2d, max/avg_pool,
// global_avg_pool, reduce_sum/mean/max, softmax, layer_norm, batch_norm). No LLVM here.
//
// The kernel-group former (fusion) sets KernelGroup::num_tiles and ::scratch_bytes of a
// group anchored at one of these ops from compute_op_tiles / compute_op_scratch_bytes;
// the emitters split the work by exactly the same rules (the tiling:: plans below), so
// the two always agree. Tiles never write the same output byte, so disjoint tile ranges
// may run in parallel. Scratch is per tile (tile t owns bytes
// [t * per_tile, (t + 1) * per_tile)), so it is safe under any parallel split.
// Preconditions: the node is well-formed (a verified graph; shapes inferred).
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "carve/ir/graph.h"

namespace carve::jit {

// True for the ops above.
bool is_compute_op(ir::OpKind op);
// Number of independent tiles (>= 1) of a compute op; 1 for any other op.
int64_t compute_op_tiles(const ir::Graph& graph, const ir::Node& node);
// Scratch bytes the op's kernel needs (all tiles together); 0 for none / other ops, and
// for a matmul/gemm whose B is pre-packed (kPrepackedAttr: read in place).
int64_t compute_op_scratch_bytes(const ir::Graph& graph, const ir::Node& node);

namespace tiling {

// Work split into `units` equal pieces, `per_tile` consecutive units per tile.
struct UnitTiles {
  int64_t units = 1;
  int64_t per_tile = 1;
  int64_t tiles() const { return units == 0 ? 1 : (units + per_tile - 1) / per_tile; }
};
// per_tile chosen so a tile touches at least ~16K elements.
UnitTiles unit_tiles(int64_t units, int64_t elements_per_unit);

// `batch` independent GEMMs C (m x n) = A (m x k) * B (k x n). Tile t is
// (b, row tile r, column tile c) with t = (b * row_tiles + r) * col_tiles + c, covering
// rows [r * rows_per_tile, ...) and columns [c * cols_per_tile, ...) of GEMM b.
struct GemmTiles {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  int64_t rows_per_tile = 1, cols_per_tile = 1;
  int64_t row_tiles = 1, col_tiles = 1;
  int64_t kc = 1;           // K block of the packed B panel
  int64_t panel_ld = 1;     // row stride (elements) of the packed B panel
  int64_t panel_bytes = 0;  // scratch per tile; 0 = this dtype is not packed
  int64_t tiles() const { return batch == 0 ? 1 : batch * row_tiles * col_tiles; }
};
GemmTiles gemm_tiles(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t elem_bytes,
                     bool packed);

// matmul/gemm: batch dims broadcast, 1-D operands promoted. f32/f64 are packed. When B
// is shared by the whole batch, the batch is folded into m (no batch dims remain).
struct MatmulShape {
  std::vector<int64_t> batch_dims;  // output batch dims
  std::vector<int64_t> a_batch_strides, b_batch_strides;  // element strides, 0 = broadcast
  int64_t m = 1, n = 1, k = 1;
};
MatmulShape matmul_shape(const ir::Graph& graph, const ir::Node& node);
GemmTiles matmul_tiles(const ir::Graph& graph, const ir::Node& node);

// GEMV (a matmul/gemm GEMM with m <= kGemvMaxRows rows: classifier heads, decode steps).
// The JIT runs it with a micro-kernel of exactly m rows, vectorised over N in strips:
// `wide` columns (several vectors), then single vectors of `vec` lanes, then single
// columns. Per output element the summation order is the blocked GEMM's (K blocks of
// GemmTiles::kc, k ascending, one fused multiply-add each), so the bytes match it.
inline constexpr int64_t kGemvMaxRows = 4;
struct GemvStrips {
  int64_t wide = 1, vec = 1;  // columns per wide strip (a multiple of vec), lanes per vector
};
// vector_width_f32: f32 lanes per host vector register (4/8/16, see vector_width_f32).
// m > kGemvMaxRows: the strips of the MR-row GEMM micro-kernel (wide = its NR, 2 vectors).
GemvStrips gemv_strips(int64_t m, ir::DType dtype, int vector_width_f32);
// f32 lanes of the widest vector register the LLVM feature string enables.
int vector_width_f32(std::string_view features);
// Pre-packed weights (a constant B, packed once at compile time; the matmul/gemm node
// then carries the attribute kPrepackedAttr = {wide, vec} of gemv_strips): B's K x N elements
// reordered so each strip is contiguous. The columns split into wide strips from column
// 0 up to floor(n / wide) * wide, then vec-lane strips up to floor(n / vec) * vec, then
// single columns; the strip starting at column c with width w holds element (k, j) at
// c * k_total + k * w + (j - c). Column tiles of GemmTiles start at multiples of 64
// (128 for m <= kGemvMaxRows), which every `wide` of that m divides, so each tile's strips
// are a run of these.
inline constexpr const char* kPrepackedAttr = "prepacked_b";
// Packs B (row-major K x N; trans_b: row-major N x K holding B transposed) of
// elements of elem_bytes (1, 2, 4 or 8) from src into dst (K * N elements, the layout above).
void pack_gemv_b(const void* src, void* dst, int64_t k, int64_t n, bool trans_b, int64_t elem_bytes,
                 const GemvStrips& strips);
// pack_gemv_b with trans_b for a B that may be overwritten: `data` (row-major N x K)
// becomes the packed layout, with one strip's rows copied aside at a time instead of a
// second K x N buffer.
void pack_transposed_gemv_b_in_place(void* data, int64_t k, int64_t n, int64_t elem_bytes, const GemvStrips& strips);
// The inverse for f32: B packed by pack_gemv_b (trans_b 0) back into row-major K x N.
void unpack_gemv_b_f32(const float* packed, float* dst, int64_t k, int64_t n, const GemvStrips& strips);

struct ConvShape {
  int64_t n = 1, c = 1, h = 1, w = 1;        // input
  int64_t o = 1, kh = 1, kw = 1;             // weight
  int64_t oh = 1, ow = 1;                    // output spatial
  int64_t groups = 1, cg = 1, og = 1;        // channels per group in / out
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  // Direct path (each output channel reads one input channel: depthwise and friends):
  // one tile unit per (image, output channel) plane.
  bool direct() const { return cg == 1; }
};
ConvShape conv_shape(const ir::Graph& graph, const ir::Node& node);
// GEMM view per (image, group): A = weights [og x cg*kh*kw], B = im2col, C = output.
GemmTiles conv_gemm_tiles(const ir::Graph& graph, const ir::Node& node);

// Reductions: the input dims after merging neighbours that are both reduced or both
// kept. inner_reduced: the innermost merged dim is reduced (each output element reduces
// a contiguous run); else units are output rows of the innermost kept dim.
struct ReduceShape {
  std::vector<int64_t> dims;   // merged input dims
  std::vector<bool> reduced;   // per merged dim
  int64_t out_elements = 1, reduced_elements = 1;
  bool inner_reduced = true;
  int64_t units = 1;           // output elements (inner_reduced) or output rows
};
ReduceShape reduce_shape(const ir::Graph& graph, const ir::Node& node);

// softmax/layer_norm/arg_max/arg_min: [outer, len, inner] around the axis (layer_norm:
// inner = 1, len = the product of x.shape[axis:]).
struct AxisShape {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisShape axis_shape(const ir::Graph& graph, const ir::Node& node);

// Attention as one kernel (fusion.h): nodes = [matmul Q x K, elementwise chain..., softmax,
// matmul P x V], each batch b of the first matmul's output [.., rows, keys] softmaxed over
// keys and multiplied by V[b] [keys, value_depth]. One tile per (b, block of block_rows()
// query rows); a tile keeps its block's rows x keys scores on its stack.
// valid: f32, the same batch dims on Q, K, V and both outputs (no broadcast), softmax
// over the last axis, keys a multiple of 16 and at most kAttentionMaxKeys.
inline constexpr int64_t kAttentionRows = 8;
inline constexpr int64_t kAttentionMaxKeys = 2048;
struct AttentionShape {
  bool valid = false;
  int64_t batch = 1, rows = 1, keys = 1, depth = 1, value_depth = 1;
  // Query rows per tile: kAttentionRows, or all of them when fewer (a decode step's one).
  int64_t block_rows() const { return std::min(rows, kAttentionRows); }
  int64_t tiles() const { return batch * ((rows + block_rows() - 1) / block_rows()); }
};
AttentionShape attention_shape(const ir::Graph& graph, std::span<const ir::NodeId> nodes);

// The tile split of any compute op other than matmul/gemm/conv2d (GEMM path).
UnitTiles unit_tiles_for(const ir::Graph& graph, const ir::Node& node);

}  // namespace tiling
}  // namespace carve::jit
