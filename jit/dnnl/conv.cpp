// oneDNN as the kernel provider of f32 convolutions (library_kernel.h).
//
// Why: oneDNN's blocked direct convolutions run 3x3/1x1/strided convs at 115-125 GFLOP/s on
// one core here, against 57-90 for carve's implicit GEMM (docs/benchmarks.md, "Library
// kernels: oneDNN convolutions"). A run: the input reordered into oneDNN's layout (nChw16c on
// AVX-512, nChw8c on AVX2: channel_blocking()) unless the runtime keeps it blocked, one call
// per chunk of output channels with the epilogue as post-ops, the result reordered back into
// NCHW unless kept blocked. A fused residual add is a `sum` post-op over the residual copied
// (or reordered) into the result first. Weights are reordered once, when the group is taken.
//
// Epilogue nodes taken (in the group's order, each reading the chain's current value):
// relu, clip, sigmoid, silu, tanh, x * sigmoid(x) (swish), x * hard_sigmoid(x) with
// alpha 1/6 and beta 1/2 (hard-swish), add of a tensor of the output's shape (at most one).
// Then, last and without a residual, a transpose to NHWC (perm 0, 2, 3, 1; a pair the
// runtime merges, library_pair): each chunk's result is reordered straight into its channels
// of the transposed tensor, where a transpose kernel would take another pass.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "carve/jit/tiles.h"
#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

// A conv whose result is transposed to NHWC costs one reorder of its result whichever runs
// it (the transpose's pass, or the library's reorder into the transposed tensor), so only
// its input reorder counts, against a larger budget: convnext_tiny's 7x7 depthwise convs
// (1/49 of an element a multiply-add) ran 0.29 ms generated plus 0.09 for the transpose at
// 56x56 and 96 channels, oneDNN's jit_dw in nChw16c 0.14 ms without the reorders.
constexpr double kTransposedReorderBudgetPerMac = 0.05;

// Whether `node` transposes a 4-D NCHW tensor to NHWC.
bool to_nhwc(const ir::Graph& graph, const ir::Node& node) {
  if (node.op != ir::OpKind::kTranspose || node.inputs.size() != 1 || node.outputs.size() != 1) return false;
  if (graph.value(node.inputs[0]).type.shape.rank() != 4) return false;
  auto perm = node.attrs.find("perm");
  return perm != node.attrs.end() && perm->second.is_ints() && perm->second.as_ints() == std::vector<int64_t>{0, 2, 3, 1};
}

