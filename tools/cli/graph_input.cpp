#include "cli/graph_input.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <sstream>

#include "carve/ir/order.h"
#include "carve/ir/text.h"
#include "carve/ir/verify.h"
#include "carve/planner/graph_problem.h"
#include "carve/planner/memory_order.h"
#include "carve/planner/strategy.h"
#include "carve/runtime/handle.h"
#include "carve/runtime/npy.h"
#ifdef CARVE_HAVE_ONNX
#include "carve/onnx/import.h"
#include "carve/onnx/model.h"
#endif

namespace carve::cli {
namespace {

// Arena of the reference heuristic for an order, to compare orders by what they buy.
Result<int64_t> greedy_arena(const planner::Problem& problem) {
  CARVE_ASSIGN_OR_RETURN(auto strategy, planner::make_strategy("greedy-size"));
  CARVE_ASSIGN_OR_RETURN(planner::PlanResult result, strategy->plan(problem, {}));
  return result.plan.arena_bytes;
}

bool has_onnx_extension(const std::string& path) { return path.ends_with(".onnx"); }

Result<LoadedGraph> load_onnx_file(const std::string& path, const LoadGraphOptions& options) {
#ifdef CARVE_HAVE_ONNX
  onnx::ImportOptions import;
  import.load_weights = options.weights;
  LoadedGraph loaded;
  onnx::ImportedModel model;
  for (const auto& [name, buffer] : options.inputs) import.input_shapes[name] = buffer.shape();
  // A plain import first: onnx::Model, which learns which inputs the import needs as
  // values, keeps the file's bytes beside the import (the weights twice at the peak).
  Result<onnx::ImportedModel> plain = onnx::import_model_file(path, import);
  if (plain.ok() || options.inputs.empty()) {
    CARVE_ASSIGN_OR_RETURN(model, std::move(plain));
  } else {  // the inputs' shapes, and values where the import needs them
    CARVE_ASSIGN_OR_RETURN(auto specialising, onnx::Model::load_file(path, {.import = import}));
    CARVE_ASSIGN_OR_RETURN(model, specialising->import_for(options.inputs));
    loaded.value_inputs = specialising->inputs_needed_at_import();
    if (!loaded.value_inputs.empty())
      loaded.notes.push_back(fmt::format("onnx '{}': input(s) {} imported as constants (the import needs their values)",
                                         path, fmt::join(loaded.value_inputs, ", ")));
  }
  loaded.notes.push_back(fmt::format("onnx '{}': opset {}, producer '{}', {} ops folded at import, {} mapped weights{}",
                                     path, model.opset, model.producer, model.folded_nodes,
                                     model.mapped_weights.size(), options.weights ? "" : " (--no-weights)"));
  loaded.graph = std::move(model.graph);
  loaded.constants = std::move(model.mapped_weights);
  return loaded;
#else
  (void)options;
  return Status(ErrorCode::kUnavailable,
                fmt::format("'{}': this carve was built without the ONNX importer (CARVE_WITH_ONNX=OFF)", path));
#endif
}

}  // namespace

Result<LoadedGraph> load_graph_file(const std::string& path, const LoadGraphOptions& options) {
  if (has_onnx_extension(path)) return load_onnx_file(path, options);
  if (!options.weights)
    return Status(ErrorCode::kInvalidArgument, fmt::format("'{}': --no-weights applies to ONNX models", path));
  LoadedGraph loaded;
  CARVE_ASSIGN_OR_RETURN(loaded.graph, read_graph_file(path));
  return loaded;
}

Result<std::map<std::string, std::string>> parse_input_args(const std::vector<std::string>& args) {
  std::map<std::string, std::string> files;
  for (const std::string& arg : args) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      return Status(ErrorCode::kInvalidArgument, fmt::format("--input '{}': expected NAME=FILE.npy", arg));
    files[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return files;
}

Result<std::map<std::string, runtime::Buffer, std::less<>>> input_files(const std::string& path,
                                                                        const std::vector<std::string>& input_args) {
  std::map<std::string, runtime::Buffer, std::less<>> buffers;
  CARVE_ASSIGN_OR_RETURN(auto files, parse_input_args(input_args));
  if (!has_onnx_extension(path)) return buffers;
  for (const auto& [name, file] : files) {
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer b, runtime::map_npy(file));
    buffers.insert_or_assign(name, std::move(b));
  }
  return buffers;
}

Result<runtime::CompileOptions> loaded_compile_options(const LoadedGraph& loaded) {
  runtime::CompileOptions compile;
  compile.constants = loaded.constants;
  for (const ir::Handle& h : loaded.graph.handles) {
    CARVE_ASSIGN_OR_RETURN(auto handle, runtime::BufferHandle::create(h.name, h.type.dtype, h.type.shape));
    compile.handles.push_back(std::move(handle));
  }
  return compile;
}

Result<ir::Graph> read_graph_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(ErrorCode::kIoError, fmt::format("cannot open '{}'", path));
  std::stringstream text;
  text << file.rdbuf();
  auto graph = ir::parse(text.str());
  if (!graph.ok()) return graph.status().with_context(path);
  CARVE_RETURN_IF_ERROR(ir::verify(*graph).with_context(path));
  return graph;
}

