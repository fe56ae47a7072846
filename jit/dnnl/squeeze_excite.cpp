// Squeeze-excite's two data ops on oneDNN's blocked layout (nChw16c or nChw8c:
// channel_blocking()), so that an inverted residual block with squeeze-excite (EfficientNet,
// MobileNetV3) stays blocked from its expand conv to its project conv (library_kernel.h):
//  - global average pool x[1, C, H, W] -> [1, C, 1, 1] (pooling_forward, average over H x W);
//  - channel scale x[1, C, H, W] * s[1, C, 1, 1] (binary_mul, s broadcast over H x W).
// A [1, C, 1, 1] tensor has the same bytes in NCHW and blocked (C a multiple of the block),
// so the small convs between the two stay generated and read the pool's result as it is.
// Each is worth running only with its [1, C, H, W] operands kept blocked: otherwise carve's
// generated kernels, which read NCHW, are as fast and need no reorder (worth_it). In a graph
// whose library kernels keep NHWC instead (nhwc_graph: regnet's squeeze-excite sits between
// two of its convs) both run on NHWC, of any channel count, the scale in chunks of rows.
// Tiles: chunks of whole channel blocks (split_units), each its own call; in NHWC the pool
// is one (a channel's pixels are strided there), the scale chunks of rows. Each channel's
// average and product do not depend on the chunk it is in.
//  - The pool: chunks as even as they go, of at least 128K elements (a call costs 1-2 us).
//    efficientnet_b0's pools at 2 threads: 144 x 56 x 56 (9 blocks, one tile in equal
//    chunks) 18.6 -> 12.4 us as 5 + 4 blocks, 32 x 112 x 112 18.7 -> 9.5, 96 x 56 x 56 13.2
//    -> 8.9; at 1 thread 0-2 us slower.
//  - The scale: equal chunks, of at least 64K elements, as before. Its time at 2 threads
//    depends on which core holds what it reads, just written by the conv before it:
//    efficientnet_b0's 144 x 56 x 56 scale took 18-33 us as one call, 25-28 as two uneven
//    chunks at once, so no uneven split measured faster.
#include <optional>
#include <vector>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

constexpr int64_t kMinPoolChunk = 128 << 10, kMinScaleChunk = 64 << 10;

class GlobalAveragePool final : public BlockedOnlyKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group) {
    if (group.nodes.size() != 1) return nullptr;
    const ir::Node& node = graph.node(group.nodes.front());
    const ir::TensorType& in = graph.value(node.inputs[0]).type;
    const bool nhwc = nhwc_graph(graph);
    if (nhwc ? !is_f32_one_image(in) : !is_f32_nchw_one_image(in)) return nullptr;
    auto k = std::make_unique<GlobalAveragePool>();
    if (nhwc) k->layout_name_ = "nhwc";
    const Tag tag = nhwc ? Tag::nhwc : channel_blocking().tag;
    k->x_ = operand_index(group, node.inputs[0], OperandRole::kInput);
    k->y_ = operand_index(group, node.outputs[0], OperandRole::kOutput);
    if (k->x_ < 0 || k->y_ < 0) return nullptr;
    k->blocked_operands_ = {k->x_};
    const int64_t c = in.shape[1], h = in.shape[2], w = in.shape[3];
    k->plane_ = h * w;
    if (!nhwc) {
      k->block_ = channel_blocking().block;
      k->split_units(c / k->block_, c * h * w, kMinPoolChunk, /*equal=*/false);
    }
    OneOmpThread one_thread;
    try {
      // A chunk's [1, C', 1, 1] result blocked (or NHWC): the NCHW bytes of y's channels.
      for (int64_t blocks = k->min_chunk_units(); blocks <= k->min_chunk_units() + 1; ++blocks) {
        const int64_t channels = nhwc ? c : blocks * k->block_;
        Chunk chunk{memory::desc({1, channels, h, w}, memory::data_type::f32, tag),
                    memory::desc({1, channels, 1, 1}, memory::data_type::f32, tag), {}};
        dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::pooling_avg_include_padding,
                                         chunk.src, chunk.dst, {1, 1}, {h, w}, {0, 0}, {0, 0});
        dnnl::pooling_forward::primitive_desc pd(desc, cpu_engine());
        if (pd.scratchpad_desc().get_size() != 0 || !jit_implementation(pd)) return nullptr;
        chunk.pool = dnnl::pooling_forward(pd);
        k->impl_ = pd.impl_info_str();
        k->chunks_.push_back(std::move(chunk));
        if (nhwc || k->units_ % k->tiles_ == 0) break;  // one size
      }
    } catch (const dnnl::error&) {
      return nullptr;
    }
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    run_tiles("global average pool", tile_begin, tile_end, [&](dnnl::stream& s, int64_t t) {
      const auto [first, blocks] = chunk_units(t);
      const Chunk& chunk = chunks_[static_cast<size_t>(blocks - min_chunk_units())];
      const int64_t channel = first * block_;  // 0 in NHWC
      chunk.pool.execute(s, {{DNNL_ARG_SRC, bound_memory(chunk.src, static_cast<float*>(operands[x_]) + channel * plane_, 0)},
                             {DNNL_ARG_DST, bound_memory(chunk.dst, static_cast<float*>(operands[y_]) + channel, 1)}});
    });
  }
  std::string describe() const override { return describe_tiles(library_provider_name() + " " + impl_, "input"); }

 private:
  struct Chunk {  // of a count of blocks
    memory::desc src, dst;
    dnnl::pooling_forward pool;
  };
  int32_t x_ = -1, y_ = -1;
  int64_t block_ = 0, plane_ = 0;  // block_: 0 in NHWC (one chunk of every channel)
  std::vector<Chunk> chunks_;  // by count of blocks from min_chunk_units()
  std::string impl_;
};