// Tiles: phase 0 (absent when oneDNN reads the input as it is) reorders the input into
// the blocked layout in scratch, once; phase 1 has one tile per chunk of output channels
// (whole 16-channel blocks, as even as they go), each a call of its width's primitive on
// its slice of the weights, writing its slice of the output. The chunks depend on the
// shape only (chunk_count()). Operands the runtime keeps blocked (use_blocked) need no
// reorder: with one image a chunk of 16k channels is one contiguous slice in NCHW, nChw8c
// and nChw16c alike. A depthwise or grouped chunk reads only its groups' channels of the
// input: chunks of whole groups, cut where both the input and the output channels are
// whole blocks (slice_units()), so a slice is contiguous in NCHW and the blocked layouts.
class DnnlConv final : public TwoPhaseConvKernel {
 public:
  std::string describe() const override {
    std::string text = describe_chunks(impl_, "channel");
    const std::string blocked = kept_operands(src_blocked_, residual_blocked_, out_blocked_);
    if (!blocked.empty()) text += ", " + channel_blocking().name + blocked;
    if (transposed_out_) text += ", result transposed to NHWC";
    return text;
  }
  std::string blocked_layout(int32_t operand) const override {
    if (operand == x_index_ && src_blockable_) return channel_blocking().name;
    if ((operand == out_index_ || operand == residual_index_) && dst_blockable_) return channel_blocking().name;
    return {};
  }
  bool worth_it(const std::vector<int32_t>& blocked) const override {
    if (stem_) return true;
    auto kept = [&](int32_t operand) { return std::find(blocked.begin(), blocked.end(), operand) != blocked.end(); };
    double cost = 0;
    if (full_src_md_ != (kept(x_index_) ? blocked_full_src_ : user_src_)) cost += input_cost_;
    auto result_cost = [&](int32_t operand) {
      const bool in_layout = kept(operand) ? blocked_result_ : plain_result_;
      return in_layout ? 0.0 : output_cost_;
    };
    if (transposed_out_) return cost < kTransposedReorderBudgetPerMac;
    cost += result_cost(out_index_);
    if (residual_index_ >= 0) cost += result_cost(residual_index_);
    return cost < (grouped_ ? kGroupedReorderBudgetPerMac : kReorderBudgetPerMac);
  }
  void use_blocked(int32_t operand) override {
    src_blocked_ = src_blocked_ || operand == x_index_;
    out_blocked_ = out_blocked_ || operand == out_index_;
    residual_blocked_ = residual_blocked_ || operand == residual_index_;
    layout();
  }

  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes);

 private:
  static std::unique_ptr<DnnlConv> make_chunked(const ir::Graph& graph, const KernelGroup& group,
                                                const ConstantBytes& constant_bytes, int64_t chunks, int64_t unit);
  // One primitive per chunk width (at most three: q and q + 1 blocks, a short last one).
  struct Width {
    int64_t channels = 0;
    dnnl::convolution_forward conv;
    memory::desc src_md, dst_md, weights_md, scratchpad_md;
    memory::desc user_dst_slice;  // this width's channels inside the whole NCHW output
    memory::desc blocked_src, blocked_dst, plain_dst;  // blocked input and result, dense NCHW result
    Reorder dst_reorder, residual_reorder;
    std::string impl;
  };
  struct Chunk {
    int64_t first_channel = 0;
    size_t width = 0;
    memory weights;
    std::optional<memory> bias;
  };

  int64_t num_chunks() const override { return static_cast<int64_t>(chunks_.size()); }
  // Whether width w's result is in the layout of a value kept blocked or plain (NHWC when
  // transposed).
  bool result_in(const Width& w, bool blocked) const {
    if (transposed_out_) return !blocked && w.dst_md == w.user_dst_slice;
    return blocked ? w.dst_md == w.blocked_dst : plain_result_ && w.dst_md == w.plain_dst;
  }
  // Whether the conv writes the output's slice directly (else its chunk slot in scratch):
  // the output's layout, and the residual's when there is one (a residual in another layout
  // is reordered into the result first, and the two may share bytes).
  bool dst_is_out(const Width& w) const {
    return result_in(w, out_blocked_) && (residual_index_ < 0 || result_in(w, residual_blocked_));
  }
  // The output's (or residual's) slice of width w's channels as kept.
  const memory::desc& kept_slice(const Width& w, bool blocked) const { return blocked ? w.blocked_dst : w.user_dst_slice; }

  // Reorders and the scratch layout for the operands' layouts.
  void layout() {
    input_slices_.clear();
    const memory::desc& src_as_kept = src_blocked_ ? blocked_full_src_ : user_src_;
    if (full_src_md_ != src_as_kept) input_slices_ = input_slices(src_as_kept, full_src_md_);
    int64_t slot = 0;
    for (Width& w : widths_) {
      w.dst_reorder = {};
      w.residual_reorder = {};
      if (!result_in(w, out_blocked_)) w.dst_reorder = make_reorder(w.dst_md, kept_slice(w, out_blocked_));
      if (residual_index_ >= 0 && !result_in(w, residual_blocked_))
        w.residual_reorder = make_reorder(kept_slice(w, residual_blocked_), w.dst_md);
      const int64_t result = dst_is_out(w) ? 0 : align64(static_cast<int64_t>(w.dst_md.get_size()));
      slot = std::max(slot, result + align64(static_cast<int64_t>(w.scratchpad_md.get_size())));
    }
    lay_out_scratch(input_tiles() > 0 ? static_cast<int64_t>(full_src_md_.get_size()) : 0, slot);
  }

  void run_chunk(dnnl::stream& s, void* const* operands, int64_t index) const override {
    const Chunk& chunk = chunks_[static_cast<size_t>(index)];
    const Width& w = widths_[chunk.width];
    std::byte* scratch_base = scratch(operands);
    std::byte* src = (input_tiles() > 0 ? scratch_base : static_cast<std::byte*>(operands[x_index_])) +
                     (sliced_input_ ? chunk.first_channel / og_ * cg_ * src_plane_bytes_ : 0);
    std::byte* slot = chunk_slot(operands, index);
    // This chunk's channels: one image, or the plain slice's start (a channel's first pixel
    // in the transposed result).
    const int64_t slice = chunk.first_channel * (transposed_out_ ? int64_t{sizeof(float)} : plane_bytes_);
    const int64_t slice_bytes = w.channels * plane_bytes_;
    auto* out = static_cast<std::byte*>(operands[out_index_]);
    std::byte* dst = dst_is_out(w) ? out + slice : slot;
    if (residual_index_ >= 0) {
      std::byte* residual = static_cast<std::byte*>(operands[residual_index_]) + slice;
      if (w.residual_reorder.prim) {
        w.residual_reorder.run(s, kept_slice(w, residual_blocked_), residual, w.dst_md, dst);
      } else if (residual != dst) {  // already in the result's layout
        std::memcpy(dst, residual, static_cast<size_t>(slice_bytes));
      }
    }
    const int64_t scratchpad_at = dst_is_out(w) ? 0 : align64(static_cast<int64_t>(w.dst_md.get_size()));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bound_memory(w.src_md, src, 0)},
                                         {DNNL_ARG_WEIGHTS, chunk.weights},
                                         {DNNL_ARG_DST, bound_memory(w.dst_md, dst, 1)}};
    if (chunk.bias) args.emplace(DNNL_ARG_BIAS, *chunk.bias);
    if (w.scratchpad_md.get_size() > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD, bound_memory(w.scratchpad_md, slot + scratchpad_at, 2));
    w.conv.execute(s, args);
    if (w.dst_reorder.prim) {
      w.dst_reorder.run(s, w.dst_md, dst, kept_slice(w, out_blocked_), out + slice);
    } else if (dst != out + slice) {
      std::memcpy(out + slice, dst, static_cast<size_t>(slice_bytes));
    }
  }

  // The whole input: NCHW, in the blocked layout, and in oneDNN's layout.
  memory::desc user_src_, blocked_full_src_, full_src_md_;
  std::vector<Width> widths_;
  std::vector<Chunk> chunks_;
  // The blocked layout (channel_blocking) in place of NCHW: one image, whole channel blocks
  // (no padding: the same bytes), and oneDNN's layout for that side in every width.
  bool src_blockable_ = false, dst_blockable_ = false;
  bool plain_result_ = false;  // every width writes dense NCHW of one image: the output's slice
  bool blocked_result_ = false;  // every width writes the blocked layout
  bool grouped_ = false;  // groups > 1, not depthwise
  bool stem_ = false;     // worth it in any layout (image_stem)
  bool transposed_out_ = false;  // the result is the NHWC transpose of the conv's (to_nhwc)
  bool sliced_input_ = false;  // each chunk reads its groups' input channels (depthwise, grouped)
  int64_t og_ = 1, cg_ = 1;    // output and input channels per group
  bool depthwise_ = false, src_blocked_ = false, out_blocked_ = false, residual_blocked_ = false;
  int64_t plane_bytes_ = 0, src_plane_bytes_ = 0;  // one output / input channel of one image
  std::string impl_;
};

