// `carve demo` on a real model: import -> plan -> JIT -> parallel run with the hazard
// checker -> sequential run -> KV decoding with handles (demo_command.h).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "carve/jit/fusion.h"
#include "carve/planner/svg.h"
#include "carve/runtime/npy.h"
#include "carve/runtime/session.h"
#include "cli/demo_command.h"
#include "cli/graph_input.h"
#include "kv_decoder/decoder_runner.h"

namespace carve::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The model's input NAME from "<stem>.input.NAME.npy" beside it (the shipped models carry
// PyTorch's inputs and outputs so), or "" when there is none.
std::string beside(const std::string& model, const char* kind, const std::string& name) {
  fs::path p(model);
  fs::path file = p.parent_path() / fmt::format("{}.{}.{}.npy", p.stem().string(), kind, name);
  return fs::exists(file) ? file.string() : "";
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  if (!file.good()) return Status(ErrorCode::kIoError, fmt::format("cannot write '{}'", path.string()));
  return Status();
}

Status bytes_equal(const std::vector<runtime::Buffer>& a, const std::vector<runtime::Buffer>& b, bool& equal) {
  equal = a.size() == b.size();
  for (size_t i = 0; equal && i < a.size(); ++i) {
    CARVE_ASSIGN_OR_RETURN(auto x, a[i].bytes());
    CARVE_ASSIGN_OR_RETURN(auto y, b[i].bytes());
    equal = x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size()) == 0;
  }
  return Status();
}

Status decode_tokens(runtime::Session& session, int tokens, std::ostream& out) {
  examples::DecoderModel model({});
  const auto& c = model.config();
  const std::vector<int64_t> prompt{3, 14, 15, 9, 2, 6};
  const auto start = Clock::now();
  CARVE_ASSIGN_OR_RETURN(auto runner, examples::DecoderRunner::create(session, model, static_cast<int64_t>(prompt.size())));
  fmt::print(out, "  decoder: {} layers, d_model {}, vocab {}; K/V caches: {} handles of f32[{},{}] in the handle "
                  "region, shared by the prefill and decode programs (compiled in {:.0f} ms)\n",
             c.layers, c.d_model, c.vocab, model.cache_names().size(), c.max_seq, c.d_model, ms_since(start));
  CARVE_ASSIGN_OR_RETURN(auto logits, runner->prefill(prompt));
  int64_t token = examples::argmax(logits.data() + (prompt.size() - 1) * c.vocab, c.vocab);
  std::vector<int64_t> generated{token};
  const auto decode_start = Clock::now();
  for (int64_t pos = static_cast<int64_t>(prompt.size()); static_cast<int>(generated.size()) < tokens; ++pos) {
    if (pos + 1 >= c.max_seq) break;
    CARVE_ASSIGN_OR_RETURN(auto step, runner->decode(token, pos));
    token = examples::argmax(step.data(), c.vocab);
    generated.push_back(token);
  }
  const double ms = ms_since(decode_start);
  fmt::print(out, "  prompt    {}\n  generated {}\n  {} decode steps in {:.2f} ms ({:.0f} tokens/s), each reading and "
                  "appending to the caches in place\n",
             fmt::join(prompt, " "), fmt::join(generated, " "), generated.size() - 1, ms,
             ms > 0 ? double(generated.size() - 1) * 1e3 / ms : 0.0);
  return Status();
}

