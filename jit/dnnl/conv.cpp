// oneDNN as the kernel provider of f32 convolutions (library_kernel.h).
//
// Why: oneDNN's blocked direct convolutions (brgconv on AVX-512) run 3x3/1x1/strided
// convs at ~115 GFLOP/s on one core here, against 57-95 for carve's implicit GEMM
// (docs/benchmarks.md, "oneDNN convolutions"). carve keeps NCHW between kernels, so a run
// is: the input reordered into the blocked layout oneDNN picked (scratch), the conv with
// its epilogue as post-ops, the result reordered back into the NCHW output. A fused
// residual add is a `sum` post-op: the residual is reordered into the blocked result first.
// Weights are reordered once, here, when the group is taken.
//
// Epilogue nodes taken (in the group's order, each reading the chain's current value):
// relu, clip, sigmoid, silu, tanh, x * sigmoid(x) (swish), x * hard_sigmoid(x) with
// alpha 1/6 and beta 1/2 (hard-swish), add of a tensor of the output's shape (at most one).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "carve/jit/library_kernel.h"
#include "carve/jit/tiles.h"

namespace carve::jit {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using Tag = dnnl::memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Holds oneDNN's OpenMP team at one thread for calls from this thread (carve schedules the
// parallel work), restoring the caller's setting after: an application's own OpenMP use on
// this thread keeps its thread count.
class OneOmpThread {
 public:
  OneOmpThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int previous_;
};

int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

double attr_or(const ir::Node& n, const char* name, double fallback) {
  return ir::float_attr_or(n.attrs, name, fallback);
}

// The epilogue as oneDNN post-ops; nullopt when a node has no equivalent.
struct Epilogue {
  dnnl::post_ops ops;
  ir::ValueId residual = ir::kNoValue;  // the add's other operand
  ir::ValueId result = ir::kNoValue;    // the chain's last value
};

std::optional<Epilogue> map_epilogue(const ir::Graph& graph, const KernelGroup& group) {
  const ir::Node& conv = graph.node(group.nodes.front());
  const ir::TensorType& out_type = graph.value(conv.outputs[0]).type;
  Epilogue e;
  ir::ValueId cur = conv.outputs[0], before = ir::kNoValue;
  struct Op { algorithm alg; float alpha, beta; bool sum; };
  std::vector<Op> ops;
  for (size_t i = 1; i < group.nodes.size(); ++i) {
    const ir::Node& n = graph.node(group.nodes[i]);
    if (n.outputs.size() != 1 || graph.value(n.outputs[0]).type != out_type) return std::nullopt;
    const bool unary_on_cur = n.inputs.size() == 1 && n.inputs[0] == cur;
    const ir::ValueId next = n.outputs[0];
    switch (n.op) {
      case ir::OpKind::kRelu:
        if (!unary_on_cur) return std::nullopt;
        ops.push_back({algorithm::eltwise_relu, 0.f, 0.f, false});
        break;
      case ir::OpKind::kClip: {
        if (!unary_on_cur) return std::nullopt;
        const double lo = attr_or(n, "min", -INFINITY), hi = attr_or(n, "max", INFINITY);
        ops.push_back({algorithm::eltwise_clip, static_cast<float>(lo), static_cast<float>(hi), false});
        break;
      }
      case ir::OpKind::kSigmoid:
        if (!unary_on_cur) return std::nullopt;
        ops.push_back({algorithm::eltwise_logistic, 0.f, 0.f, false});
        break;
      case ir::OpKind::kSilu:
        if (!unary_on_cur) return std::nullopt;
        ops.push_back({algorithm::eltwise_swish, 1.f, 0.f, false});
        break;
      case ir::OpKind::kTanh:
        if (!unary_on_cur) return std::nullopt;
        ops.push_back({algorithm::eltwise_tanh, 0.f, 0.f, false});
        break;
      case ir::OpKind::kHardSigmoid:
        // Only as the gate of hard-swish (the next node multiplies by its input).
        if (!unary_on_cur || std::abs(attr_or(n, "alpha", 0.2) - 1.0 / 6) > 1e-7 ||
            attr_or(n, "beta", 0.5) != 0.5)
          return std::nullopt;
        ops.push_back({algorithm::eltwise_hardswish, 0.f, 0.f, false});  // completed by the mul
        break;
      case ir::OpKind::kMul: {
        // x * gate(x): the gate (sigmoid or hard-sigmoid) was the previous node.
        const bool pair = n.inputs.size() == 2 && before != ir::kNoValue &&
                          ((n.inputs[0] == before && n.inputs[1] == cur) ||
                           (n.inputs[1] == before && n.inputs[0] == cur));
        if (!pair || ops.empty()) return std::nullopt;
        Op& gate = ops.back();
        if (gate.alg == algorithm::eltwise_logistic) {
          gate = {algorithm::eltwise_swish, 1.f, 0.f, false};
        } else if (gate.alg != algorithm::eltwise_hardswish) {
          return std::nullopt;
        }
        cur = next;
        before = ir::kNoValue;
        continue;
      }
      case ir::OpKind::kAdd: {
        if (n.inputs.size() != 2 || e.residual != ir::kNoValue) return std::nullopt;
        const ir::ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[1] == cur ? n.inputs[0] : ir::kNoValue;
        if (other == ir::kNoValue || other == cur || graph.value(other).type != out_type) return std::nullopt;
        e.residual = other;
        ops.push_back({algorithm::undef, 0.f, 0.f, true});
        break;
      }
      default:
        return std::nullopt;
    }
    // A hard-sigmoid gate must be followed by its mul.
    if (ops.size() >= 2 && ops[ops.size() - 2].alg == algorithm::eltwise_hardswish && n.op != ir::OpKind::kMul)
      return std::nullopt;
    before = cur;
    cur = next;
  }
  if (!ops.empty() && ops.back().alg == algorithm::eltwise_hardswish &&
      graph.node(group.nodes.back()).op != ir::OpKind::kMul)
    return std::nullopt;
  for (const Op& op : ops) {
    if (op.sum) {
      e.ops.append_sum(1.f);
    } else {
      e.ops.append_eltwise(1.f, op.alg, op.alpha, op.beta);
    }
  }
  e.result = cur;
  return e;
}

// When oneDNN's conv beats carve's generated kernel, by measurement (docs/benchmarks.md,
// "oneDNN convolutions", single layers at 1 thread): its kernels run at about the same
// speed as carve's best or faster, but every reorder between NCHW and its blocked layout
// costs. A reorder moves one element per element of its tensor: the input's C * H * W
// against the conv's C * O/groups * KH * KW * OH * OW multiply-adds is stride^2 / (O/groups
// * KH * KW) per multiply-add, the result's (and a residual's) 1 / (C/groups * KH * KW).
// Worth it while the reorders it still needs stay under 0.015 per multiply-add: a 3x3
// conv of 64 channels with both (0.0035) yes; a 1x1 conv 32->192 at 56x56 with both (0.036:
// 0.63 ms vs 0.39 generated) no, but with its result kept blocked for the next library
// conv (0.005) yes; a depthwise conv (1/9 a side) only with neither.
constexpr double kReorderBudgetPerMac = 0.015;

int32_t operand_index(const KernelGroup& group, ir::ValueId v, OperandRole role) {
  for (size_t i = 0; i < group.operands.size(); ++i)
    if (group.operands[i].value == v && group.operands[i].role == role) return static_cast<int32_t>(i);
  return -1;
}

// One reorder between a plain NCHW tensor and the layout oneDNN chose (absent when equal).
struct Reorder {
  std::optional<dnnl::reorder> prim;
  void run(dnnl::stream& s, const memory::desc& from_md, void* from, const memory::desc& to_md, void* to) const {
    if (!prim) return;
    memory a(from_md, cpu_engine(), from), b(to_md, cpu_engine(), to);
    prim->execute(s, a, b);
  }
};

Reorder make_reorder(const memory::desc& from, const memory::desc& to) {
  if (from == to) return {};  // same layout: nothing to do
  return {dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to))};
}