// The fewest output channels a chunk has: four channel blocks, the most oneDNN's kernels
// compute per pass. Narrower chunks halve that and read the input more often. AVX2 (32
// channels): resnet18 at 1 thread 54 ms with 16-channel chunks against 48, squeezenet1_0 at
// 2 threads 16.0 against 12.5. AVX-512 (64 channels; it was 16): at 1 thread densenet121
// 30.3 ms against 27.7, googlenet 15.8 against 14.8, inception_v3 56.5 against 54.0,
// squeezenet1_0 7.6 against 7.4, resnet18 within noise; 32 channels ran within 2 % of 64.
int64_t min_chunk_channels() { return 4 * channel_blocking().block; }

// Whether a conv is tried with oneDNN's Winograd kernels first (F(2x2, 3x3) or F(4x4, 3x3),
// on AVX-512 in nChw16c): dense 3x3, stride 1, no dilation, whole blocks of channels. At 1
// thread they ran the 12 shapes measured (resnet18's four, densenet121's and googlenet's
// among the rest) 1.2-2.6x faster than the direct kernel (resnet18's 64 -> 64 at 56x56: 0.43
// against 0.87 ms; 128 -> 128 at 28x28: 0.37 against 0.95; densenet121's 128 -> 32 at 7x7,
// the least: 0.012 against 0.014), within 2.1e-6 of it relative to the largest output; each
// output channel's bytes do not depend on the chunk it is computed in (docs/jit-numerics.md).
bool winograd_first(const tiling::ConvShape& c) {
  return channel_blocking().block == 16 && c.groups == 1 && c.kh == 3 && c.kw == 3 && c.sh == 1 && c.sw == 1 &&
         c.dh == 1 && c.dw == 1 && c.c % 16 == 0 && c.o % 16 == 0;
}

