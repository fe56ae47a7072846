// Kernels that run in either layout, NCHW or the library's channel-blocked one, on each of
// their operands: inference batch norm (a per-channel affine map), relu, the two together
// (a pre-activation: batch norm read only by its relu, one pass over the data) and concat
// as a copy. Carve's own loops, compiled ahead of time: a model made of them and library convs
// compiles no code for them (densenet121's 62 batch norms, 62 relus and 58 concat copies
// were 2.1 s of LLVM compiling before its first result), and between library convs they
// keep the values blocked, so the convs need no reorders.
//
// Batch norm's map y = x * s[c] + b[c] (s = scale / sqrt(var + eps), b = bias - mean * s,
// folded in double when the group is taken) rounds once more than the reference's
// (x - mean) * inv * scale + bias, within its tolerance. Relu is the reference's
// x < 0 ? 0 : x (NaN stays NaN). A concat copies bytes: any dtype.
// Tiles: fixed by the shape alone when the group is taken, so any thread count writes the
// same bytes; each tile reads only the elements it writes (in place is safe).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

int64_t numel(const ir::TensorType& t) {
  auto n = t.shape.num_elements();
  return n.ok() ? *n : -1;
}

// Each data operand in either layout, as the runtime decides (LibraryKernel::use_blocked);
// the blocked layout is named for each when the shapes allow it (can_block_). An input and
// result in different layouts (where a chain of library kernels meets a plain value) cost
// what a reorder would: the kernel converts as it goes.
class EitherLayoutKernel : public LibraryKernel {
 public:
  std::vector<int64_t> phase_tiles() const override { return {tiles_}; }
  int64_t scratch_bytes() const override { return 0; }
  std::string blocked_layout(int32_t operand) const override {
    return can_block_ && is_data(operand) ? channel_blocking().name : "";
  }
  void use_blocked(int32_t operand) override {
    if (is_data(operand) && !is_blocked(operand)) blocked_.push_back(operand);
  }
  bool any_layout() const override { return true; }

 protected:
  bool is_data(int32_t operand) const {
    return std::find(data_operands_.begin(), data_operands_.end(), operand) != data_operands_.end();
  }
  bool is_blocked(int32_t operand) const { return std::find(blocked_.begin(), blocked_.end(), operand) != blocked_.end(); }
  // "carve <what>, nChw8c, 4 tiles": the layout when every data operand is blocked, "mixed"
  // when some are, else "plain".
  std::string describe_run(const std::string& what) const {
    const std::string layout = blocked_.empty()                           ? "plain"
                               : blocked_.size() == data_operands_.size() ? channel_blocking().name
                                                                          : "mixed";
    return "carve " + what + ", " + layout + (tiles_ > 1 ? ", " + std::to_string(tiles_) + " tiles" : "");
  }

  std::vector<int32_t> data_operands_;  // deduplicated
  std::vector<int32_t> blocked_;
  bool can_block_ = false;
  int64_t tiles_ = 1;
};

// Element i of channel c (of `channels`, whole blocks of B) at pixel p (of `spatial`) in
// either layout: plain c * spatial + p, blocked (c / B) * spatial * B + p * B + c % B.
inline int64_t element_at(bool blocked, int64_t block, int64_t spatial, int64_t c, int64_t p) {
  return blocked ? (c / block) * spatial * block + p * block + c % block : c * spatial + p;
}

// ---- batch norm and relu ----

struct AffineArgs {
  const float* x;
  float* y;
  const float* s;  // per channel, from the unit's first channel
  const float* b;
  int64_t units, spatial;
};

// x * s + b, then the relu when Relu: the same roundings as the two run one after the other.
template <bool Relu>
[[gnu::always_inline]] inline float affine_value(float x, float s, float b) {
  const float v = x * s + b;
  return Relu && v < 0.f ? 0.f : v;
}