// Tiles: phase 0 (absent when oneDNN reads the input as it is) reorders the input into
// the blocked layout in scratch, once; phase 1 has one tile per chunk of output channels,
// each a call of the same primitive (chunk-sized) on its slice of the weights, writing
// its slice of the output. The chunk count depends on the shape only (chunks()).
// Operands the runtime keeps in nChw16c (use_blocked) need no reorder: with one image a
// chunk of 16k channels is one contiguous slice in NCHW and in nChw16c alike. A depthwise
// chunk reads the same channels of the input.
class DnnlConv final : public LibraryKernel {
 public:
  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    OneOmpThread one_thread;
    try {
      dnnl::stream s(cpu_engine());
      for (int64_t t = tile_begin; t < tile_end; ++t) {
        if (t < input_tiles()) {
          src_reorder_.run(s, user_src_, operands[x_index_], full_src_md_, scratch(operands));
        } else {
          run_chunk(s, operands, t - input_tiles());
        }
      }
      s.wait();
    } catch (const dnnl::error& err) {
      // Execution of primitives created without error does not fail; if it ever does,
      // stop rather than leave a wrong result.
      std::fprintf(stderr, "carve: oneDNN convolution failed at run time: %s\n", err.what());
      std::abort();
    }
  }
  std::vector<int64_t> phase_tiles() const override {
    if (input_tiles() == 0) return {chunks_};
    return {input_tiles(), chunks_};
  }
  int64_t scratch_bytes() const override { return scratch_bytes_; }
  std::string describe() const override {
    std::string text = library_provider_name() + " " + impl_;
    if (chunks_ > 1) text += " x" + std::to_string(chunks_) + " channel chunks";
    std::string blocked;
    if (src_blocked_) blocked += " input";
    if (residual_blocked_) blocked += " residual";
    if (out_blocked_) blocked += " output";
    if (!blocked.empty()) text += ", nChw16c" + blocked;
    return text;
  }
  std::string blocked_layout(int32_t operand) const override {
    if (operand == x_index_ && src_blockable_) return "nChw16c";
    if ((operand == out_index_ || operand == residual_index_) && dst_blockable_) return "nChw16c";
    return {};
  }
  bool worth_it(const std::vector<int32_t>& blocked) const override {
    auto kept = [&](int32_t operand) { return std::find(blocked.begin(), blocked.end(), operand) != blocked.end(); };
    const bool plain_result_in_place = dst_md_ == plain_dst_ && one_image_;
    double cost = 0;
    if (!kept(x_index_) && full_src_md_ != user_src_) cost += input_cost_;
    if (!kept(out_index_) && !plain_result_in_place) cost += output_cost_;
    if (residual_index_ >= 0 && !kept(residual_index_) && !plain_result_in_place) cost += output_cost_;
    return cost < kReorderBudgetPerMac;
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
  int64_t input_tiles() const { return src_reorder_.prim ? 1 : 0; }
  std::byte* scratch(void* const* operands) const {
    return static_cast<std::byte*>(scratch_bytes_ > 0 ? operands[scratch_index_] : nullptr);
  }
  // Whether the conv writes the output's slice directly (else its chunk slot in scratch).
  // A blocked output over a plain residual goes through the slot: the two may share bytes.
  bool dst_is_out() const {
    return out_blocked_ ? residual_index_ < 0 || residual_blocked_ : dst_md_ == plain_dst_ && one_image_;
  }

  // Reorders and the scratch layout for the operands' layouts.
  void layout() {
    src_reorder_ = {};
    if (!src_blocked_ && full_src_md_ != user_src_) src_reorder_ = make_reorder(user_src_, full_src_md_);
    dst_reorder_ = {};
    residual_reorder_ = {};
    if (!out_blocked_ && !dst_is_out()) dst_reorder_ = make_reorder(dst_md_, user_dst_slice_);
    // A plain residual is copied as it is only into a plain result of one image.
    if (residual_index_ >= 0 && !residual_blocked_ && !(dst_md_ == plain_dst_ && one_image_))
      residual_reorder_ = make_reorder(user_dst_slice_, dst_md_);
    chunk_offset_ = src_reorder_.prim ? align64(static_cast<int64_t>(full_src_md_.get_size())) : 0;
    scratchpad_offset_ = dst_is_out() ? 0 : align64(static_cast<int64_t>(dst_md_.get_size()));
    chunk_stride_ = scratchpad_offset_ + align64(scratchpad_bytes_);
    scratch_bytes_ = chunk_offset_ + chunks_ * chunk_stride_;
  }

  void run_chunk(dnnl::stream& s, void* const* operands, int64_t chunk) const {
    std::byte* scratch_base = scratch(operands);
    std::byte* src = (src_reorder_.prim ? scratch_base : static_cast<std::byte*>(operands[x_index_])) +
                     chunk * src_slice_bytes_;
    std::byte* slot = scratch_base + chunk_offset_ + chunk * chunk_stride_;
    const int64_t slice = chunk * slice_bytes_;  // this chunk's channels (one image, or the plain slice's start)
    auto* out = static_cast<std::byte*>(operands[out_index_]);
    std::byte* dst = dst_is_out() ? out + slice : slot;
    if (residual_index_ >= 0) {
      std::byte* residual = static_cast<std::byte*>(operands[residual_index_]) + slice;
      if (residual_reorder_.prim) {
        residual_reorder_.run(s, user_dst_slice_, residual, dst_md_, dst);
      } else if (residual != dst) {  // already in the result's layout
        std::memcpy(dst, residual, static_cast<size_t>(slice_bytes_));
      }
    }
    memory src_m(src_md_, cpu_engine(), src), dst_m(dst_md_, cpu_engine(), dst);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, weights_[static_cast<size_t>(chunk)]}, {DNNL_ARG_DST, dst_m}};
    if (!biases_.empty()) args.emplace(DNNL_ARG_BIAS, biases_[static_cast<size_t>(chunk)]);
    if (scratchpad_bytes_ > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad_md_, cpu_engine(), slot + scratchpad_offset_));
    conv_.execute(s, args);
    if (dst_reorder_.prim) {
      dst_reorder_.run(s, dst_md_, dst, user_dst_slice_, out + slice);
    } else if (dst != out + slice) {
      std::memcpy(out + slice, dst, static_cast<size_t>(slice_bytes_));
    }
  }

  memory::desc user_src_, user_dst_slice_, src_md_, dst_md_, scratchpad_md_;
  memory::desc blocked_src_, blocked_dst_, plain_dst_;  // nChw16c input and chunk, dense NCHW chunk
  memory::desc full_src_md_;  // the whole input in oneDNN's layout (= src_md_ unless depthwise)
  std::vector<memory> weights_, biases_;  // per chunk
  dnnl::convolution_forward conv_;
  Reorder src_reorder_, dst_reorder_, residual_reorder_;
  int64_t chunks_ = 1;
  double input_cost_ = 0, output_cost_ = 0;  // a reorder's elements per multiply-add
  // nChw16c in place of NCHW: one image, whole blocks of 16 channels (no padding: the
  // same bytes), and oneDNN's layout for that side.
  bool src_blockable_ = false, dst_blockable_ = false;
  bool one_image_ = false, src_blocked_ = false, out_blocked_ = false, residual_blocked_ = false;
  int32_t x_index_ = -1, out_index_ = -1, residual_index_ = -1, scratch_index_ = -1;
  // Scratch: [blocked input][chunk 0: result | oneDNN scratchpad][chunk 1: ...]
  int64_t chunk_offset_ = 0, chunk_stride_ = 0, scratchpad_offset_ = 0, scratchpad_bytes_ = 0;
  int64_t slice_bytes_ = 0, src_slice_bytes_ = 0, scratch_bytes_ = 0;
  std::string impl_;
};