// Output-channel chunks (work_chunks): up to 8, each of at least min_chunk_macs() of work,
// min_chunk_channels() and one `unit` of channels (slice_units: a block of 16, oneDNN's, or
// whole groups), an even count where it can be (two threads share the chunks evenly).
// Narrow outputs (MobileNet's 16-32-channel project convs) still split in two at `unit`: as one chunk they left the second thread idle (mobilenet_v2
// at 2 threads: 2.7 of 11.4 ms in single-tile launches). Measured on AVX2 against 32-channel
// chunks without these two rules: mobilenet_v2 at 2 threads 5.9-7.8 ms against 7.4-8.3,
// efficientnet_b0 11.8 against 13.0; at 1 thread 3-8 % slower on mobilenet_v3_small (more,
// smaller calls), within the noise elsewhere.
// A dense conv whose channels are not whole blocks keeps no value blocked: each chunk
// reorders its result, and each call and reorder costs a few microseconds. So at most two
// chunks, of at least 1.25M multiply-adds each: regnet_y_400mf's 440 -> 440 1x1 convs at 7x7
// (9.5M) ran 130 us as one chunk, 150-170 as six (150 as two) at 1 thread; at 2 threads
// regnet_y_400mf 3.91 ms with six against 3.74 with two. With 2.5M a chunk, the convs of
// 2.5M-5M ran on one thread at 2 threads: mobilenet_v3_large's 80 -> 200 and 80 -> 184 1x1
// convs at 14x14 (2.9M-3.1M) 38-46 us, 21-27 as two chunks; shufflenet_v2_x1_0's 116 -> 116
// and 232 -> 232 29-31 us, 18-19 as two. Summed launches (each the fastest of 5 processes),
// 1.25M against 2.5M: at 2 threads mobilenet_v3_large 1.79 ms against 1.89, shufflenet_v2_x1_0
// 1.10 against 1.17, efficientnet_b0 level; at 1 thread each two-chunk conv 0-2 us slower
// (mobilenet_v3_large level, shufflenet_v2_x1_0 +1 %).
constexpr int64_t kConvertingChunkMacs = 1'250'000;

int64_t chunk_count(const tiling::ConvShape& c, int64_t unit) {
  const int64_t macs = c.n * c.o * c.cg * c.kh * c.kw * c.oh * c.ow;
  auto count = [&](int64_t width) { return work_chunks(macs, (c.o + width - 1) / width, min_chunk_macs(c)); };
  const int64_t block = channel_blocking().block;
  if (c.groups == 1 && (c.o % block != 0 || c.c % block != 0)) return macs >= 2 * kConvertingChunkMacs ? 2 : 1;
  const int64_t t = count(std::max(unit, min_chunk_channels()));
  // Each Winograd chunk transforms the whole input again: resnet18's 256 -> 256 at 14x14
  // took 0.39 ms as one chunk and 0.70 as four.
  if (winograd_first(c)) return std::min<int64_t>(count(unit), 2);
  return t > 1 ? t : std::min<int64_t>(count(unit), 2);
}