Status pipeline(const DemoCommandOptions& options, std::ostream& out) {
  const std::string model = options.model.empty() ? std::string(CARVE_DEMO_MODEL) : options.model;
  const fs::path out_dir = fs::absolute(options.out_dir);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status(ErrorCode::kIoError, fmt::format("cannot create '{}': {}", out_dir.string(), ec.message()));

  fmt::print(out, "== 1. import {}\n", model);
  auto start = Clock::now();
  CARVE_ASSIGN_OR_RETURN(LoadedGraph loaded, load_graph_file(model));
  for (const std::string& note : loaded.notes) fmt::print(out, "  {}\n", note);
  fmt::print(out, "  graph '{}': {} nodes, {} values after import ({:.0f} ms)\n", loaded.graph.name,
             loaded.graph.num_nodes(), loaded.graph.values.size(), ms_since(start));

  runtime::SessionOptions session_options;  // all cores
  CARVE_ASSIGN_OR_RETURN(auto session, runtime::Session::create(session_options));
  runtime::CompileOptions compile;
  compile.strategy = "best";
  compile.constants = loaded.constants;
  start = Clock::now();
  auto program = session->compile(loaded.graph, compile);
  const double cold_ms = ms_since(start);
  if (!program.ok() && program.status().code() == ErrorCode::kUnavailable) {
    fmt::print(out, "\n(stopping here: {})\n", program.status().message());
    return Status();
  }
  CARVE_RETURN_IF_ERROR(program.status());
  const runtime::Program& p = (*program)->program();
  const runtime::PlanSummary& s = p.plan_summary;

  fmt::print(out, "\n== 2. plan (strategy best: {} won)\n", s.strategy);
  fmt::print(out, "  arena {} bytes  |  no reuse {} bytes ({:.1f}x more)  |  lower bound {} bytes (arena is {:.3f}x it)\n",
             s.arena_bytes, s.no_reuse_bytes, s.arena_bytes ? double(s.no_reuse_bytes) / double(s.arena_bytes) : 0.0,
             s.lower_bound_bytes, s.lower_bound_bytes ? double(s.arena_bytes) / double(s.lower_bound_bytes) : 1.0);
  fmt::print(out, "  {} planned buffers, {} values folded as views, {} written in place over a dying input\n",
             s.buffers, s.views, s.inplace);
  int in_arena = 0;
  for (const ir::Value& v : p.graph.values) {
    auto view = (*program)->value_view(v.name);
    if (!view.ok() || ++in_arena > 5) continue;
    fmt::print(out, "    {:<28} buffer #{:<5} storage #{} offset {:>7} size {:>7}\n", v.name, view->id().value,
               view->storage_id().value, view->offset(), view->size());
  }
  fmt::print(out, "    ... {} arena values in all, one storage, one view each\n", in_arena);
  const fs::path svg = out_dir / "plan.svg";
  CARVE_RETURN_IF_ERROR(write_text(svg, planner::plan_to_svg(p.problem.problem, p.plan, s.lower_bound_bytes)));
  fmt::print(out, "  wrote {} (time x offset)\n", svg.string());

  int64_t fused = 0, fused_nodes = 0;
  for (const runtime::ProgramKernel& k : p.kernels)
    if (k.group.nodes.size() > 1) ++fused, fused_nodes += static_cast<int64_t>(k.group.nodes.size());
  fmt::print(out, "\n== 3. JIT (LLVM ORC)\n  compile {:.0f} ms cold (planning {:.1f} ms, JIT {:.0f} ms): {} kernels for {} "
                  "nodes, {} fused groups covering {} nodes\n",
             cold_ms, s.plan_seconds * 1e3, p.jit_seconds * 1e3, p.kernels.size(), p.graph.num_nodes(), fused,
             fused_nodes);
  int shown = 0;
  for (const runtime::ProgramKernel& k : p.kernels)
    if (k.group.nodes.size() > 2 && shown++ < 3) fmt::print(out, "    {}\n", jit::describe_group(p.graph, k.group));

  // Inputs: PyTorch's, when shipped beside the model.
  std::vector<runtime::Buffer> inputs;
  const auto names = (*program)->input_names();
  const auto types = (*program)->input_types();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string file = beside(model, "input", names[i]);
    if (file.empty()) return Status(ErrorCode::kNotFound, fmt::format("no input file for '{}' beside {}", names[i], model));
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer b, runtime::read_npy(file));
    inputs.push_back(std::move(b));
  }

  fmt::print(out, "\n== 4. run in parallel, hazard checker on\n");
  runtime::RunRecord record;
  runtime::RunOptions checked{.check_hazards = true, .record_trace = true};
  start = Clock::now();
  CARVE_ASSIGN_OR_RETURN(auto parallel_out, (*program)->run(inputs, checked, &record));
  fmt::print(out, "  {} tasks on {} threads in {:.2f} ms (DAG: {}); races: {}\n", record.timings.size(), record.threads,
             ms_since(start), (*program)->schedule().stats().to_string(), record.hazards.size());
  for (const runtime::Hazard& h : record.hazards) fmt::print(out, "  race: {}\n", h.to_string());
  const fs::path trace = out_dir / "trace.json";
  CARVE_RETURN_IF_ERROR((*program)->write_trace(trace.string(), record));
  fmt::print(out, "  wrote {} (open in ui.perfetto.dev)\n", trace.string());

  fmt::print(out, "\n== 5. run sequentially\n");
  compile.schedule.sequential = true;
  start = Clock::now();
  CARVE_ASSIGN_OR_RETURN(auto sequential, session->compile(loaded.graph, compile));
  const double cached_ms = ms_since(start);
  start = Clock::now();
  CARVE_ASSIGN_OR_RETURN(auto sequential_out, sequential->run(inputs));
  const double seq_ms = ms_since(start);
  bool identical = false;
  CARVE_RETURN_IF_ERROR(bytes_equal(parallel_out, sequential_out, identical));
  fmt::print(out, "  recompiled in {:.0f} ms (kernels from the cache), ran in {:.2f} ms; outputs bit-identical to the "
                  "parallel run: {}\n",
             cached_ms, seq_ms, identical ? "yes" : "NO");
  const auto out_names = (*program)->output_names();
  for (size_t i = 0; i < out_names.size(); ++i) {
    const std::string file = beside(model, "output", out_names[i]);
    if (file.empty()) continue;
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer want, runtime::read_npy(file));
    CARVE_ASSIGN_OR_RETURN(auto w, want.span<float>());
    CARVE_ASSIGN_OR_RETURN(auto g, sequential_out[i].span<float>());
    double worst = 0;
    for (size_t j = 0; j < std::min(w.size(), g.size()); ++j) worst = std::max(worst, double(std::fabs(w[j] - g[j])));
    fmt::print(out, "  '{}' vs PyTorch's output: max |difference| {:.2e}\n", out_names[i], worst);
  }
  if (!identical || !record.hazards.empty())
    return Status(ErrorCode::kInternal, "parallel and sequential runs differ, or the checker found races");

  fmt::print(out, "\n== 6. KV decoding with handles (examples/kv_decoder)\n");
  CARVE_RETURN_IF_ERROR(decode_tokens(*session, options.tokens, out));
  fmt::print(out, "\ndone: plan.svg and trace.json are in {}\n", out_dir.string());
  return Status();
}

}  // namespace

int run_pipeline_demo(const DemoCommandOptions& options, std::ostream& out, std::ostream& err) {
  Status s = pipeline(options, out);
  if (s.ok()) return 0;
  fmt::print(err, "carve demo: {}\n", s.to_string());
  return 1;
}

}  // namespace carve::cli