Status load_graph_plan_input(const PlanCommandOptions& options, PlannedInput& input) {
  CARVE_ASSIGN_OR_RETURN(LoadedGraph loaded, load_graph_file(options.input, {.weights = !options.no_weights}));
  ir::Graph graph = std::move(loaded.graph);
  input.notes.insert(input.notes.end(), loaded.notes.begin(), loaded.notes.end());
  planner::GraphPlanOptions graph_options;
  graph_options.inplace = !options.no_inplace;

  CARVE_ASSIGN_OR_RETURN(std::vector<ir::NodeId> given, ir::execution_order(graph));
  CARVE_ASSIGN_OR_RETURN(planner::GraphProblem given_problem,
                         planner::build_graph_problem(graph, given, graph_options));
  std::vector<ir::NodeId> order = given;
  planner::GraphProblem chosen = given_problem;

  if (options.order == "memory") {
    CARVE_ASSIGN_OR_RETURN(planner::MemoryOrder memory, planner::memory_aware_order(graph));
    CARVE_ASSIGN_OR_RETURN(chosen, planner::build_graph_problem(graph, memory.order, graph_options));
    CARVE_ASSIGN_OR_RETURN(int64_t given_model, planner::modelled_peak_bytes(graph, given));
    CARVE_ASSIGN_OR_RETURN(int64_t given_arena, greedy_arena(given_problem.problem));
    CARVE_ASSIGN_OR_RETURN(int64_t memory_arena, greedy_arena(chosen.problem));
    const int64_t given_lb = planner::lower_bound_bytes(given_problem.problem);
    const int64_t memory_lb = planner::lower_bound_bytes(chosen.problem);
    input.notes.push_back(fmt::format("order given : peak {} bytes (lower bound), greedy-size arena {} bytes",
                                      given_lb, given_arena));
    input.notes.push_back(fmt::format("order memory: peak {} bytes (lower bound), greedy-size arena {} bytes ({})",
                                      memory_lb, memory_arena, memory.exact ? "exact search" : "heuristic"));
    input.facts["given_order_peak_bytes"] = given_lb;
    input.facts["given_order_arena_bytes"] = given_arena;
    input.facts["memory_order_peak_bytes"] = memory_lb;
    input.facts["memory_order_arena_bytes"] = memory_arena;
    input.facts["given_order_modelled_peak_bytes"] = given_model;
    input.facts["memory_order_modelled_peak_bytes"] = memory.peak_bytes;
    input.facts["memory_order_exact"] = memory.exact ? 1 : 0;
    order = memory.order;
  }
  input.notes.push_back(fmt::format("graph '{}': {} nodes, {} values, {} views folded, {} in place{}", graph.name,
                                    graph.num_nodes(), graph.num_values(), chosen.num_views, chosen.num_inplace,
                                    options.no_inplace ? " (--no-inplace)" : ""));
  if (options.parallel_safe) {
    CARVE_ASSIGN_OR_RETURN(input.unordered_pairs, planner::unordered_buffer_pairs(graph, chosen));
    input.parallel_safe = true;
    input.notes.push_back(fmt::format("{} buffer pairs have disjoint lifetimes but no dependency order",
                                      input.unordered_pairs.size()));
    input.facts["unordered_pairs"] = static_cast<int64_t>(input.unordered_pairs.size());
  }
  input.facts["views"] = chosen.num_views;
  input.facts["inplace"] = chosen.num_inplace;
  input.problem = std::move(chosen.problem);
  return Status();
}

}  // namespace carve::cli
