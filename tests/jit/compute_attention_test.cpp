// The fused attention kernel (jit/llvm/emit_attention.cpp) against the reference
// interpreter: softmax(chain(Q x K)) x V as one group, for the forms exporters write
// (no chain; a scale; a scale and an additive mask; a scale and a causal where) and odd
// sizes (query rows that are not a multiple of the 8-row block, one key block, depths of
// 1 and 33, value depths that end in a masked vector). Tolerance: a dot product of
// max(depth, keys) terms.
#include <cstring>

#include "compute_test_util.h"

namespace carve::jit::computetest {
namespace {

enum class Chain { kNone, kScale, kScaleMask, kScaleCausal };

struct AttentionCase {
  std::vector<int64_t> batch;
  int64_t rows, keys, depth, value_depth;
  Chain chain;
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// q [batch.., rows, depth], k [batch.., depth, keys], v [batch.., keys, value_depth].
void build_attention(GraphBuilder& b, const AttentionCase& c) {
  auto dims = [&](int64_t x, int64_t y) {
    std::vector<int64_t> d = c.batch;
    d.push_back(x);
    d.push_back(y);
    return ir::Shape(d);
  };
  auto q = b.input("q", DType::kF32, dims(c.rows, c.depth));
  auto k = b.input("k", DType::kF32, dims(c.depth, c.keys));
  auto v = b.input("v", DType::kF32, dims(c.keys, c.value_depth));
  auto s = b.matmul(q, k);
  if (c.chain != Chain::kNone) s = b.div(s, b.constant("scale", DType::kF32, {}, f32_bytes({5.65f})));
  if (c.chain == Chain::kScaleMask) {
    std::vector<float> mask(static_cast<size_t>(c.keys));
    for (size_t j = 0; j < mask.size(); ++j) mask[j] = j % 3 == 2 ? -10000.0f : 0.0f;
    s = b.add(s, b.constant("mask", DType::kF32, {1, c.keys}, f32_bytes(mask)));
  }
  if (c.chain == Chain::kScaleCausal) {
    std::vector<uint8_t> keep(static_cast<size_t>(c.rows * c.keys));
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.keys; ++j) keep[static_cast<size_t>(i * c.keys + j)] = j <= i ? 1 : 0;
    auto cond = b.constant("causal", DType::kBool, {c.rows, c.keys}, keep);
    s = b.where(cond, s, b.constant("ninf", DType::kF32, {}, f32_bytes({-std::numeric_limits<float>::infinity()})));
  }
  b.output(b.rename(b.matmul(b.softmax(s, -1), v), "o"));
}

JitRunOptions attention_on(bool tile_by_tile) {
  JitRunOptions o;
  o.fusion.fuse_attention = true;
  o.tile_by_tile = tile_by_tile;
  return o;
}

// "" when the graph forms one attention group and matches the reference.
std::string check_attention(const AttentionCase& c, uint64_t seed, bool tile_by_tile) {
  GraphBuilder b("attention");
  build_attention(b, c);
  auto g = b.build();
  if (!g.ok()) return "build: " + g.status().to_string();
  auto order = ir::execution_order(*g);
  if (!order.ok()) return order.status().to_string();
  auto groups = form_kernel_groups(*g, *order, attention_on(false).fusion);
  if (!groups.ok()) return groups.status().to_string();
  bool fused = false;
  for (const KernelGroup& group : *groups) fused = fused || tiling::attention_shape(*g, group.nodes).valid;
  if (!fused) return "no attention group formed";
  const double tol = dot_tol(std::max(c.depth, c.keys));
  return jit_vs_reference(*g, random_inputs(*g, seed, -1, 1, {"q", "k", "v"}), tol, tol, attention_on(tile_by_tile));
}

TEST_CASE("jit/compute/attention/exporter forms against the reference") {
  if (skip_without_jit()) return;
  const std::vector<AttentionCase> cases = {
      {{8}, 64, 64, 32, 32, Chain::kNone},          // nn.MultiheadAttention (scale applied to Q before)
      {{1, 4}, 32, 32, 16, 16, Chain::kScaleMask},  // BERT: [b, h, T, d], additive mask
      {{1, 2}, 48, 48, 32, 32, Chain::kScaleCausal},  // GPT: causal where
      {{3}, 13, 16, 8, 8, Chain::kScale},           // one key block, a short row block
      {{2}, 7, 80, 33, 40, Chain::kScaleMask},      // depth 33, value depth 40 (a masked vector)
      {{2}, 9, 48, 1, 5, Chain::kScale},            // depth 1, value depth 5
      {{1}, 1, 16, 4, 64, Chain::kNone},            // one query row, value depth of 4 vectors
      {{2, 2}, 20, 96, 24, 72, Chain::kScaleMask},  // keys 96 (a lone vector after pairs)
  };
  for (const AttentionCase& c : cases) {
    for (bool tile_by_tile : {false, true}) {
      CAPTURE(c.rows);
      CAPTURE(c.keys);
      CAPTURE(c.depth);
      CAPTURE(c.value_depth);
      CAPTURE(static_cast<int>(c.chain));
      CAPTURE(tile_by_tile);
      std::string r = check_attention(c, 7, tile_by_tile);
      CHECK_MESSAGE(r.empty(), r);
    }
  }
}

TEST_CASE("jit/compute/attention/random shapes against the reference") {
  if (skip_without_jit()) return;
  CHECK(rc_check("fused attention shapes and chains", 15, [] {
    AttentionCase c;
    c.batch = {*rc::gen::inRange<int64_t>(1, 4)};
    c.rows = *rc::gen::inRange<int64_t>(1, 40);
    c.keys = 16 * *rc::gen::inRange<int64_t>(1, 6);
    c.depth = *rc::gen::inRange<int64_t>(1, 40);
    c.value_depth = *rc::gen::inRange<int64_t>(1, 70);
    c.chain = *rc::gen::element(Chain::kNone, Chain::kScale, Chain::kScaleMask);
    RC_ASSERT(check_attention(c, *rc::gen::arbitrary<uint64_t>(), false) == std::string());
  }));
}

}  // namespace
}  // namespace carve::jit::computetest
