// oneDNN as the kernel provider of f32 matmuls with a constant 2-D weight (library_kernel.h).
//
// Why: on the transformer shapes of bert and gpt (64-128 rows, K and N 256-3072) oneDNN's
// gemm:jit runs at 80-90 GFLOP/s on one AVX2 core here, carve's generated GEMM at 55-65 in
// the same models, and a library kernel needs no LLVM compile: gpt's five GEMM groups were
// 0.8 s of its 1.3 s of compile CPU (docs/benchmarks.md, "Library kernels: oneDNN
// matmuls"). Small row counts stay generated: the GEMV path for m <= 4 streams pre-packed
// weights, and a small product compiles fast.
//
// A run: one call per chunk (from the shape alone) of output columns, each reading all of A
// and its columns of B, or, where A has at least as many rows as B has columns, of rows,
// each reading its rows of A and all of B; each writes its chunk of the result. The weight
// is copied once, row-major, when the group is taken (unpacked when prepack_weights packed
// it in carve's strips), so the program holds it once. Epilogue: a first add of a constant of N elements
// (broadcast over the rows) is the matmul's bias, added before the rest; the rest are
// post-ops as for convs (map_epilogue), a residual add a `sum` over the residual copied
// into the result first. gelu's erf chain has no post-op here (oneDNN's gelu_erf post-op
// ran the MLP's first GEMM 1.5x slower than carve's fused kernel): declined, and the
// runtime offers the matmul and bias alone (split_library_prefixes).
#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "carve/jit/tiles.h"
#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

// Rows below which the generated kernels stay: the GEMV path and its pre-packed strips
// (m <= kGemvMaxRows), and small products LLVM compiles in a few milliseconds.
constexpr int64_t kMinRows = 16;
constexpr int64_t kMinMacs = 1 << 18;
// Columns (rows) a chunk is a multiple of, and the least work a chunk has (~10 us; chunks
// from the shape alone, work_chunks). Measured at one thread: 8 chunks of 64x256x768 cost
// 7 % over one call, 4 of 64x256x256 12 %.
constexpr int64_t kColumnUnit = 16;
constexpr int64_t kRowUnit = 16;
constexpr int64_t kMinChunkMacs = 1'000'000;

// Whether the chunks are of rows: where A has at least as many rows as B has columns, each
// chunk re-reading all of B costs less than each re-reading all of A, and the chunks keep
// oneDNN's brgemm kernel (a column slice of the result is strided: gemm:jit). Measured at
// one thread on AVX-512, convnext_tiny's MLP: 3136x384x96 in 6 column chunks 1.30 ms, in
// 6 row chunks 0.88 (one call 0.90); 784x768x192 in 8 column chunks 1.25, row chunks 0.92;
// 3136x96x384 and 784x192x768 within 4 % either way. Fewer rows than columns (bert and gpt's
// 64-128 rows, convnext's last stages) stay in columns: 49x3072x768 in 8 column chunks 1.00
// ms, row chunks 1.05, one call 1.28.
bool row_chunks(int64_t rows, int64_t n) { return rows >= n; }

bool library_matmul(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") == std::string::npos;
}

// The bias `add` adds to `cur`: a constant f32 of N elements whose dimensions before the
// last are 1; its value id, or kNoValue.
ir::ValueId bias_of(const ir::Graph& graph, const ir::Node& add, ir::ValueId cur, int64_t n) {
  if (add.op != ir::OpKind::kAdd || add.inputs.size() != 2 || add.outputs.size() != 1) return ir::kNoValue;
  if (graph.value(add.outputs[0]).type != graph.value(cur).type) return ir::kNoValue;
  const ir::ValueId other = add.inputs[0] == cur ? add.inputs[1] : add.inputs[1] == cur ? add.inputs[0] : ir::kNoValue;
  if (other == ir::kNoValue || other == cur) return ir::kNoValue;
  const ir::Value& v = graph.value(other);
  if (v.kind != ir::ValueKind::kConstant || v.type.dtype != ir::DType::kF32 || v.type.shape.rank() < 1) return ir::kNoValue;
  const ir::Shape& s = v.type.shape;
  for (int i = 0; i + 1 < s.rank(); ++i)
    if (s[i] != 1) return ir::kNoValue;
  return s[s.rank() - 1] == n ? other : ir::kNoValue;
}