// Plain: `units` planes of `spatial` elements, plane u on channel u. Always inlined, so that
// the AVX2 wrapper compiles it for AVX2.
template <bool Relu>
[[gnu::always_inline]] inline void affine_planes(const AffineArgs& a) {
  for (int64_t u = 0; u < a.units; ++u) {
    const float s = a.s[u], b = a.b[u];
    const float* x = a.x + u * a.spatial;
    float* y = a.y + u * a.spatial;
    for (int64_t i = 0; i < a.spatial; ++i) y[i] = affine_value<Relu>(x[i], s, b);
  }
}

// Blocked: `units` blocks of B channels, each `spatial` pixels of B lanes.
template <int B, bool Relu>
[[gnu::always_inline]] inline void affine_blocks(const AffineArgs& a) {
  for (int64_t u = 0; u < a.units; ++u) {
    float s[B], b[B];
    std::copy_n(a.s + u * B, B, s);
    std::copy_n(a.b + u * B, B, b);
    const float* x = a.x + u * a.spatial * B;
    float* y = a.y + u * a.spatial * B;
    for (int64_t i = 0; i < a.spatial; ++i)
      for (int l = 0; l < B; ++l) y[i * B + l] = affine_value<Relu>(x[i * B + l], s[l], b[l]);
  }
}

[[gnu::always_inline]] inline void relu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? 0.f : x[i];
}

using AffineFn = void (*)(const AffineArgs&);
using ReluFn = void (*)(const float*, float*, int64_t);

template <bool Relu>
void affine_planes_base(const AffineArgs& a) {
  affine_planes<Relu>(a);
}
template <int B, bool Relu>
void affine_blocks_base(const AffineArgs& a) {
  affine_blocks<B, Relu>(a);
}
void relu_base(const float* x, float* y, int64_t n) { relu_span(x, y, n); }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CARVE_EITHER_AVX2 1
template <bool Relu>
[[gnu::target("avx2,fma")]] void affine_planes_avx2(const AffineArgs& a) {
  affine_planes<Relu>(a);
}
template <int B, bool Relu>
[[gnu::target("avx2,fma")]] void affine_blocks_avx2(const AffineArgs& a) {
  affine_blocks<B, Relu>(a);
}
[[gnu::target("avx2")]] void relu_avx2(const float* x, float* y, int64_t n) { relu_span(x, y, n); }
#endif

