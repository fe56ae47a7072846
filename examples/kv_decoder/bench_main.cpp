// kv_decoder_bench: prefill latency and KV-cache decode tokens/s of the GPT-style decoder
// (decoder_model.h) at a configurable size, for the side-by-side comparison
// (benchmarks/compare/compare.py runs the same model in PyTorch and ONNX Runtime).
//
//   kv_decoder_bench [--vocab N] [--d-model N] [--heads N] [--layers N] [--mlp N]
//                    [--max-seq N] [--prompt T] [--threads N] [--reps R] [--dump DIR] [--trace FILE]
//
// Prints one JSON object: prefill latencies (ms, one per rep), decode tokens/s per rep
// (greedy, from position T to max_seq - 1), the generated tokens and the compile time.
// --dump DIR writes the weights (DIR/weights/<name>.npy), the prompt, the prefill logits and the
// first decode step's logits, so a peer can check it computes the same thing.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <ctime>

#include "carve/runtime/npy.h"
#include "kv_decoder/decoder_runner.h"

using namespace carve;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU seconds of the whole process (all threads): less sensitive than wall time to other
// jobs sharing the machine.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Status write_f32(const std::string& path, const std::vector<float>& values, ir::Shape shape) {
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer b,
                         runtime::Buffer::allocate(runtime::cpu_allocator(), ir::DType::kF32, std::move(shape)));
  CARVE_ASSIGN_OR_RETURN(auto span, b.mutable_span<float>());
  std::copy(values.begin(), values.end(), span.begin());
  return runtime::write_npy(path, b);
}

Status write_i64(const std::string& path, const std::vector<int64_t>& values) {
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer b, runtime::Buffer::allocate(runtime::cpu_allocator(), ir::DType::kI64,
                                                                      {static_cast<int64_t>(values.size())}));
  CARVE_ASSIGN_OR_RETURN(auto span, b.mutable_span<int64_t>());
  std::copy(values.begin(), values.end(), span.begin());
  return runtime::write_npy(path, b);
}

// Shapes of the weights as build() declares them.
ir::Shape weight_shape(const examples::DecoderConfig& c, const std::string& name) {
  const int64_t d = c.d_model;
  if (name == "tok_emb") return {c.vocab, d};
  if (name == "pos_emb") return {c.max_seq, d};
  if (name == "w_out") return {d, c.vocab};
  const std::string leaf = name.substr(name.find('.') + 1);
  if (leaf == "wq" || leaf == "wk" || leaf == "wv" || leaf == "wo") return {d, d};
  if (leaf == "w1") return {d, c.mlp};
  if (leaf == "w2") return {c.mlp, d};
  if (leaf == "b1") return {c.mlp};
  return {d};
}

