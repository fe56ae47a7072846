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

// Whether oneDNN's conv beats carve's generated kernel for this shape, by measurement
// (docs/benchmarks.md, "oneDNN convolutions", single layers at 1 thread). Depthwise and
// grouped convs stay generated (carve's direct depthwise kernel runs 2-4x faster than
// oneDNN's plus the layout reorders). A dense conv pays two reorders (input into oneDNN's
// blocked layout, result back to NCHW) of about (C + O) * H * W elements against
// C * O * KH * KW * OH * OW multiply-adds: small channel counts and 1x1 kernels make
// the reorders dominate (32->192 1x1 at 56x56: 0.63 ms vs 0.39 generated), 3x3 and
// larger or wide 1x1 convs win (64->64 3x3 at 56x56: 2.11 vs 2.99 ms).
bool worth_it(const tiling::ConvShape& c) {
  if (c.groups != 1) return false;
  const double reorder_per_mac = (1.0 / static_cast<double>(c.c) + 1.0 / static_cast<double>(c.o)) /
                                 static_cast<double>(c.kh * c.kw);
  return reorder_per_mac < 0.015;
}

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
  if (from == to) return {};
  return {dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to))};
}

class DnnlConv final : public LibraryKernel {
 public:
  void run(void* const* operands, int64_t, int64_t) const override {
    OneOmpThread one_thread;
    try {
      dnnl::stream s(cpu_engine());
      auto* scratch = static_cast<std::byte*>(scratch_index_ >= 0 ? operands[scratch_index_] : nullptr);
      void* out = operands[out_index_];
      void* src = src_in_place_ ? operands[x_index_] : scratch + src_offset_;
      void* dst = dst_in_place_ ? out : scratch + dst_offset_;
      src_reorder_.run(s, user_src_, operands[x_index_], src_md_, src);
      if (residual_index_ >= 0) {
        if (dst_in_place_) {
          if (operands[residual_index_] != out)
            std::memcpy(out, operands[residual_index_], out_bytes_);
        } else {
          residual_reorder_.run(s, user_dst_, operands[residual_index_], dst_md_, dst);
        }
      }
      memory src_m(src_md_, cpu_engine(), src), dst_m(dst_md_, cpu_engine(), dst);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_m}};
      if (bias_) args.emplace(DNNL_ARG_BIAS, *bias_);
      if (scratchpad_bytes_ > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad_md_, cpu_engine(), scratch + scratchpad_offset_));
      conv_.execute(s, args);
      dst_reorder_.run(s, dst_md_, dst, user_dst_, out);
      s.wait();
    } catch (const dnnl::error& err) {
      // Execution of primitives created without error does not fail; if it ever does,
      // stop rather than leave a wrong result.
      std::fprintf(stderr, "carve: oneDNN convolution failed at run time: %s\n", err.what());
      std::abort();
    }
  }
  int64_t num_tiles() const override { return 1; }
  int64_t scratch_bytes() const override { return scratch_bytes_; }
  std::string describe() const override { return library_provider_name() + " " + impl_; }

  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes);

 private:
  memory::desc user_src_, user_dst_, src_md_, dst_md_, scratchpad_md_;
  memory weights_;
  std::optional<memory> bias_;
  dnnl::convolution_forward conv_;
  Reorder src_reorder_, dst_reorder_, residual_reorder_;
  bool src_in_place_ = false, dst_in_place_ = false;
  int32_t x_index_ = -1, out_index_ = -1, residual_index_ = -1, scratch_index_ = -1;
  int64_t src_offset_ = 0, dst_offset_ = 0, scratchpad_offset_ = 0, scratchpad_bytes_ = 0;
  int64_t scratch_bytes_ = 0;
  size_t out_bytes_ = 0;
  std::string impl_;
};