// out = x * s (or s * x); chunks of whole channel blocks (of rows in NHWC) as tiles.
class ChannelScale final : public BlockedOnlyKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group) {
    if (group.nodes.size() != 1) return nullptr;
    const ir::Node& node = graph.node(group.nodes.front());
    if (node.inputs.size() != 2) return nullptr;
    const ir::TensorType& out = graph.value(node.outputs[0]).type;
    const bool nhwc = nhwc_graph(graph);
    if (nhwc ? !is_f32_one_image(out) : !is_f32_nchw_one_image(out)) return nullptr;
    const int64_t c = out.shape[1], h = out.shape[2], w = out.shape[3];
    const ir::Shape scale_shape{1, c, 1, 1};
    int x = -1;
    for (int i = 0; i < 2; ++i) {
      const ir::TensorType& a = graph.value(node.inputs[static_cast<size_t>(i)]).type;
      const ir::TensorType& b = graph.value(node.inputs[static_cast<size_t>(1 - i)]).type;
      if (a == out && b.dtype == ir::DType::kF32 && b.shape == scale_shape && !(h == 1 && w == 1)) x = i;
    }
    if (x < 0) return nullptr;
    auto k = std::make_unique<ChannelScale>();
    k->x_ = operand_index(group, node.inputs[static_cast<size_t>(x)], OperandRole::kInput);
    k->s_ = operand_index(group, node.inputs[static_cast<size_t>(1 - x)], OperandRole::kInput);
    k->y_ = operand_index(group, node.outputs[0], OperandRole::kOutput);
    if (k->x_ < 0 || k->s_ < 0 || k->y_ < 0) return nullptr;
    k->blocked_operands_ = {k->x_, k->y_};
    // Units: channel blocks of h rows, or in NHWC rows of all c channels.
    const int64_t block = nhwc ? 0 : channel_blocking().block;
    if (nhwc) k->layout_name_ = "nhwc";
    k->split_units(nhwc ? h : c / block, c * h * w, kMinScaleChunk, /*equal=*/true);
    k->unit_bytes_ = (nhwc ? c * w : block * h * w) * static_cast<int64_t>(sizeof(float));
    k->unit_channels_ = block;
    const Tag tag = nhwc ? Tag::nhwc : channel_blocking().tag;
    // Every chunk has the same units (equal chunks).
    const int64_t units = k->min_chunk_units();
    const int64_t channels = nhwc ? c : units * block, rows = nhwc ? units : h;
    OneOmpThread one_thread;
    try {
      k->x_md_ = memory::desc({1, channels, rows, w}, memory::data_type::f32, tag);
      k->s_md_ = memory::desc({1, channels, 1, 1}, memory::data_type::f32, tag);  // = NCHW bytes
      dnnl::binary::desc desc(algorithm::binary_mul, k->x_md_, k->s_md_, k->x_md_);
      dnnl::binary::primitive_desc pd(desc, cpu_engine());
      if (pd.scratchpad_desc().get_size() != 0 || !jit_implementation(pd)) return nullptr;
      k->mul_ = dnnl::binary(pd);
      k->impl_ = pd.impl_info_str();
    } catch (const dnnl::error&) {
      return nullptr;
    }
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    run_tiles("channel scale", tile_begin, tile_end, [&](dnnl::stream& s, int64_t t) {
      // Chunk t: its channels of x and of the result (one contiguous slice each in the
      // blocked layout), and of s; in NHWC its rows, and all of s. In place (y over x) each
      // chunk reads only what it writes.
      const int64_t first = chunk_units(t).first;
      memory x = bound_memory(x_md_, static_cast<std::byte*>(operands[x_]) + first * unit_bytes_, 0);
      memory scale = bound_memory(s_md_, static_cast<float*>(operands[s_]) + first * unit_channels_, 1);
      memory y = bound_memory(x_md_, static_cast<std::byte*>(operands[y_]) + first * unit_bytes_, 2);
      mul_.execute(s, {{DNNL_ARG_SRC_0, x}, {DNNL_ARG_SRC_1, scale}, {DNNL_ARG_DST, y}});
    });
  }
  std::string describe() const override { return describe_tiles(library_provider_name() + " " + impl_, "input output"); }

 private:
  int32_t x_ = -1, s_ = -1, y_ = -1;
  int64_t unit_bytes_ = 0, unit_channels_ = 0;  // of x; of s (0 in NHWC: all of s each chunk)
  memory::desc x_md_, s_md_;  // a chunk's
  dnnl::binary mul_;
  std::string impl_;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_global_average_pool(const ir::Graph& graph, const KernelGroup& group) {
  return GlobalAveragePool::make(graph, group);
}

std::unique_ptr<LibraryKernel> make_channel_scale(const ir::Graph& graph, const KernelGroup& group) {
  return ChannelScale::make(graph, group);
}

}  // namespace carve::jit::dnnl_kernels
