// A small GPT-style decoder built with carve's graph API: token embedding + learned
// positions, N pre-norm blocks (causal multi-head attention, GELU MLP), final norm,
// logits. Weights are deterministic (seeded). Three graphs share them:
//   full(T):    tokens[T] -> logits[T, vocab], causal attention over the T tokens;
//   prefill(T): full(T) that also writes every layer's K and V into the cache handles;
//   decode:     one token at position `pos` (an i64 scalar input) -> logits[1, vocab];
//               appends its K/V to the caches at `pos` and attends over positions <= pos.
// The caches are handles "k<l>" / "v<l>" of shape [max_seq, d_model].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "carve/ir/graph.h"

namespace carve::examples {

struct DecoderConfig {
  int64_t vocab = 64;
  int64_t d_model = 32;
  int64_t heads = 2;
  int64_t layers = 2;
  int64_t mlp = 64;
  int64_t max_seq = 32;
  uint32_t seed = 1234;
};

class DecoderModel {
 public:
  explicit DecoderModel(DecoderConfig config);
  const DecoderConfig& config() const { return config_; }

  Result<ir::Graph> full(int64_t tokens) const;
  Result<ir::Graph> prefill(int64_t tokens) const;
  Result<ir::Graph> decode() const;

  // Cache handle names, in layer order: k0, v0, k1, v1, ...
  std::vector<std::string> cache_names() const;

  // The seeded weights, name -> row-major values (shapes as in build(): matrices are
  // [in, out], used as x @ W), so peers (benchmarks/compare) can run the same model.
  const std::vector<std::pair<std::string, std::vector<float>>>& weights() const { return weights_; }

 private:
  struct Weights;
  Result<ir::Graph> build(int64_t tokens, bool write_cache, bool decode) const;

  DecoderConfig config_;
  std::vector<std::pair<std::string, std::vector<float>>> weights_;  // name -> values
};

}  // namespace carve::examples
