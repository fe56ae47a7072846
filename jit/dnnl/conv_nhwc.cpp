// oneDNN convolutions in NHWC, the layout library kernels keep values in between each other
// in a graph whose grouped convs the channel-blocked one cannot hold (nhwc_graph: groups of
// other than whole 16-channel blocks, regnet's 8). oneDNN runs those only in nChw8c on
// AVX-512, so next to 16-channel 1x1 convs every value between them was reordered to NCHW
// and back (regnet_y_400mf: about 0.5 ms of its 5.6 at one thread). NHWC holds every conv
// of such a graph without padding or reorders, at the blocked kernels' speed or near it (a
// standalone oneDNN program, 1 thread: 1x1 208 -> 208 at 14x14 0.064 ms against 0.066 in
// nChw16c; grouped 3x3, 26 groups of 8, 0.052 against 0.048 in nChw8c).
//
// Tiles: phase 0 (absent when the input is kept NHWC) reorders the input from NCHW into
// NHWC in scratch, in slices of rows; phase 1 has one tile per chunk of output rows (from
// the shape alone), each a call of its rows' primitive (the first and last chunks pad where
// the middle ones read the rows around them) on its rows of the input, writing its rows of
// the result. A residual add is a `sum` post-op over the residual's rows copied (or, from
// NCHW, reordered) into the chunk's result first. The planner never puts a conv's result
// over its residual (graph_problem.h), so a chunk's write never reaches rows of the
// residual that another chunk reads, in either layout.
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

constexpr const char* kNhwc = "nhwc";

bool is_nhwc_conv_node(const ir::Graph& graph, const ir::Node& node) {
  if (node.op != ir::OpKind::kConv2d) return false;
  for (ir::ValueId v : node.inputs)
    if (graph.value(v).type.dtype != ir::DType::kF32) return false;
  return graph.value(node.inputs[0]).type.shape.rank() == 4;
}

