// One Session::compile of an onnx::Model, run at several sequence lengths: the first run at each new shape (import +
// compile + run) against the steady state (the cached program's run), wall and process
// CPU time, with the JIT's kernel counts. Run it twice with one fresh CARVE_CACHE_DIR for
// a cold and a warm disk kernel cache (docs/benchmarks.md, "Dynamic shapes").
//   bench_dynamic_shapes MODEL.onnx LENGTH...   (inputs: int64 [1, LENGTH], all ones)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "carve/onnx/model.h"
#include "carve/runtime/dynamic_program.h"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int fail(const carve::Status& s) {
  fmt::print(stderr, "bench_dynamic_shapes: {}\n", s.to_string());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace carve;
  if (argc < 3) {
    fmt::print(stderr, "usage: bench_dynamic_shapes MODEL.onnx LENGTH...\n");
    return 2;
  }
  auto model = onnx::Model::load_file(argv[1]);
  if (!model.ok()) return fail(model.status());
  runtime::SessionOptions options;
  options.threads = 1;  // a shared machine: one thread each for runs and compiles
  options.jit.compile_threads = 1;
  auto session = runtime::Session::create(options);
  if (!session.ok()) return fail(session.status());
  auto program = (*session)->compile(std::shared_ptr<onnx::Model>(std::move(*model)));
  if (!program.ok()) return fail(program.status());
  fmt::print("{:>6} | {:>14} {:>14} | {:>9} {:>9} | {:>14} {:>14}\n", "length", "first wall ms", "first CPU ms",
             "codegens", "disk hits", "steady wall ms", "steady CPU ms");
  for (int i = 2; i < argc; ++i) {
    const int64_t length = std::atoll(argv[i]);
    std::vector<runtime::Buffer> inputs;
    for (size_t n = 0; n < (*program)->input_names().size(); ++n) {
      auto b = runtime::Buffer::allocate(runtime::cpu_allocator(), ir::DType::kI64, ir::Shape({1, length}));
      if (!b.ok()) return fail(b.status());
      auto data = b->mutable_span<int64_t>();
      if (!data.ok()) return fail(data.status());
      std::fill(data->begin(), data->end(), 1);
      inputs.push_back(*b);
    }
    const jit::JitStats before = (*session)->jit_stats();
    double wall = wall_seconds(), cpu = cpu_seconds();
    if (auto out = (*program)->run(inputs); !out.ok()) return fail(out.status());
    const double first_wall = wall_seconds() - wall, first_cpu = cpu_seconds() - cpu;
    const jit::JitStats after = (*session)->jit_stats();
    std::vector<double> walls, cpus;
    for (int r = 0; r < 50; ++r) {
      wall = wall_seconds();
      cpu = cpu_seconds();
      if (auto out = (*program)->run(inputs); !out.ok()) return fail(out.status());
      walls.push_back(wall_seconds() - wall);
      cpus.push_back(cpu_seconds() - cpu);
    }
    std::sort(walls.begin(), walls.end());
    std::sort(cpus.begin(), cpus.end());
    fmt::print("{:>6} | {:>14.1f} {:>14.1f} | {:>9} {:>9} | {:>14.3f} {:>14.3f}\n", length, 1e3 * first_wall,
               1e3 * first_cpu, after.codegen_count - before.codegen_count, after.disk_hits - before.disk_hits,
               1e3 * walls[walls.size() / 2], 1e3 * cpus[cpus.size() / 2]);
  }
  const runtime::DynamicProgramStats stats = (*program)->stats();
  fmt::print("program: {} runs, {} specialisations, {} cache hits, {} programs cached\n", stats.runs,
             stats.specialisations, stats.hits, stats.cached);
  return 0;
}