class DnnlMatmul final : public LibraryKernel {
 public:
  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    OneOmpThread one_thread;
    try {
      dnnl::stream s(cpu_engine());
      for (int64_t t = tile_begin; t < tile_end; ++t) run_chunk(s, operands, chunks_[static_cast<size_t>(t)], t);
      s.wait();
    } catch (const dnnl::error& err) {
      run_failed("matmul", err);
    }
  }
  std::vector<int64_t> phase_tiles() const override { return {static_cast<int64_t>(chunks_.size())}; }
  int64_t scratch_bytes() const override { return scratchpad_stride_ * static_cast<int64_t>(chunks_.size()); }
  std::string describe() const override {
    std::string text = library_provider_name() + " " + impl_;
    if (chunks_.size() > 1) text += " x" + std::to_string(chunks_.size()) + (by_rows_ ? " row chunks" : " column chunks");
    return text;
  }
  bool reads_at_run(int32_t operand) const override { return operand != weights_index_ && operand != bias_index_; }

  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes);

 private:
  // One primitive per chunk width (at most three: q and q + 1 units, a short last one).
  struct Width {
    int64_t rows = 0, columns = 0;
    dnnl::matmul prim;
    memory::desc a_md, b_md, bias_md, c_md, scratchpad_md;
  };
  struct Chunk {
    int64_t first = 0;  // column, or row (by_rows_)
    size_t width = 0;
  };

  void run_chunk(dnnl::stream& s, void* const* operands, const Chunk& chunk, int64_t index) const {
    const Width& w = widths_[chunk.width];
    // The chunk's first element of A and of the result, its first column of B and the bias.
    const int64_t a_at = by_rows_ ? chunk.first * b_rows_ : 0, out_at = by_rows_ ? chunk.first * n_ : chunk.first;
    const int64_t column = by_rows_ ? 0 : chunk.first;
    auto* out = static_cast<float*>(operands[out_index_]) + out_at;
    if (residual_index_ >= 0) {
      const float* residual = static_cast<const float*>(operands[residual_index_]) + out_at;
      if (residual != out)  // in place: the residual's bytes are the result's already
        for (int64_t r = 0; r < w.rows; ++r)
          std::memcpy(out + r * n_, residual + r * n_, static_cast<size_t>(w.columns) * sizeof(float));
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, bound_memory(w.a_md, static_cast<float*>(operands[x_index_]) + a_at, 0)},
        {DNNL_ARG_WEIGHTS, bound_memory(w.b_md, const_cast<float*>(weights_.data()) + column * b_rows_, 1)},
        {DNNL_ARG_DST, bound_memory(w.c_md, out, 2)}};
    if (!bias_.empty())
      args.emplace(DNNL_ARG_BIAS, bound_memory(w.bias_md, const_cast<float*>(bias_.data()) + column, 3));
    if (w.scratchpad_md.get_size() > 0) {
      auto* scratch = static_cast<std::byte*>(operands[scratch_index_]) + index * scratchpad_stride_;
      args.emplace(DNNL_ARG_SCRATCHPAD, bound_memory(w.scratchpad_md, scratch, 4));
    }
    w.prim.execute(s, args);
  }

  std::vector<Width> widths_;
  std::vector<Chunk> chunks_;
  // The weight, chunk after chunk, each chunk's columns a dense row-major K x width block (one
  // stream of bytes, where a slice of the K x N matrix read 16 to 64 floats a row: 5 % slower
  // on gpt at one thread); the bias (empty: none).
  std::vector<float> weights_, bias_;
  int64_t b_rows_ = 0, n_ = 0, scratchpad_stride_ = 0;  // b_rows_: K
  bool by_rows_ = false;  // chunks of rows (row_chunks), else of columns
  int32_t x_index_ = -1, out_index_ = -1, residual_index_ = -1, scratch_index_ = -1;
  int32_t weights_index_ = -1, bias_index_ = -1;  // copied when taken
  std::string impl_;
};

