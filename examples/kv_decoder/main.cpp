// Greedy decoding with a GPT-style decoder whose K/V caches live in carve's handle region.
#include <fmt/format.h>

#include <chrono>

#include "kv_decoder/decoder_runner.h"

using namespace carve;

int main() {
  examples::DecoderModel model({});
  const auto& c = model.config();
  auto session = runtime::Session::create();
  if (!session.ok()) {
    fmt::print(stderr, "kv_decoder: {}\n", session.status().to_string());
    return 1;
  }
  const std::vector<int64_t> prompt{3, 14, 15, 9, 2, 6};
  auto runner = examples::DecoderRunner::create(**session, model, static_cast<int64_t>(prompt.size()));
  if (!runner.ok()) {
    fmt::print(stderr, "kv_decoder: {}\n", runner.status().to_string());
    return 1;
  }
  auto logits = (*runner)->prefill(prompt);
  if (!logits.ok()) {
    fmt::print(stderr, "kv_decoder: {}\n", logits.status().to_string());
    return 1;
  }
  int64_t token = examples::argmax(logits->data() + (prompt.size() - 1) * c.vocab, c.vocab);
  std::vector<int64_t> generated{token};
  const auto start = std::chrono::steady_clock::now();
  for (int64_t pos = static_cast<int64_t>(prompt.size()); pos + 1 < c.max_seq; ++pos) {
    auto step = (*runner)->decode(token, pos);
    if (!step.ok()) {
      fmt::print(stderr, "kv_decoder: {}\n", step.status().to_string());
      return 1;
    }
    token = examples::argmax(step->data(), c.vocab);
    generated.push_back(token);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("prompt {}\ngenerated {}\n", fmt::join(prompt, " "), fmt::join(generated, " "));
  fmt::print("decode: {} tokens in {:.2f} ms = {:.0f} tokens/s ({} layers, d_model {}, cache {} positions)\n",
             generated.size() - 1, seconds * 1e3, double(generated.size() - 1) / seconds, c.layers, c.d_model,
             c.max_seq);
  return 0;
}