// Output-channel chunks: as many as keep each a whole number of 16-channel blocks (oneDNN's
// block) and >= 1M multiply-adds, up to 8 -- from the shape alone, never the thread count.
// (Fewer, larger calls are cheaper on one thread: a call costs a few microseconds.)
int64_t chunks(const tiling::ConvShape& c) {
  const int64_t macs = c.n * c.o * c.cg * c.kh * c.kw * c.oh * c.ow;
  for (int64_t t : {8, 6, 4, 3, 2})
    if (c.o % (16 * t) == 0 && macs / t >= 1'000'000) return t;
  return 1;
}

std::unique_ptr<LibraryKernel> DnnlConv::make(const ir::Graph& graph, const KernelGroup& group,
                                              const ConstantBytes& constant_bytes) {
  const ir::Node& node = graph.node(group.nodes.front());
  if (node.op != ir::OpKind::kConv2d) return nullptr;
  for (ir::ValueId v : node.inputs)
    if (graph.value(v).type.dtype != ir::DType::kF32) return nullptr;
  const tiling::ConvShape c = tiling::conv_shape(graph, node);
  const bool depthwise = c.groups > 1 && c.cg == 1 && c.og == 1;
  if (c.groups != 1 && !depthwise) return nullptr;
  const void* wbytes = constant_bytes(node.inputs[1]);
  const void* bbytes = node.inputs.size() > 2 ? constant_bytes(node.inputs[2]) : nullptr;
  if (!wbytes || (node.inputs.size() > 2 && !bbytes)) return nullptr;
  std::optional<Epilogue> epilogue = map_epilogue(graph, group);
  if (!epilogue) return nullptr;
  int outputs = 0;
  for (const KernelOperand& o : group.operands) outputs += o.role == OperandRole::kOutput;
  auto k = std::make_unique<DnnlConv>();
  const double taps = static_cast<double>(c.kh * c.kw);
  k->input_cost_ = static_cast<double>(c.sh * c.sw) / (static_cast<double>(c.og) * taps);
  k->output_cost_ = 1.0 / (static_cast<double>(c.cg) * taps);
  k->x_index_ = operand_index(group, node.inputs[0], OperandRole::kInput);
  k->out_index_ = operand_index(group, epilogue->result, OperandRole::kOutput);
  if (epilogue->residual != ir::kNoValue)
    k->residual_index_ = operand_index(group, epilogue->residual, OperandRole::kInput);
  if (outputs != 1 || k->x_index_ < 0 || k->out_index_ < 0 ||
      (epilogue->residual != ir::kNoValue && k->residual_index_ < 0))
    return nullptr;
  // A later chunk reads the input after an earlier one wrote its output: they must not
  // share bytes (the planner puts a conv's output in place over a dying input only when
  // the group has an elementwise input of its size: the residual, never the conv's x).
  if (epilogue->residual == node.inputs[0]) return nullptr;

  k->chunks_ = chunks(c);
  const int64_t co = c.o / k->chunks_, ohw = c.oh * c.ow;
  // A depthwise chunk reads its own channels only.
  const memory::dims full_src{c.n, c.c, c.h, c.w}, src{c.n, depthwise ? co : c.c, c.h, c.w},
      dst{c.n, co, c.oh, c.ow};
  const memory::dims weights = depthwise ? memory::dims{co, 1, 1, c.kh, c.kw} : memory::dims{co, c.c, c.kh, c.kw};
  OneOmpThread one_thread;
  try {
    dnnl::engine& eng = cpu_engine();
    k->user_src_ = memory::desc(full_src, memory::data_type::f32, Tag::nchw);
    // One chunk's channels inside the whole NCHW output (or residual).
    k->user_dst_slice_ = memory::desc(dst, memory::data_type::f32, memory::dims{c.o * ohw, ohw, c.ow, 1});
    memory::desc bias_md({co}, memory::data_type::f32, Tag::x);
    dnnl::primitive_attr attr;
    attr.set_post_ops(epilogue->ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The 16-channel blocked layout (nChw16c) first: its reorders from and to NCHW move
    // 64-byte runs, where oneDNN's own pick (brgconv's NHWC) transposes element by element
    // (0.22 ms per 32x56x56 result, a fifth of the conv; the blocked kernels run as fast).
    // Then oneDNN's choice. Only JIT-compiled direct kernels beat carve's own: never
    // oneDNN's reference or im2col-GEMM fallbacks.
    auto layout = [](int64_t channels) { return channels % 16 == 0 ? Tag::nChw16c : Tag::any; };
    std::optional<dnnl::convolution_forward::primitive_desc> chosen;
    for (bool blocked : {true, false}) {
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, algorithm::convolution_direct,
          memory::desc(src, memory::data_type::f32, blocked ? layout(c.c) : Tag::any),
          memory::desc(weights, memory::data_type::f32, Tag::any), bbytes ? bias_md : memory::desc(),
          memory::desc(dst, memory::data_type::f32, blocked ? layout(co) : Tag::any), {c.sh, c.sw},
          {c.dh - 1, c.dw - 1}, {c.pt, c.pl}, {c.pb, c.pr});
      try {
        dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
        const std::string impl = pd.impl_info_str();
        if (impl.rfind("ref", 0) == 0 || impl.find("gemm") != std::string::npos) continue;
        chosen = pd;
        break;
      } catch (const dnnl::error&) {
        continue;  // no implementation for this layout
      }
    }
    if (!chosen) return nullptr;
    const dnnl::convolution_forward::primitive_desc& pd = *chosen;
    k->blocked_src_ = memory::desc(src, memory::data_type::f32, Tag::nChw16c);
    k->blocked_dst_ = memory::desc(dst, memory::data_type::f32, Tag::nChw16c);
    if (depthwise && (pd.src_desc() != k->blocked_src_ || pd.dst_desc() != k->blocked_dst_)) return nullptr;
    k->impl_ = pd.impl_info_str();
    k->src_md_ = pd.src_desc();
    k->dst_md_ = pd.dst_desc();
    k->scratchpad_md_ = pd.scratchpad_desc();
    k->scratchpad_bytes_ = static_cast<int64_t>(k->scratchpad_md_.get_size());
    k->slice_bytes_ = co * ohw * static_cast<int64_t>(sizeof(float));
    // The whole input in oneDNN's layout (a depthwise chunk's is a slice of it).
    k->full_src_md_ = depthwise ? memory::desc(full_src, memory::data_type::f32, k->src_md_ == k->blocked_src_ ? Tag::nChw16c : Tag::nchw)
                                : k->src_md_;
    if (depthwise) k->src_slice_bytes_ = co * c.h * c.w * static_cast<int64_t>(sizeof(float));
    k->one_image_ = c.n == 1;
    k->plain_dst_ = memory::desc(dst, memory::data_type::f32, Tag::nchw);
    k->src_blockable_ = k->one_image_ && src[1] % 16 == 0 && k->src_md_ == k->blocked_src_;
    k->dst_blockable_ = k->one_image_ && co % 16 == 0 && k->dst_md_ == k->blocked_dst_;
    k->layout();
    // The scratch operand comes after every input and output (kernel.h's ABI order).
    k->scratch_index_ = static_cast<int32_t>(std::count_if(group.operands.begin(), group.operands.end(),
                                                             [](const KernelOperand& o) { return o.role != OperandRole::kScratch; }));

    // Weights (and bias), chunk by chunk, reordered into owned memory now, once. A chunk's
    // output channels are consecutive OIHW rows.
    dnnl::stream s(eng);
    const int64_t chunk_weights = co * c.cg * c.kh * c.kw;
    for (int64_t i = 0; i < k->chunks_; ++i) {
      const float* w = static_cast<const float*>(wbytes) + i * chunk_weights;
      memory user_w(memory::desc(weights, memory::data_type::f32, depthwise ? Tag::goihw : Tag::oihw), eng,
                    const_cast<float*>(w));
      k->weights_.emplace_back(pd.weights_desc(), eng);
      dnnl::reorder(user_w, k->weights_.back()).execute(s, user_w, k->weights_.back());
      if (bbytes) {
        k->biases_.emplace_back(bias_md, eng);
        std::memcpy(k->biases_.back().get_data_handle(), static_cast<const float*>(bbytes) + i * co,
                    bias_md.get_size());
      }
    }
    s.wait();
    k->conv_ = dnnl::convolution_forward(pd);
  } catch (const dnnl::error&) {
    return nullptr;  // oneDNN has no implementation for this shape/post-op chain
  }
  return k;
}

}  // namespace

std::unique_ptr<LibraryKernel> make_library_kernel(const ir::Graph& graph, const KernelGroup& group,
                                                   const ConstantBytes& constant_bytes) {
  if (group.nodes.empty()) return nullptr;
  return DnnlConv::make(graph, group, constant_bytes);
}

std::string library_provider_name() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace carve::jit
