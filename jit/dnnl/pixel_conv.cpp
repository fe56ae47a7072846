// A 1x1 convolution of one pixel -- a matrix-vector product -- with its activation: the two
// small convs of every squeeze-excite block ([1, C, 1, 1] -> [1, C', 1, 1]), which oneDNN
// declines. Carve's own loop, compiled ahead of time: efficientnet_b0 has 32 of them,
// regnet_y_400mf 22, mobilenet_v3_small 16, each one LLVM compile (about 25 ms) before the
// first result, for a few thousand multiply-adds at run time.
//
// y[o] = act(bias[o] + sum_i w[o][i] x[i]), summed in f32 over i in order, the activation in
// double as the reference's. Tiles: chunks of output channels (from the shape alone, each a
// whole number of 64-byte lines of y), so the bytes do not depend on the tiles or the thread
// count. The wide ones stream their weights from memory (mobilenet_v3_large's 960 -> 240:
// 0.9 MB, 27 us as one tile); at 2 threads a chunk per thread streams at twice the rate.
// Epilogue nodes taken, each reading the chain's current value: relu, sigmoid, silu, tanh,
// hard_sigmoid, clip, and x * act(x) (a mul of an activation's input and result: swish,
// hard-swish). One image of one pixel has the same bytes in NCHW and in the blocked
// layout, so the kernel names no layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "dnnl_util.h"

namespace carve::jit::dnnl_kernels {
namespace {

// Above this many multiply-adds (a classifier as a conv) oneDNN's conv, cut into chunks that
// run in parallel, takes it.
constexpr int64_t kMaxMacs = int64_t{1} << 20;
// The fewest multiply-adds a tile has (about 5 us: a task costs 1-2), and the output
// channels a tile's count is a multiple of (one 64-byte line of y: no two tiles write one).
constexpr int64_t kMinTileMacs = 48 << 10, kTileChannels = 16;

struct Activation {
  ir::OpKind op = ir::OpKind::kRelu;
  double a = 0, b = 0;  // hard_sigmoid: alpha, beta; clip: min, max
};

double activate(const Activation& act, double x) {
  switch (act.op) {
    case ir::OpKind::kRelu: return x < 0 ? 0.0 : x;
    case ir::OpKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ir::OpKind::kSilu: return x / (1.0 + std::exp(-x));
    case ir::OpKind::kTanh: return std::tanh(x);
    case ir::OpKind::kHardSigmoid: {
      const double y = act.a * x + act.b;
      return std::isnan(y) ? y : std::max(0.0, std::min(1.0, y));
    }
    case ir::OpKind::kClip: return x < act.a ? act.a : (x > act.b ? act.b : x);  // NaN falls through
    default: return x;
  }
}

bool is_one_pixel(const ir::TensorType& t) {
  return t.dtype == ir::DType::kF32 && t.shape.rank() == 4 && t.shape[0] == 1 && t.shape[2] == 1 && t.shape[3] == 1;
}

bool all_zero(const ir::Node& node, const char* name) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end()) return true;
  if (!it->second.is_ints()) return false;
  const auto& v = it->second.as_ints();
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

class PixelConv final : public LibraryKernel {
 public:
  static std::unique_ptr<LibraryKernel> make(const ir::Graph& graph, const KernelGroup& group,
                                             const ConstantBytes& constant_bytes) {
    const ir::Node& conv = graph.node(group.nodes.front());
    if (conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.outputs.size() != 1) return nullptr;
    const ir::TensorType& x = graph.value(conv.inputs[0]).type;
    const ir::TensorType& y = graph.value(conv.outputs[0]).type;
    if (!is_one_pixel(x) || !is_one_pixel(y) || !all_zero(conv, "pads")) return nullptr;
    if (auto g = conv.attrs.find("groups"); g != conv.attrs.end() && !(g->second.is_int() && g->second.as_int() == 1))
      return nullptr;
    const int64_t ci = x.shape[1], co = y.shape[1];
    if (ci * co > kMaxMacs) return nullptr;  // oneDNN's, in parallel chunks
    const ir::TensorType& wt = graph.value(conv.inputs[1]).type;
    const auto* w = static_cast<const float*>(constant_bytes(conv.inputs[1]));
    if (!w || wt.dtype != ir::DType::kF32 || wt.shape != ir::Shape{co, ci, 1, 1}) return nullptr;
    const float* bias = nullptr;
    if (conv.inputs.size() == 3) {
      bias = static_cast<const float*>(constant_bytes(conv.inputs[2]));
      const ir::TensorType& bt = graph.value(conv.inputs[2]).type;
      if (!bias || bt.dtype != ir::DType::kF32 || bt.shape != ir::Shape{co}) return nullptr;
    }
    auto k = std::make_unique<PixelConv>();
    ir::ValueId cur = conv.outputs[0], before = ir::kNoValue;  // before: the last activation's input
    for (size_t n = 1; n < group.nodes.size(); ++n) {
      const ir::Node& node = graph.node(group.nodes[n]);
      if (node.outputs.size() != 1 || graph.value(node.outputs[0]).type != y) return nullptr;
      Activation act{node.op};
      if (node.op == ir::OpKind::kMul) {  // x * act(x): swish, hard-swish
        if (node.inputs.size() != 2 || before == ir::kNoValue ||
            !((node.inputs[0] == cur && node.inputs[1] == before) || (node.inputs[0] == before && node.inputs[1] == cur)))
          return nullptr;
        k->acts_.push_back(act);
        before = ir::kNoValue;
        cur = node.outputs[0];
        continue;
      }
      if (node.inputs.size() != 1 || node.inputs[0] != cur) return nullptr;
      if (node.op == ir::OpKind::kHardSigmoid) {
        act.a = ir::float_attr_or(node.attrs, "alpha", 0.2);
        act.b = ir::float_attr_or(node.attrs, "beta", 0.5);
      } else if (node.op == ir::OpKind::kClip) {
        act.a = ir::float_attr_or(node.attrs, "min", -std::numeric_limits<double>::infinity());
        act.b = ir::float_attr_or(node.attrs, "max", std::numeric_limits<double>::infinity());
      } else if (node.op != ir::OpKind::kRelu && node.op != ir::OpKind::kSigmoid && node.op != ir::OpKind::kTanh &&
                 node.op != ir::OpKind::kSilu) {
        return nullptr;
      }
      k->acts_.push_back(act);
      before = cur;
      cur = node.outputs[0];
    }
    k->x_ = operand_index(group, conv.inputs[0], OperandRole::kInput);
    k->w_ = operand_index(group, conv.inputs[1], OperandRole::kInput);
    k->bias_operand_ = bias ? operand_index(group, conv.inputs[2], OperandRole::kInput) : -1;
    k->y_ = operand_index(group, cur, OperandRole::kOutput);
    if (k->x_ < 0 || k->w_ < 0 || k->y_ < 0 || (bias && k->bias_operand_ < 0)) return nullptr;
    k->ci_ = ci;
    k->co_ = co;
    k->tiles_ = work_chunks(ci * co, (co + kTileChannels - 1) / kTileChannels, kMinTileMacs);
    // w transposed to [ci][tile's channels], tile after tile: a tile streams its weights
    // as one run and its loop over outputs reads a row at a time.
    k->wt_.resize(static_cast<size_t>(ci * co));
    for (int64_t t = 0; t < k->tiles_; ++t) {
      const auto [begin, end] = k->tile_channels(t);
      for (int64_t o = begin; o < end; ++o)
        for (int64_t i = 0; i < ci; ++i) k->wt_[static_cast<size_t>(ci * begin + i * (end - begin) + o - begin)] = w[o * ci + i];
    }
    k->bias_.assign(static_cast<size_t>(co), 0.f);
    if (bias) std::copy_n(bias, co, k->bias_.begin());
    return k;
  }

