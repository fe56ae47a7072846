// Max and average pooling on oneDNN's blocked layout (nChw16c or nChw8c: channel_blocking()),
// so that a max pool between library convs (a CNN stem; GoogLeNet's and SqueezeNet's pools
// after a concat) keeps the values on both sides blocked (library_kernel.h). Taken only with
// its input and result kept blocked (BlockedOnlyKernel): carve's generated pools read NCHW as
// fast, with no reorder.
//
// ceil_mode: the output size is the graph's; oneDNN is given the right padding that makes
// its floor rule land on it. For a max pool padded elements never win; an average pool with
// count_include_pad counts only the pads the graph names, so it is declined when ceil_mode
// adds padding (oneDNN would count that too).
#include <algorithm>
#include <array>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

std::array<int64_t, 4> ints_attr(const ir::Node& node, const char* name, std::array<int64_t, 4> fallback,
                                 size_t count) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end() || !it->second.is_ints() || it->second.as_ints().size() != count) return fallback;
  std::copy_n(it->second.as_ints().begin(), count, fallback.begin());
  return fallback;
}

bool flag_attr(const ir::Node& node, const char* name) {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_int() && it->second.as_int() != 0;
}

// out = pool(x); chunks of whole channel blocks as tiles (each channel's window is its own).
class Pool final : public BlockedOnlyKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group) {
    if (group.nodes.size() != 1) return nullptr;
    const ir::Node& node = graph.node(group.nodes.front());
    if (node.inputs.size() != 1 || node.outputs.size() != 1) return nullptr;
    const ir::TensorType& in = graph.value(node.inputs[0]).type;
    const ir::TensorType& out = graph.value(node.outputs[0]).type;
    if (!is_f32_nchw_one_image(in) || out.dtype != in.dtype || out.shape.rank() != 4) return nullptr;
    const auto kernel = ints_attr(node, "kernel", {0, 0, 0, 0}, 2);
    const auto strides = ints_attr(node, "strides", {1, 1, 0, 0}, 2);
    const auto pads = ints_attr(node, "pads", {0, 0, 0, 0}, 4);
    const int64_t c = in.shape[1];
    const std::array<int64_t, 2> src{in.shape[2], in.shape[3]}, dst{out.shape[2], out.shape[3]};
    // oneDNN's rule: dst = (src + pad_l + pad_r - kernel) / stride + 1 (floor). The right pads
    // grow to the last window's end where ceil_mode made one more window.
    memory::dims pad_r(2);
    bool grown = false;
    for (size_t i = 0; i < 2; ++i) {
      if (kernel[i] < 1 || strides[i] < 1) return nullptr;
      const int64_t last_end = (dst[i] - 1) * strides[i] + kernel[i];
      pad_r[i] = std::max(pads[i + 2], last_end - src[i] - pads[i]);
      grown = grown || pad_r[i] != pads[i + 2];
      if ((src[i] + pads[i] + pad_r[i] - kernel[i]) / strides[i] + 1 != dst[i]) return nullptr;
    }
    const bool max = node.op == ir::OpKind::kMaxPool;
    const bool include_pad = !max && flag_attr(node, "count_include_pad");
    if (include_pad && grown) return nullptr;
    const algorithm alg = max           ? algorithm::pooling_max
                          : include_pad ? algorithm::pooling_avg_include_padding
                                        : algorithm::pooling_avg_exclude_padding;

    auto k = std::make_unique<Pool>();
    k->x_ = operand_index(group, node.inputs[0], OperandRole::kInput);
    k->y_ = operand_index(group, node.outputs[0], OperandRole::kOutput);
    if (k->x_ < 0 || k->y_ < 0) return nullptr;
    k->blocked_operands_ = {k->x_, k->y_};
    const int64_t cc = k->split_channels(c, c * dst[0] * dst[1], 16384);
    k->src_chunk_bytes_ = cc * src[0] * src[1] * static_cast<int64_t>(sizeof(float));
    k->dst_chunk_bytes_ = cc * dst[0] * dst[1] * static_cast<int64_t>(sizeof(float));
    OneOmpThread one_thread;
    try {
      k->src_ = memory::desc({1, cc, src[0], src[1]}, memory::data_type::f32, channel_blocking().tag);
      k->dst_ = memory::desc({1, cc, dst[0], dst[1]}, memory::data_type::f32, channel_blocking().tag);
      dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, alg, k->src_, k->dst_,
                                       {strides[0], strides[1]}, {kernel[0], kernel[1]}, {pads[0], pads[1]}, pad_r);
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
    run_tiles("pooling", tile_begin, tile_end, [&](dnnl::stream& s, int64_t t) {
      // Chunk t: its channels of x and of the result, one contiguous slice each.
      memory x(src_, cpu_engine(), static_cast<std::byte*>(operands[x_]) + t * src_chunk_bytes_);
      memory y(dst_, cpu_engine(), static_cast<std::byte*>(operands[y_]) + t * dst_chunk_bytes_);
      pool_.execute(s, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}});
    });
  }
  std::string describe() const override { return describe_tiles(impl_, "input output"); }

 private:
  int32_t x_ = -1, y_ = -1;
  int64_t src_chunk_bytes_ = 0, dst_chunk_bytes_ = 0;
  memory::desc src_, dst_;
  dnnl::pooling_forward pool_;
  std::string impl_;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_pool(const ir::Graph& graph, const KernelGroup& group) {
  return Pool::make(graph, group);
}

}  // namespace carve::jit::dnnl_kernels