std::unique_ptr<LibraryKernel> DnnlMatmul::make(const ir::Graph& graph, const KernelGroup& group,
                                                const ConstantBytes& constant_bytes) {
  const ir::Node& node = graph.node(group.nodes.front());
  if (node.op != ir::OpKind::kMatmul || node.inputs.size() != 2 || node.outputs.size() != 1) return nullptr;
  const ir::TensorType& a_type = graph.value(node.inputs[0]).type;
  const ir::TensorType& b_type = graph.value(node.inputs[1]).type;
  const ir::TensorType& out_type = graph.value(node.outputs[0]).type;
  if (a_type.dtype != ir::DType::kF32 || b_type.dtype != ir::DType::kF32 || a_type.shape.rank() < 2 ||
      b_type.shape.rank() != 2 || node.inputs[0] == node.inputs[1])
    return nullptr;
  const int64_t k = b_type.shape[0], n = b_type.shape[1];
  Result<int64_t> a_elements = a_type.shape.num_elements(), out_elements = out_type.shape.num_elements();
  if (!a_elements.ok() || !out_elements.ok() || k <= 0 || n <= 0) return nullptr;
  const int64_t rows = *out_elements / n;  // A's rows: B is 2-D, so A holds every batch
  if (a_type.shape[a_type.shape.rank() - 1] != k || out_type.shape[out_type.shape.rank() - 1] != n ||
      *a_elements != rows * k || rows < kMinRows || rows * k * n < kMinMacs)
    return nullptr;
  const void* wbytes = constant_bytes(node.inputs[1]);
  if (!wbytes) return nullptr;

  ir::ValueId bias = ir::kNoValue;
  size_t first_post_op = 1;
  if (group.nodes.size() > 1) {
    bias = bias_of(graph, graph.node(group.nodes[1]), node.outputs[0], n);
    if (bias != ir::kNoValue) first_post_op = 2;
  }
  const void* bbytes = bias != ir::kNoValue ? constant_bytes(bias) : nullptr;
  if (bias != ir::kNoValue && !bbytes) return nullptr;
  const ir::ValueId chain_start = bias != ir::kNoValue ? graph.node(group.nodes[1]).outputs[0] : node.outputs[0];
  std::optional<Epilogue> epilogue = map_epilogue(graph, group, first_post_op, chain_start);
  if (!epilogue || epilogue->residual == node.inputs[0]) return nullptr;  // later chunks read A

  int outputs = 0;
  for (const KernelOperand& o : group.operands) outputs += o.role == OperandRole::kOutput;
  auto kernel = std::make_unique<DnnlMatmul>();
  DnnlMatmul& km = *kernel;
  km.b_rows_ = k;
  km.n_ = n;
  km.x_index_ = operand_index(group, node.inputs[0], OperandRole::kInput);
  km.out_index_ = operand_index(group, epilogue->result, OperandRole::kOutput);
  if (epilogue->residual != ir::kNoValue)
    km.residual_index_ = operand_index(group, epilogue->residual, OperandRole::kInput);
  if (outputs != 1 || km.x_index_ < 0 || km.out_index_ < 0 ||
      (epilogue->residual != ir::kNoValue && km.residual_index_ < 0))
    return nullptr;
  km.weights_index_ = operand_index(group, node.inputs[1], OperandRole::kInput);
  if (bias != ir::kNoValue) km.bias_index_ = operand_index(group, bias, OperandRole::kInput);
  km.scratch_index_ = scratch_operand_index(group);

  std::vector<float> row_major;
  const auto* plain = static_cast<const float*>(wbytes);
  if (auto it = node.attrs.find(tiling::kPrepackedAttr); it != node.attrs.end()) {
    if (!it->second.is_ints() || it->second.as_ints().size() != 2) return nullptr;
    const tiling::GemvStrips strips{it->second.as_ints()[0], it->second.as_ints()[1]};
    row_major.resize(static_cast<size_t>(k * n));
    tiling::unpack_gemv_b_f32(plain, row_major.data(), k, n, strips);
    plain = row_major.data();
  }
  km.weights_.resize(static_cast<size_t>(k * n));
  if (bbytes) km.bias_.assign(static_cast<const float*>(bbytes), static_cast<const float*>(bbytes) + n);

  OneOmpThread one_thread;  // a primitive splits its work for the thread count at creation
  try {
    dnnl::primitive_attr attr;
    attr.set_post_ops(epilogue->ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    km.by_rows_ = row_chunks(rows, n);
    const int64_t unit = km.by_rows_ ? kRowUnit : kColumnUnit, extent = km.by_rows_ ? rows : n;
    const int64_t units = (extent + unit - 1) / unit;
    const int64_t t = work_chunks(rows * k * n, units, kMinChunkMacs);
    for (int64_t i = 0; i < t; ++i) {
      Chunk chunk;
      chunk.first = i * units / t * unit;
      const int64_t size = std::min((i + 1) * units / t * unit, extent) - chunk.first;
      const int64_t chunk_rows = km.by_rows_ ? size : rows, columns = km.by_rows_ ? n : size;
      auto same = [&](const Width& w) { return w.rows == chunk_rows && w.columns == columns; };
      chunk.width = static_cast<size_t>(std::find_if(km.widths_.begin(), km.widths_.end(), same) - km.widths_.begin());
      if (chunk.width == km.widths_.size()) {
        Width w;
        w.rows = chunk_rows;
        w.columns = columns;
        w.a_md = memory::desc({chunk_rows, k}, memory::data_type::f32, Tag::ab);
        w.b_md = memory::desc({k, columns}, memory::data_type::f32, Tag::ab);
        w.c_md = memory::desc({chunk_rows, columns}, memory::data_type::f32, memory::dims{n, 1});
        if (bbytes) w.bias_md = memory::desc({1, columns}, memory::data_type::f32, Tag::ab);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(w.a_md, w.b_md, w.bias_md, w.c_md), attr, cpu_engine());
        if (!library_matmul(pd)) return nullptr;
        w.scratchpad_md = pd.scratchpad_desc();
        km.scratchpad_stride_ = std::max(km.scratchpad_stride_, align64(static_cast<int64_t>(w.scratchpad_md.get_size())));
        km.impl_ = pd.impl_info_str();
        w.prim = dnnl::matmul(pd);
        km.widths_.push_back(std::move(w));
      }
      if (!km.by_rows_ || i == 0) {  // row chunks share the whole weight
        const int64_t column = km.by_rows_ ? 0 : chunk.first;
        float* block = km.weights_.data() + column * k;
        for (int64_t r = 0; r < k; ++r)
          std::memcpy(block + r * columns, plain + r * n + column, static_cast<size_t>(columns) * sizeof(float));
      }
      km.chunks_.push_back(chunk);
    }
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation for this shape/post-op chain
  }
  return kernel;
}

}  // namespace

std::unique_ptr<LibraryKernel> make_matmul(const ir::Graph& graph, const KernelGroup& group,
                                           const ConstantBytes& constant_bytes) {
  return DnnlMatmul::make(graph, group, constant_bytes);
}

}  // namespace carve::jit::dnnl_kernels
