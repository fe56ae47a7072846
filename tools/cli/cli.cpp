#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include "cli/compile_command.h"
#include "cli/demo_command.h"
#include "cli/plan_command.h"
#include "cli/run_command.h"

namespace carve::cli {

int run(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"carve: compile a tensor graph once, plan its memory, run it many times"};
  app.require_subcommand(1);

  DemoCommandOptions demo_options;
  auto* demo = app.add_subcommand("demo", "the whole pipeline on a shipped model: import, plan, JIT, parallel and "
                                          "sequential runs, KV decoding with handles");
  demo->add_option("--model", demo_options.model, "an ONNX model (default: the shipped gpt_tiny.onnx)");
  demo->add_option("--out-dir", demo_options.out_dir, "where plan.svg and trace.json go");
  demo->add_option("--tokens", demo_options.tokens, "tokens the KV decoder generates")->check(CLI::PositiveNumber);

  PlanCommandOptions plan_options;
  auto* plan = app.add_subcommand("plan", "plan the arena of a MiniMalloc .csv, a text-format graph or an ONNX model");
  plan->add_option("input", plan_options.input, "MiniMalloc CSV (id,lower,upper,size[,alignment]), graph text or MODEL.onnx")
      ->required();
  plan->add_option("--strategy", plan_options.strategy, "strategy name, or 'all'");
  plan->add_option("--capacity", plan_options.capacity, "exact: is there a plan with arena <= BYTES?");
  plan->add_option("--time-limit", plan_options.time_limit_seconds,
                   "seconds for the whole command, reading to written output (every strategy stops by then)");
  plan->add_option("--align", plan_options.align, "minimum alignment of every buffer (bytes)")
      ->check(CLI::PositiveNumber);
  plan->add_option("--order", plan_options.order, "execution order for graphs")
      ->check(CLI::IsMember({"given", "memory"}));
  plan->add_flag("--no-inplace", plan_options.no_inplace, "graphs: no in-place reuse of dying inputs");
  plan->add_flag("--parallel-safe", plan_options.parallel_safe,
                 "graphs: share bytes only between values ordered by the dependency graph");
  plan->add_flag("--no-weights", plan_options.no_weights,
                 "ONNX models: plan from the structure alone (float initializers are not read)");
  plan->add_option("--json", plan_options.json_path, "write results as JSON");
  plan->add_option("--csv", plan_options.csv_path, "write the best plan as MiniMalloc CSV (+offset)");
  plan->add_option("--svg", plan_options.svg_path, "draw the best plan (time x offset)");

  RunCommandOptions run_options;
  auto* run = app.add_subcommand("run", "compile a text-format graph or ONNX model, run it, write its outputs as .npy");
  run->add_option("graph", run_options.graph, "graph in the text format, or MODEL.onnx")->required();
  run->add_option("--input", run_options.inputs, "NAME=FILE.npy (repeatable)");
  run->add_option("--output-dir", run_options.output_dir, "write DIR/<output name>.npy");
  run->add_option("--random-inputs", run_options.random_seed, "generate missing inputs from this seed");
  run->add_flag("--bf16-as-u2", run_options.bf16_as_u2, "bf16 inputs and outputs as <u2 .npy files of bit patterns");
  run->add_option("--iters", run_options.iters, "run N times, print min/median latency")->check(CLI::PositiveNumber);
  run->add_flag("--explain", run_options.explain, "print kernels, fused groups, the plan and JIT times");
  run->add_option("--strategy", run_options.strategy, "arena planning strategy");
  run->add_option("--order", run_options.order, "execution order")->check(CLI::IsMember({"given", "memory"}));
  run->add_flag("--no-inplace", run_options.no_inplace, "no in-place reuse");
  run->add_flag("--no-concat-views", run_options.no_concat_views,
                "run concats as copies (default: their inputs are written into the output)");
  run->add_flag("--no-fuse", run_options.no_fuse, "one kernel per node");
  run->add_flag("--no-library", run_options.no_library, "generate every kernel (no oneDNN convolutions or matmuls)");
  run->add_option("--compile-threads", run_options.compile_threads,
                  "threads compiling kernels at once (0 = hardware concurrency); the code is the same for any")
      ->check(CLI::NonNegativeNumber);
  run->add_flag("--no-cache", run_options.no_cache,
                "neither read nor write the kernel disk cache ($CARVE_CACHE_DIR, else ~/.cache/carve)");
  run->add_option("--threads", run_options.threads, "worker threads (0 = hardware concurrency)")
      ->check(CLI::NonNegativeNumber);
  auto* sequential = run->add_flag("--sequential", run_options.sequential, "run launches one by one, no threads");
  run->add_flag("--check-hazards", run_options.check_hazards,
                "run in parallel, report launches that raced on the same bytes (exit 1 if any)")
      ->excludes(sequential);
  run->add_option("--trace", run_options.trace, "write a Chrome/Perfetto trace of the last run (JSON)");
  run->add_option("--drop-edge", run_options.drop_edges,
                  "debug: remove DAG edge FROM:TO (task indices) and stretch tasks, to see the checker fire")
      ->group("Debug");

  CompileCommandOptions compile_options;
  auto* compile = app.add_subcommand("compile", "generate and compile every kernel of a model for a device; "
                                                "--dry-run: with NVRTC alone, no GPU");
  compile->add_option("model", compile_options.models, "graphs in the text format, or MODEL.onnx (one or more)")
      ->required();
  compile->add_option("--device", compile_options.device, "cuda (cpu: not supported)")
      ->required()
      ->check(CLI::IsMember({"cuda", "cpu"}));
  compile->add_flag("--dry-run", compile_options.dry_run,
                    "compile with NVRTC for --arch without a device (nothing is loaded or run)");
  // One value per occurrence (allow_extra_args(false)): models may follow the options.
  compile->add_option("--arch", compile_options.archs, "sm_XY (repeatable or a comma list; default sm_80,sm_90)")
      ->delimiter(',')
      ->allow_extra_args(false);
  compile->add_option("--input", compile_options.inputs, "NAME=FILE.npy: the file's shape fixes symbolic dims")
      ->allow_extra_args(false);
  compile->add_option("--place", compile_options.place, "NODE=cpu: run that node on the CPU (repeatable)")
      ->allow_extra_args(false);
  compile->add_option("--compile-threads", compile_options.compile_threads,
                      "NVRTC compiles at once (0 = hardware concurrency)")
      ->check(CLI::NonNegativeNumber);
  compile->add_flag("--no-cache", compile_options.no_cache, "neither read nor write the NVRTC disk cache");
  compile->add_option("--json", compile_options.json_path, "write the report as JSON");
  compile->add_option("--nvrtc-option", compile_options.nvrtc_options, "debug: pass an NVRTC option verbatim")
      ->allow_extra_args(false)
      ->group("Debug");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  if (demo->parsed()) return run_demo_command(demo_options, out, err);
  if (plan->parsed()) return run_plan_command(plan_options, out, err);
  if (run->parsed()) return run_run_command(run_options, out, err);
  if (compile->parsed()) return run_compile_command(compile_options, out, err);
  return 2;
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back("carve");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  return run(static_cast<int>(argv.size()), argv.data(), out, err);
}

}  // namespace carve::cli
