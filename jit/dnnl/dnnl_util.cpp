// Helpers shared by the oneDNN library kernels, and the provider's entry points
// (library_kernel.h): which kernel takes a group.
#include "dnnl_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

namespace carve::jit {
namespace dnnl_kernels {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

int32_t operand_index(const KernelGroup& group, ir::ValueId v, OperandRole role) {
  for (size_t i = 0; i < group.operands.size(); ++i)
    if (group.operands[i].value == v && group.operands[i].role == role) return static_cast<int32_t>(i);
  return -1;
}

int32_t scratch_operand_index(const KernelGroup& group) {
  int32_t n = 0;
  for (const KernelOperand& o : group.operands) n += o.role != OperandRole::kScratch;
  return n;
}

memory bound_memory(const memory::desc& md, void* handle, int slot) {
  struct Entry {
    memory::desc md;
    int slot = 0;
    memory object;
  };
  // Bounded: a thread sees each kernel's few descriptors; a program's worth fits many times.
  constexpr size_t kMaxEntries = 4096;
  thread_local std::unordered_map<uint64_t, Entry> cache;
  // The key hashes what tells descriptors apart in practice (shape, strides, blocks); the
  // full comparison below settles the rest (a collision only costs a new object).
  const dnnl_memory_desc_t& d = md.data;
  uint64_t key = static_cast<uint64_t>(slot) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(d.offset0);
  auto mix = [&key](int64_t v) { key = (key ^ static_cast<uint64_t>(v)) * 0x100000001B3ull; };
  for (int i = 0; i < d.ndims; ++i) mix(d.dims[i]);
  if (d.format_kind == dnnl_blocked) {
    for (int i = 0; i < d.ndims; ++i) mix(d.format_desc.blocking.strides[i]);
    for (int i = 0; i < d.format_desc.blocking.inner_nblks; ++i) mix(d.format_desc.blocking.inner_blks[i]);
  }
  auto it = cache.find(key);
  if (it != cache.end() && it->second.slot == slot && it->second.md == md) {
    it->second.object.set_data_handle(handle);
    return it->second.object;
  }
  if (cache.size() >= kMaxEntries) cache.clear();
  memory object(md, cpu_engine(), handle);
  cache.insert_or_assign(key, Entry{md, slot, object});
  return object;
}

void Reorder::run(dnnl::stream& s, const memory::desc& from_md, void* from, const memory::desc& to_md,
                  void* to) const {
  if (!prim) return;
  memory a = bound_memory(from_md, from, 0), b = bound_memory(to_md, to, 1);
  prim->execute(s, a, b);
}

Reorder make_reorder(const memory::desc& from, const memory::desc& to) {
  if (from == to) return {};  // same layout: nothing to do
  OneOmpThread one_thread;     // a primitive splits its work for the thread count at creation
  return {dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to))};
}