Status run(int argc, char** argv) {
  examples::DecoderConfig c;
  int64_t prompt_len = 8, reps = 5, threads = 1;
  std::string dump, trace;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Status(ErrorCode::kInvalidArgument, fmt::format("{} needs a value", a));
    const std::string v = argv[++i];
    const int64_t n = std::strtoll(v.c_str(), nullptr, 10);
    if (a == "--vocab") c.vocab = n;
    else if (a == "--d-model") c.d_model = n;
    else if (a == "--heads") c.heads = n;
    else if (a == "--layers") c.layers = n;
    else if (a == "--mlp") c.mlp = n;
    else if (a == "--max-seq") c.max_seq = n;
    else if (a == "--prompt") prompt_len = n;
    else if (a == "--threads") threads = n;
    else if (a == "--reps") reps = n;
    else if (a == "--dump") dump = v;
    else if (a == "--trace") trace = v;
    else return Status(ErrorCode::kInvalidArgument, fmt::format("unknown option {}", a));
  }
  if (prompt_len < 1 || prompt_len >= c.max_seq)
    return Status(ErrorCode::kInvalidArgument, "--prompt must be in [1, max-seq)");
  examples::DecoderModel model(c);
  runtime::SessionOptions session_options;
  session_options.threads = static_cast<int>(threads);
  CARVE_ASSIGN_OR_RETURN(auto session, runtime::Session::create(session_options));
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[static_cast<size_t>(i)] = (i * 7 + 3) % c.vocab;
  const auto compile_start = std::chrono::steady_clock::now();
  CARVE_ASSIGN_OR_RETURN(auto runner, examples::DecoderRunner::create(*session, model, prompt_len));
  const double compile_s = seconds_since(compile_start);

  std::vector<double> prefill_ms, tokens_per_s, prefill_cpu_ms, cpu_tokens_per_s;
  std::vector<int64_t> generated;
  std::vector<float> prefill_logits, first_step_logits;
  for (int64_t r = 0; r < std::max<int64_t>(reps, 1); ++r) {
    auto start = std::chrono::steady_clock::now();
    double cpu = cpu_seconds();
    CARVE_ASSIGN_OR_RETURN(prefill_logits, runner->prefill(prompt));
    prefill_ms.push_back(seconds_since(start) * 1e3);
    prefill_cpu_ms.push_back((cpu_seconds() - cpu) * 1e3);
    int64_t token = examples::argmax(prefill_logits.data() + (prompt_len - 1) * c.vocab, c.vocab);
    generated.assign(1, token);
    start = std::chrono::steady_clock::now();
    cpu = cpu_seconds();
    int64_t steps = 0;
    for (int64_t pos = prompt_len; pos + 1 < c.max_seq; ++pos, ++steps) {
      // --trace: the per-launch trace of the last rep's last step (a profile of one decode step).
      const bool traced = !trace.empty() && r + 1 == std::max<int64_t>(reps, 1) && pos + 2 == c.max_seq;
      CARVE_ASSIGN_OR_RETURN(auto logits, traced ? runner->decode_traced(token, pos, trace) : runner->decode(token, pos));
      if (pos == prompt_len) first_step_logits = logits;
      token = examples::argmax(logits.data(), c.vocab);
      generated.push_back(token);
    }
    tokens_per_s.push_back(static_cast<double>(steps) / seconds_since(start));
    cpu_tokens_per_s.push_back(static_cast<double>(steps) / (cpu_seconds() - cpu));
  }
  if (!dump.empty()) {
    std::filesystem::create_directories(dump + "/weights");
    for (const auto& [name, values] : model.weights())
      CARVE_RETURN_IF_ERROR(write_f32(fmt::format("{}/weights/{}.npy", dump, name), values, weight_shape(c, name)));
    CARVE_RETURN_IF_ERROR(write_i64(dump + "/prompt.npy", prompt));
    CARVE_RETURN_IF_ERROR(write_f32(dump + "/prefill_logits.npy", prefill_logits, {prompt_len, c.vocab}));
    CARVE_RETURN_IF_ERROR(write_f32(dump + "/decode0_logits.npy", first_step_logits, {c.vocab}));
    CARVE_RETURN_IF_ERROR(write_i64(dump + "/generated.npy", generated));
  }
  fmt::print(
      "{{\"config\": {{\"vocab\": {}, \"d_model\": {}, \"heads\": {}, \"layers\": {}, \"mlp\": {}, \"max_seq\": {}, "
      "\"prompt\": {}}}, \"threads\": {}, \"compile_s\": {:.4f}, \"prefill_ms\": [{:.4f}], "
      "\"decode_tokens_per_s\": [{:.2f}], \"prefill_cpu_ms\": [{:.4f}], \"decode_cpu_tokens_per_s\": [{:.2f}], "
      "\"decode_steps\": {}, \"generated\": [{}]}}\n",
      c.vocab, c.d_model, c.heads, c.layers, c.mlp, c.max_seq, prompt_len, threads, compile_s,
      fmt::join(prefill_ms, ", "), fmt::join(tokens_per_s, ", "), fmt::join(prefill_cpu_ms, ", "),
      fmt::join(cpu_tokens_per_s, ", "), c.max_seq - 1 - prompt_len,
      fmt::join(generated, ", "));
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  Status s = run(argc, argv);
  if (!s.ok()) {
    fmt::print(stderr, "kv_decoder_bench: {}\n", s.to_string());
    return 1;
  }
  return 0;
}