bool have_avx2() {
#ifdef CARVE_EITHER_AVX2
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// block 16 or 8: the blocked loop; else the plain one.
template <bool Relu>
AffineFn pick_affine(int64_t block) {
#ifdef CARVE_EITHER_AVX2
  if (have_avx2())
    return block == 16  ? affine_blocks_avx2<16, Relu>
           : block == 8 ? affine_blocks_avx2<8, Relu>
                        : affine_planes_avx2<Relu>;
#endif
  return block == 16 ? affine_blocks_base<16, Relu> : block == 8 ? affine_blocks_base<8, Relu> : affine_planes_base<Relu>;
}

AffineFn pick_affine(int64_t block, bool relu) { return relu ? pick_affine<true>(block) : pick_affine<false>(block); }

ReluFn pick_relu() {
#ifdef CARVE_EITHER_AVX2
  if (have_avx2()) return relu_avx2;
#endif
  return relu_base;
}

// y = batch_norm(x, scale, bias, mean, var) with constant parameters, y = relu(x), or
// y = relu(batch_norm(...)) (a group of the two, the batch norm's result read by nothing
// else); f32. Tiles: runs of whole units -- blocks of B channels where the value may be
// blocked (they are contiguous, at the same bytes, in both layouts); else channels (batch
// norm; N > 1: (image, channel) planes) or runs of 16 elements (relu).
class ChannelMap final : public EitherLayoutKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes) {
    if (group.nodes.empty() || group.nodes.size() > 2) return nullptr;
    const ir::Node& node = graph.node(group.nodes.front());
    const bool affine = node.op == ir::OpKind::kBatchNorm;
    if (!affine && node.op != ir::OpKind::kRelu) return nullptr;
    if (node.inputs.size() != (affine ? 5u : 1u) || node.outputs.size() != 1) return nullptr;
    const ir::TensorType& x = graph.value(node.inputs[0]).type;
    if (x.dtype != ir::DType::kF32 || graph.value(node.outputs[0]).type != x) return nullptr;
    ir::ValueId result = node.outputs[0];
    if (group.nodes.size() == 2) {  // batch norm -> relu, the batch norm's result internal
      const ir::Node& relu = graph.node(group.nodes[1]);
      if (!affine || relu.op != ir::OpKind::kRelu || relu.inputs.size() != 1 || relu.inputs[0] != result ||
          relu.outputs.size() != 1 || operand_index(group, result, OperandRole::kOutput) >= 0)
        return nullptr;
      result = relu.outputs[0];
      if (graph.value(result).type != x) return nullptr;
    }
    auto k = std::make_unique<ChannelMap>();
    k->relu_after_ = group.nodes.size() == 2;
    k->elements_ = numel(x);
    k->x_ = operand_index(group, node.inputs[0], OperandRole::kInput);
    k->y_ = operand_index(group, result, OperandRole::kOutput);
    if (k->elements_ < 1 || k->x_ < 0 || k->y_ < 0) return nullptr;
    k->data_operands_ = {k->x_, k->y_};
    k->can_block_ = is_f32_nchw_one_image(x);
    k->block_ = channel_blocking().block;
    if (k->can_block_) k->spatial_ = x.shape[2] * x.shape[3];
    if (affine && !k->fold_batch_norm(graph, node, constant_bytes)) return nullptr;
    k->unit_elements_ = k->can_block_ ? k->block_ * k->spatial_ : affine ? k->spatial_ : 16;
    const int64_t units = (k->elements_ + k->unit_elements_ - 1) / k->unit_elements_;
    k->tiles_ = std::clamp<int64_t>(k->elements_ / (affine ? 16384 : 32768), 1, units);
    k->units_per_tile_ = (units + k->tiles_ - 1) / k->tiles_;
    k->tiles_ = (units + k->units_per_tile_ - 1) / k->units_per_tile_;
    k->relu_ = pick_relu();
    k->affine_plain_ = pick_affine(0, k->relu_after_);
    k->affine_blocked_ = pick_affine(k->block_, k->relu_after_);
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    const auto* x = static_cast<const float*>(operands[x_]);
    auto* y = static_cast<float*>(operands[y_]);
    const bool x_blocked = is_blocked(x_), y_blocked = is_blocked(y_);
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      const int64_t begin = t * units_per_tile_ * unit_elements_;
      const int64_t end = std::min(elements_, begin + units_per_tile_ * unit_elements_);
      if (x_blocked != y_blocked) {
        convert(x, y, x_blocked, begin, end);
      } else if (s_.empty()) {
        relu_(x + begin, y + begin, end - begin);
      } else {
        const int64_t c0 = begin / spatial_, channels = (end - begin) / spatial_;  // whole planes
        (x_blocked ? affine_blocked_ : affine_plain_)({x + begin, y + begin, s_.data() + c0, b_.data() + c0,
                                                       x_blocked ? channels / block_ : channels, spatial_});
      }
    }
  }
  std::string describe() const override {
    return describe_run(s_.empty() ? "relu" : relu_after_ ? "batch norm + relu" : "batch norm");
  }
  bool reads_at_run(int32_t operand) const override { return operand == x_; }

 private:
  // s = scale / sqrt(var + eps), b = bias - mean * s per plane, from constant parameters of
  // shape [C]; false when they are not.
  bool fold_batch_norm(const ir::Graph& graph, const ir::Node& node, const ConstantBytes& constant_bytes) {
    const ir::Shape& shape = graph.value(node.inputs[0]).type.shape;
    if (shape.rank() < 2 || shape[1] < 1) return false;
    const int64_t n = shape[0], c = shape[1];
    const float* p[4];
    for (size_t i = 0; i < 4; ++i) {
      const ir::TensorType& t = graph.value(node.inputs[i + 1]).type;
      p[i] = static_cast<const float*>(constant_bytes(node.inputs[i + 1]));
      if (!p[i] || t.dtype != ir::DType::kF32 || t.shape != ir::Shape{c}) return false;
    }
    const double eps = ir::float_attr_or(node.attrs, "epsilon", 1e-5);
    s_.resize(static_cast<size_t>(n * c));
    b_.resize(static_cast<size_t>(n * c));
    for (int64_t i = 0; i < n * c; ++i) {
      const auto ch = static_cast<size_t>(i % c);
      const double s = double(p[0][ch]) / std::sqrt(double(p[3][ch]) + eps);
      s_[static_cast<size_t>(i)] = static_cast<float>(s);
      b_[static_cast<size_t>(i)] = static_cast<float>(double(p[1][ch]) - double(p[2][ch]) * s);
    }
    spatial_ = elements_ / (n * c);
    return true;
  }

  // Elements [begin, end) of whole channel blocks, from x's layout into the other. In place
  // (y over x) it reads the run from a copy first.
  void convert(const float* x, float* y, bool x_blocked, int64_t begin, int64_t end) const {
    std::vector<float> copy;
    if (x == y) copy.assign(x + begin, x + end);
    const float* from = copy.empty() ? x + begin : copy.data();  // element `begin` of x
    for (int64_t c = begin / spatial_; c < end / spatial_; ++c) {
      const float s = s_.empty() ? 1.f : s_[static_cast<size_t>(c)], b = s_.empty() ? 0.f : b_[static_cast<size_t>(c)];
      for (int64_t p = 0; p < spatial_; ++p) {
        const float v = from[element_at(x_blocked, block_, spatial_, c, p) - begin];
        y[element_at(!x_blocked, block_, spatial_, c, p)] =
            s_.empty() ? (v < 0.f ? 0.f : v) : relu_after_ ? affine_value<true>(v, s, b) : affine_value<false>(v, s, b);
      }
    }
  }

  int32_t x_ = -1, y_ = -1;
  std::vector<float> s_, b_;  // empty: relu
  bool relu_after_ = false;   // batch norm, then relu
  int64_t elements_ = 0, spatial_ = 1, block_ = 16, unit_elements_ = 1, units_per_tile_ = 1;
  // This CPU's loops, picked when the group is taken.
  ReluFn relu_ = nullptr;
  AffineFn affine_plain_ = nullptr, affine_blocked_ = nullptr;
};