// Unary nodes that are one eltwise post-op each: (algorithm, alpha).
namespace {

std::optional<std::pair<algorithm, float>> unary_post_op(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kRelu: return std::pair{algorithm::eltwise_relu, 0.f};
    case ir::OpKind::kSigmoid: return std::pair{algorithm::eltwise_logistic, 0.f};
    case ir::OpKind::kSilu: return std::pair{algorithm::eltwise_swish, 1.f};
    case ir::OpKind::kTanh: return std::pair{algorithm::eltwise_tanh, 0.f};
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<Epilogue> map_epilogue(const ir::Graph& graph, const KernelGroup& group, size_t first,
                                     ir::ValueId start) {
  return map_epilogue(graph, group, first, group.nodes.size(), start);
}

std::optional<Epilogue> map_epilogue(const ir::Graph& graph, const KernelGroup& group, size_t first, size_t end,
                                     ir::ValueId start) {
  const ir::TensorType& out_type = graph.value(start).type;
  Epilogue e;
  struct Op { algorithm alg; float alpha, beta; bool sum; };
  std::vector<Op> ops;
  // `before`: the value the last node read, for x * gate(x); a hard-sigmoid gate is
  // hard-swish only once its mul follows (`gate_open` until then).
  ir::ValueId cur = start, before = ir::kNoValue;
  bool gate_open = false;
  for (size_t i = first; i < end; ++i) {
    const ir::Node& n = graph.node(group.nodes[i]);
    if (n.outputs.size() != 1 || graph.value(n.outputs[0]).type != out_type) return std::nullopt;
    if (gate_open && n.op != ir::OpKind::kMul) return std::nullopt;
    const bool unary_on_cur = n.inputs.size() == 1 && n.inputs[0] == cur;
    if (auto unary = unary_post_op(n.op)) {
      if (!unary_on_cur) return std::nullopt;
      ops.push_back({unary->first, unary->second, 0.f, false});
    } else if (n.op == ir::OpKind::kClip) {
      if (!unary_on_cur) return std::nullopt;
      ops.push_back({algorithm::eltwise_clip, static_cast<float>(ir::float_attr_or(n.attrs, "min", -INFINITY)),
                     static_cast<float>(ir::float_attr_or(n.attrs, "max", INFINITY)), false});
    } else if (n.op == ir::OpKind::kHardSigmoid) {
      if (!unary_on_cur || std::abs(ir::float_attr_or(n.attrs, "alpha", 0.2) - 1.0 / 6) > 1e-7 ||
          ir::float_attr_or(n.attrs, "beta", 0.5) != 0.5)
        return std::nullopt;
      ops.push_back({algorithm::eltwise_hardswish, 0.f, 0.f, false});
      gate_open = true;
    } else if (n.op == ir::OpKind::kMul) {
      // x * gate(x): the gate (sigmoid or hard-sigmoid) was the previous node.
      const bool pair = n.inputs.size() == 2 && before != ir::kNoValue &&
                        ((n.inputs[0] == before && n.inputs[1] == cur) ||
                         (n.inputs[1] == before && n.inputs[0] == cur));
      if (!pair || ops.empty()) return std::nullopt;
      Op& gate = ops.back();
      if (gate.alg == algorithm::eltwise_logistic) {
        gate = {algorithm::eltwise_swish, 1.f, 0.f, false};
      } else if (!gate_open) {
        return std::nullopt;
      }
      gate_open = false;
      cur = n.outputs[0];
      before = ir::kNoValue;
      continue;
    } else if (n.op == ir::OpKind::kAdd) {
      if (n.inputs.size() != 2 || e.residual != ir::kNoValue) return std::nullopt;
      const ir::ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[1] == cur ? n.inputs[0] : ir::kNoValue;
      if (other == ir::kNoValue || other == cur || graph.value(other).type != out_type) return std::nullopt;
      e.residual = other;
      ops.push_back({algorithm::undef, 0.f, 0.f, true});
    } else {
      return std::nullopt;
    }
    before = cur;
    cur = n.outputs[0];
  }
  if (gate_open) return std::nullopt;
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

bool jit_implementation(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  return impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos;
}

const ChannelBlocking& channel_blocking() {
  static const ChannelBlocking blocking = [] {
    OneOmpThread one_thread;
    for (const ChannelBlocking& candidate : {ChannelBlocking{16, Tag::nChw16c, "nChw16c", true},
                                             ChannelBlocking{8, Tag::nChw8c, "nChw8c", true}}) {
      const int64_t b = candidate.block;
      const memory::desc io({1, b, 8, 8}, memory::data_type::f32, candidate.tag);
      try {
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::convolution_direct, io,
                                             memory::desc({b, b, 3, 3}, memory::data_type::f32, Tag::any),
                                             memory::desc(), io, {1, 1}, {0, 0}, {1, 1}, {1, 1});
        dnnl::convolution_forward::primitive_desc pd(desc, cpu_engine());
        if (jit_implementation(pd) && pd.src_desc() == io && pd.dst_desc() == io) return candidate;
      } catch (const dnnl::error&) {
        // no kernel for this layout on this CPU
      }
    }
    return ChannelBlocking{};
  }();
  return blocking;
}

bool is_f32_nchw_one_image(const ir::TensorType& t) {
  const ChannelBlocking& blocking = channel_blocking();
  return blocking.available && t.dtype == ir::DType::kF32 && t.shape.rank() == 4 && t.shape[0] == 1 &&
         t.shape[1] % blocking.block == 0;
}

std::string BlockedOnlyKernel::blocked_layout(int32_t operand) const {
  const bool blocked = std::find(blocked_operands_.begin(), blocked_operands_.end(), operand) != blocked_operands_.end();
  return blocked ? channel_blocking().name : "";
}

bool BlockedOnlyKernel::worth_it(const std::vector<int32_t>& blocked) const {
  return std::all_of(blocked_operands_.begin(), blocked_operands_.end(),
                     [&](int32_t o) { return std::find(blocked.begin(), blocked.end(), o) != blocked.end(); });
}

int64_t BlockedOnlyKernel::split_channels(int64_t c, int64_t elements, int64_t min_chunk) {
  const int64_t blocks = c / channel_blocking().block;
  tiles_ = 1;
  for (int64_t t : {4, 2})
    if (blocks % t == 0 && elements / t >= min_chunk) {
      tiles_ = t;
      break;
    }
  return c / tiles_;
}

std::string BlockedOnlyKernel::describe_tiles(const std::string& what, const char* blocked) const {
  return what + (tiles_ > 1 ? " x" + std::to_string(tiles_) + " channel chunks" : "") + ", " + channel_blocking().name +
         " " + blocked;
}

void run_failed(const char* what, const dnnl::error& err) {
  std::fprintf(stderr, "carve: oneDNN %s failed at run time: %s\n", what, err.what());
  std::abort();
}

}  // namespace dnnl_kernels

std::unique_ptr<LibraryKernel> make_library_kernel(const ir::Graph& graph, const KernelGroup& group,
                                                   const ConstantBytes& constant_bytes) {
  if (group.nodes.empty()) return nullptr;
  switch (graph.node(group.nodes.front()).op) {
    case ir::OpKind::kConv2d: {
      // A squeeze-excite conv of one pixel: oneDNN's call (and its reorders, which the
      // runtime may then find not worth it) costs more than the whole product.
      auto pixel = dnnl_kernels::make_pixel_conv(graph, group, constant_bytes);
      return pixel ? std::move(pixel) : dnnl_kernels::make_conv(graph, group, constant_bytes);
    }
    case ir::OpKind::kMatmul: return dnnl_kernels::make_matmul(graph, group, constant_bytes);
    case ir::OpKind::kGlobalAvgPool: return dnnl_kernels::make_global_average_pool(graph, group);
    case ir::OpKind::kMul: return dnnl_kernels::make_channel_scale(graph, group);
    case ir::OpKind::kMaxPool:
    case ir::OpKind::kAvgPool: return dnnl_kernels::make_pool(graph, group);
    case ir::OpKind::kBatchNorm:
    case ir::OpKind::kRelu: return dnnl_kernels::make_channel_map(graph, group, constant_bytes);
    case ir::OpKind::kConcat: return dnnl_kernels::make_concat(graph, group);
    default: return nullptr;
  }
}

std::string library_provider_name() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace carve::jit
