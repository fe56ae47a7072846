#include "kv_decoder/decoder_runner.h"

#include <fmt/format.h>

#include <algorithm>

namespace carve::examples {
namespace {

Result<runtime::Buffer> i64_buffer(const std::vector<int64_t>& values, ir::Shape shape) {
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer b, runtime::Buffer::allocate(runtime::cpu_allocator(), ir::DType::kI64, shape));
  CARVE_ASSIGN_OR_RETURN(auto span, b.mutable_span<int64_t>());
  std::copy(values.begin(), values.end(), span.begin());
  return b;
}

Result<std::vector<float>> floats(const runtime::Buffer& b) {
  CARVE_ASSIGN_OR_RETURN(auto span, b.span<float>());
  return std::vector<float>(span.begin(), span.end());
}

}  // namespace

int64_t argmax(const float* values, int64_t count) {
  return std::max_element(values, values + count) - values;
}

Result<std::unique_ptr<DecoderRunner>> DecoderRunner::create(runtime::Session& session, const DecoderModel& model,
                                                             int64_t prompt_tokens,
                                                             const runtime::CompileOptions& base) {
  std::unique_ptr<DecoderRunner> runner(new DecoderRunner());
  runner->model_ = &model;
  const auto& c = model.config();
  runtime::CompileOptions options = base;
  for (const std::string& name : model.cache_names()) {
    CARVE_ASSIGN_OR_RETURN(auto cache, runtime::BufferHandle::create(name, ir::DType::kF32, {c.max_seq, c.d_model}));
    runner->caches_.push_back(cache);
    options.handles.push_back(std::move(cache));
  }
  CARVE_ASSIGN_OR_RETURN(ir::Graph prefill, model.prefill(prompt_tokens));
  CARVE_ASSIGN_OR_RETURN(ir::Graph decode, model.decode());
  CARVE_ASSIGN_OR_RETURN(runner->prefill_, session.compile(prefill, options));
  CARVE_ASSIGN_OR_RETURN(runner->decode_, session.compile(decode, options));
  return runner;
}

Result<std::vector<float>> DecoderRunner::prefill(const std::vector<int64_t>& prompt) {
  for (const auto& cache : caches_) CARVE_RETURN_IF_ERROR(cache->reset());
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer tokens, i64_buffer(prompt, {static_cast<int64_t>(prompt.size())}));
  std::vector<runtime::Buffer> inputs{tokens};
  CARVE_ASSIGN_OR_RETURN(auto outputs, prefill_->run(inputs));
  return floats(outputs.at(0));
}

Result<std::vector<float>> DecoderRunner::decode(int64_t token, int64_t pos) {
  return decode_traced(token, pos, "");
}

Result<std::vector<float>> DecoderRunner::decode_traced(int64_t token, int64_t pos, const std::string& trace_path) {
  if (pos < 0 || pos >= model_->config().max_seq)
    return Status(ErrorCode::kOutOfBounds, fmt::format("position {} is outside the cache [0, {})", pos,
                                                       model_->config().max_seq));
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer tokens, i64_buffer({token}, {1}));
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer position, i64_buffer({pos}, {}));
  // Inputs in CompiledProgram::input_names() order: tokens, pos.
  std::vector<runtime::Buffer> inputs{tokens, position};
  runtime::RunOptions options;
  options.record_trace = !trace_path.empty();
  runtime::RunRecord record;
  CARVE_ASSIGN_OR_RETURN(auto outputs, decode_->run(inputs, options, &record));
  if (!trace_path.empty()) CARVE_RETURN_IF_ERROR(decode_->write_trace(trace_path, record));
  return floats(outputs.at(0));
}

}  // namespace carve::examples
