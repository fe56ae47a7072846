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
#include <optional>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

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
    OneOmpThread one_thread;
    try {
      // The [1, C, 1, 1] result blocked (or NHWC): the NCHW bytes of y.
      k->src_ = memory::desc({1, c, h, w}, memory::data_type::f32, tag);
      k->dst_ = memory::desc({1, c, 1, 1}, memory::data_type::f32, tag);
      dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::pooling_avg_include_padding,
                                       k->src_, k->dst_, {1, 1}, {h, w}, {0, 0}, {0, 0});
      dnnl::pooling_forward::primitive_desc pd(desc, cpu_engine());
      if (pd.scratchpad_desc().get_size() != 0 || !jit_implementation(pd)) return nullptr;
      k->pool_ = dnnl::pooling_forward(pd);
      k->impl_ = pd.impl_info_str();
    } catch (const dnnl::error&) {
      return nullptr;
    }
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    run_tiles("global average pool", tile_begin, tile_end, [&](dnnl::stream& s, int64_t) {
      pool_.execute(s, {{DNNL_ARG_SRC, bound_memory(src_, operands[x_], 0)},
                        {DNNL_ARG_DST, bound_memory(dst_, operands[y_], 1)}});
    });
  }
  std::string describe() const override { return describe_tiles(library_provider_name() + " " + impl_, "input"); }

 private:
  int32_t x_ = -1, y_ = -1;
  memory::desc src_, dst_;
  dnnl::pooling_forward pool_;
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
    // A chunk: cc channels of `rows` rows (all of one, one of the other).
    int64_t cc = c, rows = h;
    if (nhwc) {
      k->layout_name_ = "nhwc";
      rows = k->split_rows(h, c * h * w, 65536);
    } else {
      cc = k->split_channels(c, c * h * w, 65536);
      k->chunk_channels_ = cc;
    }
    k->chunk_bytes_ = cc * rows * w * static_cast<int64_t>(sizeof(float));
    const Tag tag = nhwc ? Tag::nhwc : channel_blocking().tag;
    OneOmpThread one_thread;
    try {
      k->x_md_ = memory::desc({1, cc, rows, w}, memory::data_type::f32, tag);
      k->s_md_ = memory::desc({1, cc, 1, 1}, memory::data_type::f32, tag);  // = NCHW bytes
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
      memory x = bound_memory(x_md_, static_cast<std::byte*>(operands[x_]) + t * chunk_bytes_, 0);
      memory scale = bound_memory(s_md_, static_cast<float*>(operands[s_]) + t * chunk_channels_, 1);
      memory y = bound_memory(x_md_, static_cast<std::byte*>(operands[y_]) + t * chunk_bytes_, 2);
      mul_.execute(s, {{DNNL_ARG_SRC_0, x}, {DNNL_ARG_SRC_1, scale}, {DNNL_ARG_DST, y}});
    });
  }
  std::string describe() const override { return describe_tiles(library_provider_name() + " " + impl_, "input output"); }

 private:
  int32_t x_ = -1, s_ = -1, y_ = -1;
  int64_t chunk_bytes_ = 0, chunk_channels_ = 0;  // chunk_channels_: 0 in NHWC
  memory::desc x_md_, s_md_;
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