class NhwcConv final : public TwoPhaseConvKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes);

  std::string describe() const override {
    const std::string kept = kept_operands(src_kept_, residual_kept_, out_kept_);
    return describe_chunks(impl_, "row") + (kept.empty() ? ", NCHW converted" : std::string(", nhwc") + kept);
  }
  std::string blocked_layout(int32_t operand) const override {
    return operand == x_index_ || operand == out_index_ || operand == residual_index_ ? kNhwc : "";
  }
  bool worth_it(const std::vector<int32_t>& kept) const override {
    if (stem_) return true;
    auto is_kept = [&](int32_t operand) { return std::find(kept.begin(), kept.end(), operand) != kept.end(); };
    double cost = is_kept(x_index_) ? 0.0 : input_cost_;
    cost += is_kept(out_index_) ? 0.0 : output_cost_;
    if (residual_index_ >= 0 && !is_kept(residual_index_)) cost += output_cost_;
    return cost < (grouped_ ? kGroupedReorderBudgetPerMac : kReorderBudgetPerMac);
  }
  void use_blocked(int32_t operand) override {
    src_kept_ = src_kept_ || operand == x_index_;
    out_kept_ = out_kept_ || operand == out_index_;
    residual_kept_ = residual_kept_ || operand == residual_index_;
    layout();
  }

 private:
  // One primitive per distinct chunk: its input and output rows and its top and bottom pads.
  struct Width {
    int64_t in_rows = 0, out_rows = 0, pad_top = 0, pad_bottom = 0;
    dnnl::convolution_forward conv;
    memory::desc src_md, dst_md, scratchpad_md;
    size_t weights = 0;  // index into weights_
    Reorder dst_reorder, residual_reorder;  // into NCHW rows; from NCHW rows
  };
  struct Chunk {
    int64_t in_row = 0, out_row = 0;
    size_t width = 0;
  };

  int64_t num_chunks() const override { return static_cast<int64_t>(chunks_.size()); }
  // Out rows [row, row + rows) of an NCHW tensor of the result's shape.
  memory::desc plain_rows(int64_t rows) const {
    return memory::desc({1, o_, rows, ow_}, memory::data_type::f32, memory::dims{o_ * oh_ * ow_, oh_ * ow_, ow_, 1});
  }
  int64_t nhwc_row_bytes() const { return ow_ * o_ * static_cast<int64_t>(sizeof(float)); }

  void layout() {
    input_slices_.clear();
    if (!src_kept_) input_slices_ = input_slices(user_src_, full_src_);
    int64_t slot = 0;
    for (Width& w : widths_) {
      w.dst_reorder = out_kept_ ? Reorder{} : make_reorder(w.dst_md, plain_rows(w.out_rows));
      w.residual_reorder = residual_index_ >= 0 && !residual_kept_ ? make_reorder(plain_rows(w.out_rows), w.dst_md) : Reorder{};
      const int64_t result = out_kept_ ? 0 : align64(static_cast<int64_t>(w.dst_md.get_size()));
      slot = std::max(slot, result + align64(static_cast<int64_t>(w.scratchpad_md.get_size())));
    }
    lay_out_scratch(src_kept_ ? 0 : static_cast<int64_t>(full_src_.get_size()), slot);
  }

  void run_chunk(dnnl::stream& s, void* const* operands, int64_t index) const override {
    const Chunk& chunk = chunks_[static_cast<size_t>(index)];
    const Width& w = widths_[chunk.width];
    std::byte* base = scratch(operands);
    const int64_t in_row_bytes = w_ * c_ * static_cast<int64_t>(sizeof(float));
    std::byte* src = (src_kept_ ? static_cast<std::byte*>(operands[x_index_]) : base) + chunk.in_row * in_row_bytes;
    std::byte* slot = chunk_slot(operands, index);
    auto* out = static_cast<std::byte*>(operands[out_index_]);
    // The chunk's rows: contiguous in NHWC, one run per channel in NCHW.
    const int64_t nhwc_at = chunk.out_row * nhwc_row_bytes();
    const int64_t plain_at = chunk.out_row * ow_ * static_cast<int64_t>(sizeof(float));
    std::byte* dst = out_kept_ ? out + nhwc_at : slot;
    if (residual_index_ >= 0) {
      auto* residual = static_cast<std::byte*>(operands[residual_index_]);
      if (residual_kept_) {
        if (residual + nhwc_at != dst)
          std::memcpy(dst, residual + nhwc_at, static_cast<size_t>(w.out_rows * nhwc_row_bytes()));
      } else {
        w.residual_reorder.run(s, plain_rows(w.out_rows), residual + plain_at, w.dst_md, dst);
      }
    }
    const int64_t scratchpad_at = out_kept_ ? 0 : align64(static_cast<int64_t>(w.dst_md.get_size()));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bound_memory(w.src_md, src, 0)},
                                         {DNNL_ARG_WEIGHTS, weights_[w.weights]},
                                         {DNNL_ARG_DST, bound_memory(w.dst_md, dst, 1)}};
    if (bias_) args.emplace(DNNL_ARG_BIAS, *bias_);
    if (w.scratchpad_md.get_size() > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD, bound_memory(w.scratchpad_md, slot + scratchpad_at, 2));
    w.conv.execute(s, args);
    if (!out_kept_) w.dst_reorder.run(s, w.dst_md, dst, plain_rows(w.out_rows), out + plain_at);
  }

  memory::desc user_src_, full_src_;  // the whole input in NCHW and NHWC
  std::vector<Width> widths_;
  std::vector<Chunk> chunks_;
  std::vector<memory> weights_;  // one per distinct layout oneDNN picked
  std::optional<memory> bias_;
  int64_t c_ = 0, w_ = 0, o_ = 0, oh_ = 0, ow_ = 0;
  bool grouped_ = false, stem_ = false;
  bool src_kept_ = false, out_kept_ = false, residual_kept_ = false;
  std::string impl_;
};