std::unique_ptr<LibraryKernel> DnnlConv::make(const ir::Graph& graph, const KernelGroup& group,
                                              const ConstantBytes& constant_bytes) {
  const ir::Node& node = graph.node(group.nodes.front());
  if (node.op != ir::OpKind::kConv2d) return nullptr;
  for (ir::ValueId v : node.inputs)
    if (graph.value(v).type.dtype != ir::DType::kF32) return nullptr;
  const tiling::ConvShape c = tiling::conv_shape(graph, node);
  if (!worth_it(c)) return nullptr;
  const void* wbytes = constant_bytes(node.inputs[1]);
  const void* bbytes = node.inputs.size() > 2 ? constant_bytes(node.inputs[2]) : nullptr;
  if (!wbytes || (node.inputs.size() > 2 && !bbytes)) return nullptr;
  std::optional<Epilogue> epilogue = map_epilogue(graph, group);
  if (!epilogue) return nullptr;
  int outputs = 0;
  for (const KernelOperand& o : group.operands) outputs += o.role == OperandRole::kOutput;
  auto k = std::make_unique<DnnlConv>();
  k->x_index_ = operand_index(group, node.inputs[0], OperandRole::kInput);
  k->out_index_ = operand_index(group, epilogue->result, OperandRole::kOutput);
  if (epilogue->residual != ir::kNoValue)
    k->residual_index_ = operand_index(group, epilogue->residual, OperandRole::kInput);
  if (outputs != 1 || k->x_index_ < 0 || k->out_index_ < 0 ||
      (epilogue->residual != ir::kNoValue && k->residual_index_ < 0))
    return nullptr;

  const memory::dims src{c.n, c.c, c.h, c.w}, dst{c.n, c.o, c.oh, c.ow};
  const memory::dims weights{c.o, c.c, c.kh, c.kw};
  OneOmpThread one_thread;
  try {
    dnnl::engine& eng = cpu_engine();
    k->user_src_ = memory::desc(src, memory::data_type::f32, Tag::nchw);
    k->user_dst_ = memory::desc(dst, memory::data_type::f32, Tag::nchw);
    memory::desc bias_md({c.o}, memory::data_type::f32, Tag::x);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, algorithm::convolution_direct,
        memory::desc(src, memory::data_type::f32, Tag::any), memory::desc(weights, memory::data_type::f32, Tag::any),
        bbytes ? bias_md : memory::desc(), memory::desc(dst, memory::data_type::f32, Tag::any), {c.sh, c.sw},
        {c.dh - 1, c.dw - 1}, {c.pt, c.pl}, {c.pb, c.pr});
    dnnl::primitive_attr attr;
    attr.set_post_ops(epilogue->ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
    k->impl_ = pd.impl_info_str();
    // Only the JIT-compiled direct kernels beat carve's own: not oneDNN's reference or
    // im2col-GEMM fallbacks.
    if (k->impl_.rfind("ref", 0) == 0 || k->impl_.find("gemm") != std::string::npos) return nullptr;
    k->src_md_ = pd.src_desc();
    k->dst_md_ = pd.dst_desc();
    k->scratchpad_md_ = pd.scratchpad_desc();
    k->scratchpad_bytes_ = static_cast<int64_t>(k->scratchpad_md_.get_size());
    k->src_in_place_ = k->src_md_ == k->user_src_;
    k->dst_in_place_ = k->dst_md_ == k->user_dst_;
    k->out_bytes_ = k->user_dst_.get_size();
    int64_t at = 0;
    if (!k->src_in_place_) {
      k->src_offset_ = at;
      at += align64(static_cast<int64_t>(k->src_md_.get_size()));
    }
    if (!k->dst_in_place_) {
      k->dst_offset_ = at;
      at += align64(static_cast<int64_t>(k->dst_md_.get_size()));
    }
    k->scratchpad_offset_ = at;
    at += align64(k->scratchpad_bytes_);
    k->scratch_bytes_ = at;
    // The scratch operand comes after every input and output (kernel.h's ABI order).
    if (at > 0)
      k->scratch_index_ = static_cast<int32_t>(std::count_if(group.operands.begin(), group.operands.end(),
                                                             [](const KernelOperand& o) { return o.role != OperandRole::kScratch; }));
    k->src_reorder_ = make_reorder(k->user_src_, k->src_md_);
    k->dst_reorder_ = make_reorder(k->dst_md_, k->user_dst_);
    if (k->residual_index_ >= 0) k->residual_reorder_ = make_reorder(k->user_dst_, k->dst_md_);

    // Weights (and bias) reordered into owned memory now, once.
    dnnl::stream s(eng);
    memory user_w(memory::desc(weights, memory::data_type::f32, Tag::oihw), eng, const_cast<void*>(wbytes));
    k->weights_ = memory(pd.weights_desc(), eng);
    dnnl::reorder(user_w, k->weights_).execute(s, user_w, k->weights_);
    if (bbytes) {
      k->bias_ = memory(bias_md, eng);
      std::memcpy(k->bias_->get_data_handle(), bbytes, bias_md.get_size());
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
