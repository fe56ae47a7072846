// Runs DecoderModel graphs with carve: prefill a prompt, then decode greedily one token
// at a time with the K/V caches in the handle region.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "carve/runtime/session.h"
#include "kv_decoder/decoder_model.h"

namespace carve::examples {

class DecoderRunner {
 public:
  static Result<std::unique_ptr<DecoderRunner>> create(runtime::Session& session, const DecoderModel& model,
                                                       int64_t prompt_tokens, const runtime::CompileOptions& base = {});

  // Runs the prompt; returns its logits [T, vocab].
  Result<std::vector<float>> prefill(const std::vector<int64_t>& prompt);
  // Appends `token` at position `pos`; returns its logits [vocab].
  Result<std::vector<float>> decode(int64_t token, int64_t pos);
  // decode() that also writes the per-launch trace of the step (chrome://tracing JSON).
  Result<std::vector<float>> decode_traced(int64_t token, int64_t pos, const std::string& trace_path);

 private:
  DecoderRunner() = default;
  const DecoderModel* model_ = nullptr;
  std::vector<std::shared_ptr<runtime::BufferHandle>> caches_;
  std::unique_ptr<runtime::CompiledProgram> prefill_, decode_;
};

// Index of the largest value (greedy decoding).
int64_t argmax(const float* values, int64_t count);

}  // namespace carve::examples