// The output channels a chunk may be a multiple of, fewest first: 16 (a block), or for a
// grouped conv the fewest whole groups whose input and output channels are both whole 8- or
// 16-blocks (none when the groups do not divide into such units: then one chunk). oneDNN
// runs 8-channel groups in nChw8c on AVX-512 too, where slices of 8 channels are contiguous:
// regnet_y_400mf's 104 and 440 channels (13 and 55 groups) split only so, its 48 (6 groups)
// evenly. make_chunked declines a unit the layout oneDNN picks does not keep contiguous.
std::vector<int64_t> slice_units(const tiling::ConvShape& c) {
  if (c.groups == 1 || (c.cg == 1 && c.og == 1)) return {16};
  std::vector<int64_t> units;
  for (int64_t block : {8, 16}) {
    for (int64_t g = 1; g <= block; ++g) {
      if ((g * c.og) % block != 0 || (g * c.cg) % block != 0) continue;
      if (c.groups % g == 0 && (units.empty() || units.back() != g * c.og)) units.push_back(g * c.og);
      break;
    }
  }
  return units;
}

// Whether oneDNN's own pick (its brgemm kernel on NHWC, on AVX-512) goes first: a dense
// conv wider than 1x1 with at least 64 output channels at 28x28 or less. There the blocked
// direct kernel runs below the brgemm one (resnet18's 3x3 512->512 at 7x7: 1.60 ms against
// 1.17 with both reorders; ORT 1.22), and the reorders are small. Medians at 1 thread on
// AVX-512, against the blocked layout everywhere: resnet18 19.1 -> 16.9 ms, resnet50 41.0
// -> 39.1, inception_v3 55.8 -> 54.4 up to 14x14; then up to 28x28 as well vgg16 145.4 ->
// 141.2, inception_v3 54.6 -> 53.0, resnet18 17.3 -> 16.8, with googlenet, squeezenet1_0,
// densenet121 and regnet_y_400mf within 2 %. Up to 56x56 gained nothing more on vgg16 and
// cost resnet18 3 %. Without the 64 channels densenet121's 3x3 128->32 convs went too (29.4
// against 27.6: their neighbours stay blocked and convert); with every conv so, 1x1 and
// 56x56 included, densenet121 lost 16 %.
bool brgemm_first(const tiling::ConvShape& c) {
  return channel_blocking().block == 16 && c.groups == 1 && c.kh * c.kw > 1 && c.o >= 64 && c.oh * c.ow <= 28 * 28;
}

// The primitive for chunks of `channels` output channels: the blocked layout first (its
// reorders from and to NCHW move 64-byte runs, where oneDNN's own pick, brgconv's NHWC,
// transposes element by element: 0.22 ms per 32x56x56 result, a fifth of the conv; the blocked
// kernels run as fast), then oneDNN's choice -- the other way round where brgemm_first, and
// Winograd's blocked kernels before both where winograd_first.
// `src_tag`, when set, is the input's layout in every attempt (the chunks of a dense conv
// share one input reorder: oneDNN's pick for the whole conv binds every width). Only JIT-compiled
// kernels beat carve's own: never oneDNN's reference or im2col-GEMM fallbacks. nullopt when
// there is none.
std::optional<dnnl::convolution_forward::primitive_desc> conv_primitive(const tiling::ConvShape& c, bool depthwise,
                                                                       int64_t channels, bool bias,
                                                                       const dnnl::primitive_attr& attr,
                                                                       std::optional<Tag> src_tag) {
  const memory::dims src{c.n, c.groups > 1 ? channels / c.og * c.cg : c.c, c.h, c.w}, dst{c.n, channels, c.oh, c.ow};
  const memory::dims weights = conv_weight_dims(c, depthwise, channels);
  const ChannelBlocking& blocking = channel_blocking();
  auto layout = [&](int64_t ch) { return blocking.available && ch % blocking.block == 0 ? blocking.tag : Tag::any; };
  const bool brgemm = brgemm_first(c);
  struct Attempt {
    algorithm method;
    bool blocked;
  };
  std::vector<Attempt> attempts;
  if (winograd_first(c) && blocking.available && (!src_tag || *src_tag == blocking.tag))
    attempts.push_back({algorithm::convolution_winograd, true});
  attempts.push_back({algorithm::convolution_direct, !brgemm});
  attempts.push_back({algorithm::convolution_direct, brgemm});
  for (const auto [method, blocked] : attempts) {
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, method,
        memory::desc(src, memory::data_type::f32, src_tag ? *src_tag : blocked ? layout(src[1]) : Tag::any),
        memory::desc(weights, memory::data_type::f32, Tag::any),
        bias ? memory::desc({channels}, memory::data_type::f32, Tag::x) : memory::desc(),
        memory::desc(dst, memory::data_type::f32, blocked ? layout(channels) : Tag::any), {c.sh, c.sw},
        {c.dh - 1, c.dw - 1}, {c.pt, c.pl}, {c.pb, c.pr});
    try {
      dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
      if (!jit_implementation(pd)) continue;
      return pd;
    } catch (const dnnl::error&) {
      continue;  // no implementation for this layout
    }
  }
  return std::nullopt;
}