// ---- concat ----

// The output is `outer` rows; input i fills bytes [offset_i, offset_i + row_i) of each row.
struct ConcatPart {
  int32_t operand = -1;
  int64_t offset = 0, row = 0;
};

// y = concat(inputs, axis) as byte copies. Blocked: one image of rank 4 joined on channels,
// each input whole blocks, so each input's blocked bytes are the result's at the same
// offset as in NCHW. Tiles: equal runs of the result's bytes (whole 64-byte lines).
class Concat final : public EitherLayoutKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group) {
    if (group.nodes.size() != 1) return nullptr;
    const ir::Node& node = graph.node(group.nodes.front());
    if (node.op != ir::OpKind::kConcat || node.inputs.empty() || node.outputs.size() != 1) return nullptr;
    const ir::TensorType& out = graph.value(node.outputs[0]).type;
    const int rank = out.shape.rank();
    int64_t axis = 0;
    auto it = node.attrs.find("axis");
    if (it != node.attrs.end() && it->second.is_int()) axis = it->second.as_int();
    if (axis < 0) axis += rank;
    const int64_t size = ir::dtype_size(out.dtype), total = numel(out);
    if (rank < 1 || axis < 0 || axis >= rank || size < 1 || total < 1) return nullptr;
    int64_t inner = size;
    for (int d = static_cast<int>(axis) + 1; d < rank; ++d) inner *= out.shape[d];
    auto k = std::make_unique<Concat>();
    const int64_t block = channel_blocking().block;
    k->can_block_ = is_f32_nchw_one_image(out) && axis == 1;
    int64_t offset = 0;
    for (ir::ValueId v : node.inputs) {
      const ir::TensorType& in = graph.value(v).type;
      if (in.dtype != out.dtype || in.shape.rank() != rank) return nullptr;
      ConcatPart part{operand_index(group, v, OperandRole::kInput), offset, in.shape[static_cast<int>(axis)] * inner};
      if (part.operand < 0) return nullptr;
      k->can_block_ = k->can_block_ && in.shape[1] % block == 0;
      offset += part.row;
      if (part.row > 0) k->parts_.push_back(part);
      if (std::find(k->data_operands_.begin(), k->data_operands_.end(), part.operand) == k->data_operands_.end())
        k->data_operands_.push_back(part.operand);
    }
    k->row_ = offset;
    const int32_t y = operand_index(group, node.outputs[0], OperandRole::kOutput);
    if (y < 0 || k->row_ != out.shape[static_cast<int>(axis)] * inner) return nullptr;
    k->y_ = y;
    k->data_operands_.push_back(y);
    k->bytes_ = total * size;
    // Where the value may be blocked, tiles of whole channel blocks (a conversion's unit).
    k->spatial_ = rank == 4 ? out.shape[2] * out.shape[3] : 1;
    k->block_ = block;
    const int64_t unit = k->can_block_ ? block * k->spatial_ * size : 64;
    const int64_t units = (k->bytes_ + unit - 1) / unit;
    const int64_t tiles = std::clamp<int64_t>(k->bytes_ / (128 << 10), 1, std::min<int64_t>(units, 64));
    k->chunk_ = (units + tiles - 1) / tiles * unit;
    k->tiles_ = (k->bytes_ + k->chunk_ - 1) / k->chunk_;
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    auto* y = static_cast<std::byte*>(operands[y_]);
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      const int64_t lo = t * chunk_, hi = std::min(bytes_, lo + chunk_);
      for (int64_t r = lo / row_; r * row_ < hi; ++r) {
        for (const ConcatPart& part : parts_) {
          const int64_t begin = std::max(lo, r * row_ + part.offset);
          const int64_t end = std::min(hi, r * row_ + part.offset + part.row);
          if (begin >= end) continue;
          const auto* x = static_cast<const std::byte*>(operands[part.operand]);
          const int64_t from = r * part.row + (begin - r * row_ - part.offset);
          if (is_blocked(part.operand) == is_blocked(y_)) {
            std::memcpy(y + begin, x + from, static_cast<size_t>(end - begin));
          } else {
            convert(part, x, y, from, begin, end);
          }
        }
      }
    }
  }
  std::string describe() const override { return describe_run("concat copy"); }

 private:
  // One image's channels, whole blocks: input bytes [from, ...) into the result's [begin,
  // end), from the input's layout into the result's.
  void convert(const ConcatPart& part, const std::byte* x, std::byte* y, int64_t from, int64_t begin,
               int64_t end) const {
    const auto* xf = reinterpret_cast<const float*>(x);
    auto* yf = reinterpret_cast<float*>(y);
    const bool x_blocked = is_blocked(part.operand);
    const int64_t plane = spatial_ * static_cast<int64_t>(sizeof(float));
    const int64_t x_c0 = from / plane, y_c0 = begin / plane;
    for (int64_t c = 0; c < (end - begin) / plane; ++c)
      for (int64_t p = 0; p < spatial_; ++p)
        yf[element_at(!x_blocked, block_, spatial_, y_c0 + c, p)] =
            xf[element_at(x_blocked, block_, spatial_, x_c0 + c, p)];
  }

  std::vector<ConcatPart> parts_;
  int32_t y_ = -1;
  int64_t row_ = 1, bytes_ = 0, chunk_ = 1, spatial_ = 1, block_ = 16;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_channel_map(const ir::Graph& graph, const KernelGroup& group,
                                                const ConstantBytes& constant_bytes) {
  return ChannelMap::make(graph, group, constant_bytes);
}

std::unique_ptr<LibraryKernel> make_concat(const ir::Graph& graph, const KernelGroup& group) {
  return Concat::make(graph, group);
}

}  // namespace carve::jit::dnnl_kernels