std::unique_ptr<LibraryKernel> NhwcConv::make(const ir::Graph& graph, const KernelGroup& group,
                                              const ConstantBytes& constant_bytes) {
  const ir::Node& node = graph.node(group.nodes.front());
  if (!is_nhwc_conv_node(graph, node)) return nullptr;
  const tiling::ConvShape c = tiling::conv_shape(graph, node);
  if (c.n != 1) return nullptr;
  const bool depthwise = c.groups > 1 && c.cg == 1 && c.og == 1;
  const void* wbytes = constant_bytes(node.inputs[1]);
  const void* bbytes = node.inputs.size() > 2 ? constant_bytes(node.inputs[2]) : nullptr;
  if (!wbytes || (node.inputs.size() > 2 && !bbytes)) return nullptr;
  std::optional<Epilogue> epilogue = map_epilogue(graph, group, 1, node.outputs[0]);
  // Later chunks read input rows an earlier one's result may not overwrite.
  if (!epilogue || epilogue->residual == node.inputs[0]) return nullptr;
  auto k = std::make_unique<NhwcConv>();
  if (!k->bind_conv(graph, group, *epilogue)) return nullptr;
  k->c_ = c.c;
  k->w_ = c.w;
  k->o_ = c.o;
  k->oh_ = c.oh;
  k->ow_ = c.ow;
  k->grouped_ = c.groups > 1 && !depthwise;
  k->stem_ = image_stem(c);
  const auto f32 = memory::data_type::f32;
  k->user_src_ = memory::desc({1, c.c, c.h, c.w}, f32, Tag::nchw);
  k->full_src_ = memory::desc({1, c.c, c.h, c.w}, f32, Tag::nhwc);
  const memory::dims wdims = conv_weight_dims(c, depthwise, c.o);
  // Chunks of output rows, at most one a row.
  const int64_t t = work_chunks(c.o * c.cg * c.kh * c.kw * c.oh * c.ow, c.oh, min_chunk_macs(c));
  const int64_t window = (c.kh - 1) * c.dh;  // rows past a window's first
  OneOmpThread one_thread;
  try {
    dnnl::engine& eng = cpu_engine();
    dnnl::primitive_attr attr;
    attr.set_post_ops(epilogue->ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    memory user_w(memory::desc(wdims, f32, c.groups > 1 ? Tag::goihw : Tag::oihw), eng, const_cast<void*>(wbytes));
    for (int64_t i = 0; i < t; ++i) {
      // Output rows [r0, r1) read input rows [top, bottom], those outside the image padding.
      const int64_t r0 = i * c.oh / t, r1 = (i + 1) * c.oh / t;
      const int64_t top = r0 * c.sh - c.pt, bottom = (r1 - 1) * c.sh - c.pt + window;
      const int64_t in_begin = std::max<int64_t>(0, top), in_end = std::min(c.h, bottom + 1);
      if (in_end <= in_begin) return nullptr;  // rows of padding alone
      Width want;
      want.in_rows = in_end - in_begin;
      want.out_rows = r1 - r0;
      want.pad_top = in_begin - top;
      want.pad_bottom = bottom + 1 - in_end;
      auto same = [&](const Width& w) {
        return w.in_rows == want.in_rows && w.out_rows == want.out_rows && w.pad_top == want.pad_top &&
               w.pad_bottom == want.pad_bottom;
      };
      Chunk chunk{in_begin, r0, static_cast<size_t>(std::find_if(k->widths_.begin(), k->widths_.end(), same) -
                                                    k->widths_.begin())};
      if (chunk.width == k->widths_.size()) {
        const memory::desc src({1, c.c, want.in_rows, c.w}, f32, Tag::nhwc);
        const memory::desc dst({1, c.o, want.out_rows, c.ow}, f32, Tag::nhwc);
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::convolution_direct, src,
                                             memory::desc(wdims, f32, Tag::any),
                                             bbytes ? memory::desc({c.o}, f32, Tag::x) : memory::desc(), dst,
                                             {c.sh, c.sw}, {c.dh - 1, c.dw - 1}, {want.pad_top, c.pl},
                                             {want.pad_bottom, c.pr});
        dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
        if (!jit_implementation(pd) || pd.src_desc() != src || pd.dst_desc() != dst) return nullptr;
        want.src_md = src;
        want.dst_md = dst;
        want.scratchpad_md = pd.scratchpad_desc();
        want.conv = dnnl::convolution_forward(pd);
        // Weights reordered once per layout oneDNN picks (the chunks' primitives share one).
        auto held = std::find_if(k->weights_.begin(), k->weights_.end(),
                                 [&](const memory& m) { return m.get_desc() == pd.weights_desc(); });
        want.weights = static_cast<size_t>(held - k->weights_.begin());
        if (held == k->weights_.end()) {
          memory reordered(pd.weights_desc(), eng);
          dnnl::stream s(eng);
          dnnl::reorder(user_w, reordered).execute(s, user_w, reordered);
          s.wait();
          k->weights_.push_back(std::move(reordered));
        }
        if (k->impl_.empty()) k->impl_ = pd.impl_info_str();
        k->widths_.push_back(std::move(want));
      }
      k->chunks_.push_back(chunk);
    }
    if (bbytes) {
      k->bias_ = memory(memory::desc({c.o}, f32, Tag::x), eng);
      std::memcpy(k->bias_->get_data_handle(), bbytes, static_cast<size_t>(c.o) * sizeof(float));
    }
  } catch (const dnnl::error&) {
    return nullptr;  // no NHWC implementation for this shape/post-op chain
  }
  k->layout();
  return k;
}

}  // namespace

bool nhwc_graph(const ir::Graph& graph) {
  const ChannelBlocking& blocking = channel_blocking();
  if (!blocking.available || blocking.block != 16) return false;
  for (const ir::Node& node : graph.nodes) {
    if (!is_nhwc_conv_node(graph, node)) continue;
    const tiling::ConvShape c = tiling::conv_shape(graph, node);
    const bool depthwise = c.cg == 1 && c.og == 1;
    if (c.groups > 1 && !depthwise && (c.cg % blocking.block != 0 || c.og % blocking.block != 0)) return true;
  }
  return false;
}

std::unique_ptr<LibraryKernel> make_nhwc_conv(const ir::Graph& graph, const KernelGroup& group,
                                              const ConstantBytes& constant_bytes) {
  return NhwcConv::make(graph, group, constant_bytes);
}

}  // namespace carve::jit::dnnl_kernels
