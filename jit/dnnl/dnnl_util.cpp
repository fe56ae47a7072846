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

int64_t work_chunks(int64_t macs, int64_t units, int64_t min_macs) {
  for (int64_t t : {8, 6, 4, 2})
    if (t <= units && macs / t >= min_macs) return t;
  return 1;
}

int64_t min_chunk_macs(const tiling::ConvShape& c) {
  const bool depthwise = c.groups > 1 && c.cg == 1 && c.og == 1;
  return depthwise ? 100'000 : c.groups > 1 ? 500'000 : 1'000'000;
}

memory::dims conv_weight_dims(const tiling::ConvShape& c, bool depthwise, int64_t channels) {
  if (depthwise) return {channels, 1, 1, c.kh, c.kw};
  if (c.groups > 1) return {channels / c.og, c.og, c.cg, c.kh, c.kw};
  return {channels, c.c, c.kh, c.kw};
}

bool image_stem(const tiling::ConvShape& c) {
  return c.groups == 1 && c.c <= 4 && c.kh * c.kw > 1 && c.c * c.kh * c.kw <= 27;
}

std::optional<Tag> tag_of(const memory::desc& md) {
  for (Tag tag : {Tag::nChw16c, Tag::nChw8c, Tag::nchw, Tag::nhwc})
    if (md == memory::desc(md.dims(), memory::data_type::f32, tag)) return tag;
  return std::nullopt;
}

namespace {
// Slices of at least 128 KB: mobilenet_v2's 24 x 56 x 56 inputs (301 KB) in two slices
// (channels 0-15 and 16-23) ran 8-11 us faster at 2 threads than in one (a reorder call
// costs 1-2 us).
constexpr int64_t kMinSliceBytes = 128 << 10, kMaxSlices = 4;
}  // namespace

std::vector<InputSlice> input_slices(const memory::desc& from, const memory::desc& target) {
  const memory::dims d = from.dims();
  const std::optional<Tag> tag = tag_of(target);
  const int64_t bytes = static_cast<int64_t>(from.get_size());
  int64_t count = std::clamp<int64_t>(bytes / kMinSliceBytes, 1, kMaxSlices);
  const int64_t block = tag == Tag::nChw16c ? 16 : tag == Tag::nChw8c ? 8 : 0;
  const int64_t n = d[0], c = d[1], h = d[2], w = d[3];
  if (n != 1 || (block == 0 && tag != Tag::nhwc) || tag_of(from) != Tag::nchw) count = 1;
  if (block > 0) count = std::min(count, (c + block - 1) / block);  // the last block may be partial
  if (tag == Tag::nhwc) count = std::min(count, h);
  if (count <= 1) return {{make_reorder(from, target), from, target, 0, 0}};
  std::vector<InputSlice> slices;
  const auto f32 = memory::data_type::f32;
  const int64_t units = block > 0 ? (c + block - 1) / block : h;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t begin = i * units / count, end = (i + 1) * units / count;
    InputSlice slice;
    if (block > 0) {  // channels [begin, end) * block, the last cut at c
      const int64_t first = begin * block, channels = std::min(end * block, c) - first;
      slice.from = memory::desc({1, channels, h, w}, f32, Tag::nchw);
      slice.to = memory::desc({1, channels, h, w}, f32, *tag);
      slice.from_offset = slice.to_offset = first * h * w * static_cast<int64_t>(sizeof(float));
    } else {  // rows [begin, end): strided in NCHW, contiguous in NHWC
      const int64_t rows = end - begin;
      slice.from = memory::desc({1, c, rows, w}, f32, memory::dims{c * h * w, h * w, w, 1});
      slice.to = memory::desc({1, c, rows, w}, f32, Tag::nhwc);
      slice.from_offset = begin * w * static_cast<int64_t>(sizeof(float));
      slice.to_offset = begin * w * c * static_cast<int64_t>(sizeof(float));
    }
    slice.reorder = make_reorder(slice.from, slice.to);
    slices.push_back(std::move(slice));
  }
  return slices;
}

void TwoPhaseConvKernel::run(void* const* operands, int64_t tile_begin, int64_t tile_end) const {
  OneOmpThread one_thread;
  try {
    dnnl::stream s(cpu_engine());
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      if (t < input_tiles()) {
        const InputSlice& slice = input_slices_[static_cast<size_t>(t)];
        slice.reorder.run(s, slice.from, static_cast<std::byte*>(operands[x_index_]) + slice.from_offset, slice.to,
                          scratch(operands) + slice.to_offset);
      } else {
        run_chunk(s, operands, t - input_tiles());
      }
    }
    s.wait();
  } catch (const dnnl::error& err) {
    run_failed("convolution", err);
  }
}