std::unique_ptr<LibraryKernel> DnnlConv::make(const ir::Graph& graph, const KernelGroup& group,
                                              const ConstantBytes& constant_bytes) {
  const ir::Node& node = graph.node(group.nodes.front());
  if (node.op != ir::OpKind::kConv2d) return nullptr;
  const tiling::ConvShape c = tiling::conv_shape(graph, node);
  // Chunks of each unit in turn, fewest channels first: make_chunked declines a unit whose
  // slices the layouts oneDNN picks do not keep contiguous, or whose widths it cannot run
  // in one input layout (one input reorder serves them all). Then one chunk.
  for (int64_t unit : slice_units(c)) {
    const int64_t chunks = chunk_count(c, unit);
    if (chunks == 1) break;
    if (std::unique_ptr<DnnlConv> k = make_chunked(graph, group, constant_bytes, chunks, unit)) return k;
  }
  return make_chunked(graph, group, constant_bytes, 1, 16);
}

std::unique_ptr<DnnlConv> DnnlConv::make_chunked(const ir::Graph& graph, const KernelGroup& group,
                                                 const ConstantBytes& constant_bytes, int64_t t, int64_t unit) {
  const ir::Node& node = graph.node(group.nodes.front());
  if (node.op != ir::OpKind::kConv2d) return nullptr;
  for (ir::ValueId v : node.inputs)
    if (graph.value(v).type.dtype != ir::DType::kF32) return nullptr;
  const tiling::ConvShape c = tiling::conv_shape(graph, node);
  const bool depthwise = c.groups > 1 && c.cg == 1 && c.og == 1;
  const bool grouped = c.groups > 1 && !depthwise;
  const void* wbytes = constant_bytes(node.inputs[1]);
  const void* bbytes = node.inputs.size() > 2 ? constant_bytes(node.inputs[2]) : nullptr;
  if (!wbytes || (node.inputs.size() > 2 && !bbytes)) return nullptr;
  // A last transpose to NHWC of the epilogue's result, without a residual: the result.
  const ir::Node& last = graph.node(group.nodes.back());
  const bool transposed = group.nodes.size() > 1 && last.op == ir::OpKind::kTranspose;
  if (transposed && !to_nhwc(graph, last)) return nullptr;
  std::optional<Epilogue> epilogue =
      map_epilogue(graph, group, 1, group.nodes.size() - (transposed ? 1 : 0), node.outputs[0]);
  if (!epilogue) return nullptr;
  if (transposed) {
    if (epilogue->residual != ir::kNoValue || last.inputs[0] != epilogue->result) return nullptr;
    epilogue->result = last.outputs[0];
  }
  auto k = std::make_unique<DnnlConv>();
  if (!k->bind_conv(graph, group, *epilogue)) return nullptr;
  k->depthwise_ = depthwise;
  k->grouped_ = grouped;
  k->transposed_out_ = transposed;
  k->sliced_input_ = depthwise || (grouped && t > 1);
  k->og_ = c.og;
  k->cg_ = c.cg;
  // A later chunk reads the input after an earlier one wrote its output: they must not
  // share bytes (the planner puts a conv's output in place over a dying input only when
  // the group has an elementwise input of its size: the residual, never the conv's x).
  if (epilogue->residual == node.inputs[0]) return nullptr;
  k->plane_bytes_ = c.oh * c.ow * static_cast<int64_t>(sizeof(float));
  k->src_plane_bytes_ = c.h * c.w * static_cast<int64_t>(sizeof(float));

  OneOmpThread one_thread;
  try {
    dnnl::engine& eng = cpu_engine();
    const memory::dims full_src{c.n, c.c, c.h, c.w};
    k->user_src_ = memory::desc(full_src, memory::data_type::f32, Tag::nchw);
    dnnl::primitive_attr attr;
    attr.set_post_ops(epilogue->ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The input layout of every width: oneDNN's pick for the whole conv (one chunk).
    std::optional<Tag> src_tag;
    if (t > 1 && !k->sliced_input_) {
      std::optional<dnnl::convolution_forward::primitive_desc> whole =
          conv_primitive(c, depthwise, c.o, bbytes != nullptr, attr, std::nullopt);
      if (whole) src_tag = tag_of(whole->src_desc());
    }
    // Chunk i: units [i * units / t, (i + 1) * units / t) of `unit` channels, the last cut at O.
    const int64_t units = (c.o + unit - 1) / unit;
    for (int64_t i = 0; i < t; ++i) {
      Chunk chunk;
      chunk.first_channel = i * units / t * unit;
      const int64_t channels = std::min((i + 1) * units / t * unit, c.o) - chunk.first_channel;
      auto same = [&](const Width& w) { return w.channels == channels; };
      chunk.width = static_cast<size_t>(std::find_if(k->widths_.begin(), k->widths_.end(), same) - k->widths_.begin());
      if (chunk.width == k->widths_.size()) {
        std::optional<dnnl::convolution_forward::primitive_desc> pd =
            conv_primitive(c, depthwise, channels, bbytes != nullptr, attr, src_tag);
        if (!pd) return nullptr;
        Width w;
        w.channels = channels;
        const memory::dims src{c.n, k->sliced_input_ ? channels / c.og * c.cg : c.c, c.h, c.w};
        const memory::dims dst{c.n, channels, c.oh, c.ow};
        w.src_md = pd->src_desc();
        w.dst_md = pd->dst_desc();
        w.weights_md = pd->weights_desc();
        w.scratchpad_md = pd->scratchpad_desc();
        w.user_dst_slice = memory::desc(dst, memory::data_type::f32,
                                        transposed ? memory::dims{c.o * c.oh * c.ow, 1, c.ow * c.o, c.o}
                                                   : memory::dims{c.o * c.oh * c.ow, c.oh * c.ow, c.ow, 1});
        w.blocked_src = memory::desc(src, memory::data_type::f32, channel_blocking().tag);
        w.blocked_dst = memory::desc(dst, memory::data_type::f32, channel_blocking().tag);
        w.plain_dst = memory::desc(dst, memory::data_type::f32, Tag::nchw);
        w.impl = pd->impl_info_str();
        w.conv = dnnl::convolution_forward(*pd);
        // Where the whole conv had no pick, the first width's binds the others.
        if (!k->sliced_input_ && !src_tag) src_tag = tag_of(w.src_md);
        k->widths_.push_back(std::move(w));
      }
      // Weights (and bias) reordered into owned memory now, once: a chunk's output
      // channels are consecutive OIHW rows.
      const Width& w = k->widths_[chunk.width];
      const memory::dims wdims = conv_weight_dims(c, depthwise, channels);
      const float* wsrc = static_cast<const float*>(wbytes) + chunk.first_channel * c.cg * c.kh * c.kw;
      memory user_w(memory::desc(wdims, memory::data_type::f32, c.groups > 1 ? Tag::goihw : Tag::oihw), eng,
                    const_cast<float*>(wsrc));
      chunk.weights = memory(w.weights_md, eng);
      dnnl::stream s(eng);
      dnnl::reorder(user_w, chunk.weights).execute(s, user_w, chunk.weights);
      s.wait();
      if (bbytes) {
        chunk.bias = memory(memory::desc({channels}, memory::data_type::f32, Tag::x), eng);
        std::memcpy(chunk.bias->get_data_handle(), static_cast<const float*>(bbytes) + chunk.first_channel,
                    static_cast<size_t>(channels) * sizeof(float));
      }
      k->chunks_.push_back(std::move(chunk));
    }
  } catch (const dnnl::error&) {
    return nullptr;  // oneDNN has no implementation for this shape/post-op chain
  }
  // The input layout is shared by every chunk (the reorder phase writes it once).
  const Width& first = k->widths_.front();
  if (k->sliced_input_) {
    // Every chunk reads its slice of one input in one layout (one image: a channel slice is
    // contiguous in it).
    const std::optional<Tag> tag = tag_of(first.src_md);
    if (!tag || tag == Tag::nhwc || (t > 1 && c.n != 1)) return nullptr;  // NHWC: channel slices strided
    if (t > 1 && unit % 16 != 0 && tag == Tag::nChw16c) return nullptr;  // 8-channel slices
    for (const Width& w : k->widths_)
      if (tag_of(w.src_md) != tag) return nullptr;
    k->full_src_md_ = memory::desc({c.n, c.c, c.h, c.w}, memory::data_type::f32, *tag);
  } else {
    k->full_src_md_ = first.src_md;
  }
  const bool one_image = c.n == 1;
  const ChannelBlocking& blocking = channel_blocking();
  // Blockable: the value's blocked bytes are its NCHW bytes (one image, whole blocks). A
  // dense conv whose primitive reads or writes another layout (brgemm's NHWC) converts
  // from and to the blocked layout as it would from and to NCHW, so its neighbours keep
  // theirs: googlenet's 3x3 branches made every inception concat, and the max pools and 1x1
  // convs reading it, NCHW. A sliced input is read in place: it must be the primitive's.
  k->blocked_full_src_ = memory::desc({c.n, c.c, c.h, c.w}, memory::data_type::f32, blocking.tag);
  k->src_blockable_ = blocking.available && one_image && (depthwise || c.c % blocking.block == 0);
  k->dst_blockable_ = blocking.available && one_image;
  k->plain_result_ = one_image;
  k->blocked_result_ = true;
  for (const Width& w : k->widths_) {
    const bool blocked_src = w.src_md == w.blocked_src, blocked_dst = w.dst_md == w.blocked_dst;
    if (depthwise ? !blocked_src || !blocked_dst : !k->sliced_input_ && w.src_md != first.src_md) return nullptr;
    if (k->sliced_input_) k->src_blockable_ = k->src_blockable_ && blocked_src && w.src_md.dims()[1] % blocking.block == 0;
    k->dst_blockable_ = k->dst_blockable_ && (blocked_dst || !k->sliced_input_) && w.channels % blocking.block == 0;
    k->plain_result_ = k->plain_result_ && w.dst_md == w.plain_dst;
    k->blocked_result_ = k->blocked_result_ && blocked_dst;
  }
  if (transposed) k->dst_blockable_ = k->plain_result_ = false;  // the result is NHWC
  k->stem_ = blocking.block == 16 && image_stem(c) && k->dst_blockable_ && k->blocked_result_;
  k->impl_ = first.impl;
  k->layout();
  return k;
}

}  // namespace

std::unique_ptr<LibraryKernel> make_conv(const ir::Graph& graph, const KernelGroup& group,
                                         const ConstantBytes& constant_bytes) {
  if (nhwc_graph(graph))
    if (std::unique_ptr<LibraryKernel> k = make_nhwc_conv(graph, group, constant_bytes)) return k;
  return DnnlConv::make(graph, group, constant_bytes);
}

}  // namespace carve::jit::dnnl_kernels

namespace carve::jit {

std::string library_blocked_layout() {
  const dnnl_kernels::ChannelBlocking& blocking = dnnl_kernels::channel_blocking();
  return blocking.available ? blocking.name : "";
}

int64_t library_channel_block() {
  const dnnl_kernels::ChannelBlocking& blocking = dnnl_kernels::channel_blocking();
  return blocking.available ? blocking.block : 0;
}

}  // namespace carve::jit