  void run(void* const* operands, int64_t tile_begin, int64_t tile_end) const override {
    for (int64_t t = tile_begin; t < tile_end; ++t) run_tile(operands, t);
  }
  std::vector<int64_t> phase_tiles() const override { return {tiles_}; }
  int64_t scratch_bytes() const override { return 0; }
  std::string describe() const override {
    return "carve one-pixel conv " + std::to_string(ci_) + "->" + std::to_string(co_) +
           (tiles_ > 1 ? " x" + std::to_string(tiles_) + " channel chunks" : "");
  }
  bool reads_at_run(int32_t operand) const override { return operand != w_ && operand != bias_operand_; }

 private:
  // Output channels [begin, end) of tile t: from line t * lines / tiles_ of kTileChannels.
  std::pair<int64_t, int64_t> tile_channels(int64_t t) const {
    const int64_t lines = (co_ + kTileChannels - 1) / kTileChannels;
    return {t * lines / tiles_ * kTileChannels, std::min(co_, (t + 1) * lines / tiles_ * kTileChannels)};
  }
  void run_tile(void* const* operands, int64_t t) const {
    const auto [begin, end] = tile_channels(t);
    const auto* x = static_cast<const float*>(operands[x_]);
    auto* y = static_cast<float*>(operands[y_]);
    // y holds the sums (a conv's result never shares its input's bytes).
    std::copy(bias_.begin() + begin, bias_.begin() + end, y + begin);
    const float* tile_weights = wt_.data() + ci_ * begin;
    for (int64_t i = 0; i < ci_; ++i) {
      const float xi = x[i];
      const float* row = tile_weights + i * (end - begin);
      for (int64_t o = begin; o < end; ++o) y[o] += row[o - begin] * xi;
    }
    for (int64_t o = begin; o < end; ++o) {
      float before = y[o];
      for (const Activation& act : acts_) {
        if (act.op == ir::OpKind::kMul) {
          y[o] = before * y[o];
        } else {
          before = y[o];
          y[o] = static_cast<float>(activate(act, y[o]));
        }
      }
    }
  }
  int32_t x_ = -1, w_ = -1, bias_operand_ = -1, y_ = -1;
  int64_t ci_ = 0, co_ = 0, tiles_ = 1;
  std::vector<float> wt_, bias_;
  std::vector<Activation> acts_;
};

}  // namespace

std::unique_ptr<LibraryKernel> make_pixel_conv(const ir::Graph& graph, const KernelGroup& group,
                                               const ConstantBytes& constant_bytes) {
  return PixelConv::make(graph, group, constant_bytes);
}

}  // namespace carve::jit::dnnl_kernels
