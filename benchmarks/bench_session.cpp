// The Session end to end: a graph of two independent branches (each: matmul 256x256 ->
// tanh -> matmul -> relu -> softmax, over its own input) compiled once, run many times;
// sequential (CompileOptions::schedule.sequential) vs parallel on 1, 2 and 4 threads (fallback
// off), in the same process. Speedup = Session/sequential / Session/parallel/N.
// Also: a single chain (no parallelism between launches, only tiles inside kernels).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/runtime/session.h"

namespace rt = carve::runtime;
using carve::ir::DType;

namespace {

constexpr int64_t kN = 256;

carve::ir::ValueId weight(carve::ir::GraphBuilder& b, const char* name) {
  std::vector<float> w(static_cast<size_t>(kN * kN));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  std::vector<uint8_t> bytes(w.size() * sizeof(float));
  std::memcpy(bytes.data(), w.data(), bytes.size());
  return b.constant(name, DType::kF32, {kN, kN}, std::move(bytes));
}

carve::ir::Graph graph(bool two_branches) {
  carve::ir::GraphBuilder b("branches");
  auto branch = [&](const char* in, const char* w1, const char* w2) {
    auto x = b.input(in, DType::kF32, {kN, kN});
    return b.softmax(b.relu(b.matmul(b.tanh(b.matmul(x, weight(b, w1))), weight(b, w2))), -1);
  };
  b.output(branch("x", "w1", "w2"));
  if (two_branches) b.output(branch("y", "w3", "w4"));
  return *b.build();
}

void run_session(benchmark::State& state, bool two_branches, int threads) {
  auto session = rt::Session::create({.threads = threads > 0 ? threads : 1});
  if (!session.ok()) return state.SkipWithError(session.status().to_string().c_str());
  rt::CompileOptions options;
  options.schedule.sequential = threads == 0;
  options.schedule.allow_fallback = false;
  auto program = (*session)->compile(graph(two_branches), options);
  if (!program.ok()) return state.SkipWithError(program.status().to_string().c_str());
  std::vector<rt::Buffer> inputs, outputs;
  for (const auto& type : (*program)->input_types()) {
    auto b = rt::Buffer::allocate(rt::cpu_allocator(), type.dtype, type.shape);
    std::memset(b->mutable_bytes()->data(), 0, b->size());
    inputs.push_back(std::move(*b));
  }
  for (const auto& type : (*program)->output_types())
    outputs.push_back(*rt::Buffer::allocate(rt::cpu_allocator(), type.dtype, type.shape));
  for (auto _ : state)
    if (!(*program)->run(inputs, outputs).ok()) return state.SkipWithError("run failed");
  const auto& stats = (*program)->schedule().stats();
  state.counters["launches"] = static_cast<double>(stats.launches);
  state.counters["tasks"] = static_cast<double>(stats.tasks);
  state.counters["max_width"] = static_cast<double>(stats.max_width);
}

void BM_SessionSequential(benchmark::State& state, bool two_branches) { run_session(state, two_branches, 0); }
void BM_SessionParallel(benchmark::State& state, bool two_branches) {
  run_session(state, two_branches, static_cast<int>(state.range(0)));
}

}  // namespace

BENCHMARK_CAPTURE(BM_SessionSequential, two_branches, true)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SessionParallel, two_branches, true)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SessionSequential, chain, false)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SessionParallel, chain, false)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