bool TwoPhaseConvKernel::reads_at_run(int32_t operand) const {
  const bool copied = operand == weights_index_ || operand == bias_index_;
  return !copied || operand == x_index_ || operand == residual_index_;
}

bool TwoPhaseConvKernel::bind_conv(const ir::Graph& graph, const KernelGroup& group, const Epilogue& e) {
  const ir::Node& node = graph.node(group.nodes.front());
  int outputs = 0;
  for (const KernelOperand& o : group.operands) outputs += o.role == OperandRole::kOutput;
  x_index_ = operand_index(group, node.inputs[0], OperandRole::kInput);
  out_index_ = operand_index(group, e.result, OperandRole::kOutput);
  if (e.residual != ir::kNoValue) residual_index_ = operand_index(group, e.residual, OperandRole::kInput);
  if (outputs != 1 || x_index_ < 0 || out_index_ < 0 || (e.residual != ir::kNoValue && residual_index_ < 0))
    return false;
  scratch_index_ = scratch_operand_index(group);
  weights_index_ = operand_index(group, node.inputs[1], OperandRole::kInput);
  if (node.inputs.size() > 2) bias_index_ = operand_index(group, node.inputs[2], OperandRole::kInput);
  const tiling::ConvShape c = tiling::conv_shape(graph, node);
  const double taps = static_cast<double>(c.kh * c.kw);
  input_cost_ = static_cast<double>(c.sh * c.sw) / (static_cast<double>(c.og) * taps);
  output_cost_ = 1.0 / (static_cast<double>(c.cg) * taps);
  return true;
}

std::string TwoPhaseConvKernel::describe_chunks(const std::string& impl, const char* unit) const {
  std::string text = library_provider_name() + " " + impl;
  if (num_chunks() > 1) text += " x" + std::to_string(num_chunks()) + " " + unit + " chunks";
  return text;
}

std::string TwoPhaseConvKernel::kept_operands(bool input, bool residual, bool output) {
  return std::string(input ? " input" : "") + (residual ? " residual" : "") + (output ? " output" : "");
}

std::vector<int64_t> TwoPhaseConvKernel::phase_tiles() const {
  if (input_tiles() == 0) return {num_chunks()};
  return {input_tiles(), num_chunks()};
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

bool is_f32_one_image(const ir::TensorType& t) {
  return t.dtype == ir::DType::kF32 && t.shape.rank() == 4 && t.shape[0] == 1;
}

bool is_f32_nchw_one_image(const ir::TensorType& t) {
  const ChannelBlocking& blocking = channel_blocking();
  return blocking.available && t.dtype == ir::DType::kF32 && t.shape.rank() == 4 && t.shape[0] == 1 &&
         t.shape[1] % blocking.block == 0;
}

std::string BlockedOnlyKernel::blocked_layout(int32_t operand) const {
  const bool blocked = std::find(blocked_operands_.begin(), blocked_operands_.end(), operand) != blocked_operands_.end();
  return !blocked ? "" : layout_name_.empty() ? channel_blocking().name : layout_name_;
}

bool BlockedOnlyKernel::worth_it(const std::vector<int32_t>& blocked) const {
  return std::all_of(blocked_operands_.begin(), blocked_operands_.end(),
                     [&](int32_t o) { return std::find(blocked.begin(), blocked.end(), o) != blocked.end(); });
}

void BlockedOnlyKernel::split_units(int64_t units, int64_t elements, int64_t min_chunk, bool equal) {
  units_ = units;
  tiles_ = 1;
  for (int64_t t : {4, 2}) {
    if (t <= units && (!equal || units % t == 0) && elements / t >= min_chunk) {
      tiles_ = t;
      break;
    }
  }
}

std::string BlockedOnlyKernel::describe_tiles(const std::string& what, const char* blocked) const {
  const bool nhwc = !layout_name_.empty();
  return what + (tiles_ > 1 ? " x" + std::to_string(tiles_) + (nhwc ? " row chunks" : " channel chunks") : "") + ", " +
         (nhwc ? layout_name_ : channel_blocking().name) + " " + blocked;
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
