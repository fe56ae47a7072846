#include "kv_decoder/decoder_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "carve/ir/builder.h"

namespace carve::examples {
namespace {

using ir::DType;
using ir::ValueId;

std::vector<uint8_t> to_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<uint8_t> to_bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace

DecoderModel::DecoderModel(DecoderConfig config) : config_(config) {
  std::mt19937 rng(config.seed);
  auto add = [&](std::string name, int64_t count, float scale, float mean = 0.0f) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = mean + scale * dist(rng);
    weights_.emplace_back(std::move(name), std::move(values));
  };
  const int64_t d = config.d_model;
  add("tok_emb", config.vocab * d, 0.5f);
  add("pos_emb", config.max_seq * d, 0.1f);
  for (int64_t l = 0; l < config.layers; ++l) {
    const float s = 1.0f / std::sqrt(static_cast<float>(d));
    add(fmt::format("l{}.ln1_s", l), d, 0.1f, 1.0f);
    add(fmt::format("l{}.ln1_b", l), d, 0.1f);
    for (const char* w : {"wq", "wk", "wv", "wo"}) add(fmt::format("l{}.{}", l, w), d * d, s);
    add(fmt::format("l{}.ln2_s", l), d, 0.1f, 1.0f);
    add(fmt::format("l{}.ln2_b", l), d, 0.1f);
    add(fmt::format("l{}.w1", l), d * config.mlp, s);
    add(fmt::format("l{}.b1", l), config.mlp, 0.1f);
    add(fmt::format("l{}.w2", l), config.mlp * d, 1.0f / std::sqrt(static_cast<float>(config.mlp)));
    add(fmt::format("l{}.b2", l), d, 0.1f);
  }
  add("lnf_s", d, 0.1f, 1.0f);
  add("lnf_b", d, 0.1f);
  add("w_out", d * config.vocab, 1.0f / std::sqrt(static_cast<float>(d)));
}

std::vector<std::string> DecoderModel::cache_names() const {
  std::vector<std::string> names;
  for (int64_t l = 0; l < config_.layers; ++l) {
    names.push_back(fmt::format("k{}", l));
    names.push_back(fmt::format("v{}", l));
  }
  return names;
}

Result<ir::Graph> DecoderModel::full(int64_t tokens) const { return build(tokens, false, false); }
Result<ir::Graph> DecoderModel::prefill(int64_t tokens) const { return build(tokens, true, false); }
Result<ir::Graph> DecoderModel::decode() const { return build(1, true, true); }

// `decode`: one query row at input position `pos`, keys/values from the caches (all
// max_seq rows, masked to <= pos). Otherwise T query rows attending causally to the
// T keys/values computed in this graph.
Result<ir::Graph> DecoderModel::build(int64_t tokens, bool write_cache, bool decode) const {
  const DecoderConfig& c = config_;
  const int64_t d = c.d_model, h = c.heads, hd = d / c.heads, T = tokens;
  if (T < 1 || T > c.max_seq)
    return Status(ErrorCode::kInvalidArgument, fmt::format("{} tokens: must be in [1, {}]", T, c.max_seq));
  ir::GraphBuilder b(decode ? "decode" : (write_cache ? fmt::format("prefill_{}", T) : fmt::format("full_{}", T)));
  std::map<std::string, ValueId> w;
  auto weight = [&](const std::string& name, ir::Shape shape) {
    auto it = w.find(name);
    if (it != w.end()) return it->second;
    for (const auto& [n, values] : weights_)
      if (n == name) return w[name] = b.constant(name, DType::kF32, std::move(shape), to_bytes(values));
    return ir::kNoValue;
  };
  auto scalar = [&](const std::string& name, float v) { return b.constant(name, DType::kF32, {}, to_bytes({v})); };

  if (write_cache)
    for (const std::string& name : cache_names()) b.handle(name, DType::kF32, {c.max_seq, d});
  auto token_ids = b.input("tokens", DType::kI64, {T});
  ValueId pos = decode ? b.input("pos", DType::kI64, {}) : b.constant("pos0", DType::kI64, {}, to_bytes_of<int64_t>({0}));
  // Positions of the query rows, and the key positions attention may see.
  ValueId positions;
  ValueId mask;  // bool: [1, kv] for decode (key j <= pos), [T, T] causal otherwise
  if (decode) {
    positions = b.reshape(pos, {1});
    std::vector<int64_t> kv_pos(static_cast<size_t>(c.max_seq));
    for (int64_t j = 0; j < c.max_seq; ++j) kv_pos[static_cast<size_t>(j)] = j;
    auto key_positions = b.constant("key_positions", DType::kI64, {1, c.max_seq}, to_bytes_of(kv_pos));
    mask = b.less_equal(key_positions, pos);
  } else {
    std::vector<int64_t> row(static_cast<size_t>(T));
    std::vector<uint8_t> causal(static_cast<size_t>(T * T));
    for (int64_t i = 0; i < T; ++i) {
      row[static_cast<size_t>(i)] = i;
      for (int64_t j = 0; j < T; ++j) causal[static_cast<size_t>(i * T + j)] = j <= i;
    }
    positions = b.constant("positions", DType::kI64, {T}, to_bytes_of(row));
    mask = b.constant("causal_mask", DType::kBool, {T, T}, causal);
  }
  auto x = b.add(b.gather(weight("tok_emb", {c.vocab, d}), token_ids), b.gather(weight("pos_emb", {c.max_seq, d}), positions));
  auto scale = scalar("attn_scale", 1.0f / std::sqrt(static_cast<float>(hd)));
  auto masked = scalar("masked", -1e9f);
  const int64_t kv = decode ? c.max_seq : T;

  for (int64_t l = 0; l < c.layers; ++l) {
    auto p = [&](const char* n) { return fmt::format("l{}.{}", l, n); };
    auto n1 = b.layer_norm(x, weight(p("ln1_s"), {d}), weight(p("ln1_b"), {d}));
    auto q = b.matmul(n1, weight(p("wq"), {d, d}));
    auto k = b.matmul(n1, weight(p("wk"), {d, d}));
    auto v = b.matmul(n1, weight(p("wv"), {d, d}));
    if (write_cache) {
      b.write_handle_at(fmt::format("k{}", l), k, pos, 0);
      b.write_handle_at(fmt::format("v{}", l), v, pos, 0);
    }
    ValueId keys = k, values = v;
    if (decode) {  // attend over the whole cache, this token's row included
      keys = b.read_handle(fmt::format("k{}", l));
      values = b.read_handle(fmt::format("v{}", l));
    }
    auto qh = b.transpose(b.reshape(q, {T, h, hd}), {1, 0, 2});         // [h, T, hd]
    auto kt = b.transpose(b.reshape(keys, {kv, h, hd}), {1, 2, 0});     // [h, hd, kv]
    auto vh = b.transpose(b.reshape(values, {kv, h, hd}), {1, 0, 2});   // [h, kv, hd]
    auto scores = b.mul(b.matmul(qh, kt), scale);                       // [h, T, kv]
    auto probs = b.softmax(b.where(mask, scores, masked), -1);
    auto attn = b.reshape(b.transpose(b.matmul(probs, vh), {1, 0, 2}), {T, d});
    x = b.add(x, b.matmul(attn, weight(p("wo"), {d, d})));
    auto n2 = b.layer_norm(x, weight(p("ln2_s"), {d}), weight(p("ln2_b"), {d}));
    auto up = b.gelu(b.add(b.matmul(n2, weight(p("w1"), {d, c.mlp})), weight(p("b1"), {c.mlp})));
    x = b.add(x, b.add(b.matmul(up, weight(p("w2"), {c.mlp, d})), weight(p("b2"), {d})));
  }
  auto logits = b.matmul(b.layer_norm(x, weight("lnf_s", {d}), weight("lnf_b", {d})), weight("w_out", {d, c.vocab}));
  b.output(b.rename(logits, "logits"));
  return b.build();
}

}  // namespace carve::examples
