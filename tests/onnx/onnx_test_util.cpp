#include "onnx_test_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "carve/ir/extent.h"
#include "carve/runtime/npy.h"
#include "carve/runtime/session.h"
#include "test_support.h"

namespace carve::onnx_test {

std::string models_dir() { return carve::test::source_dir() + "/tests/onnx/models"; }

std::string model_path(const std::string& name) { return models_dir() + "/" + name + ".onnx"; }

double relative_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return std::nan("");
  double scale = 0, diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, std::abs(expected[i]));
    const double d = std::abs(actual[i] - expected[i]);
    // Same infinities are equal; anything NaN is a total mismatch.
    if (actual[i] == expected[i]) continue;
    diff = std::max(diff, std::isnan(d) ? INFINITY : d);
  }
  return diff / (scale == 0 ? 1.0 : scale);
}

namespace {

Result<std::vector<runtime::Buffer>> read_named(const std::string& name, const ir::Graph& graph,
                                                const std::vector<ir::ValueId>& ids, std::string_view kind) {
  std::vector<runtime::Buffer> out;
  for (ir::ValueId v : ids) {
    const std::string path = fmt::format("{}/{}.{}.{}.npy", models_dir(), name, kind, graph.value(v).name);
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer b, runtime::read_npy(path));
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<ir::ValueId> input_ids(const ir::Graph& graph) {
  std::vector<ir::ValueId> ids;
  for (const ir::Value& v : graph.values)
    if (v.kind == ir::ValueKind::kInput) ids.push_back(v.id);
  return ids;
}

Result<double> worst_error(const std::vector<std::vector<double>>& actual,
                           const std::vector<runtime::Buffer>& expected) {
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = relative_error(actual[i], buffer_doubles(expected[i]));
    if (std::isnan(e)) return Status(ErrorCode::kShapeError, fmt::format("output {} has the wrong size", i));
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace

Result<std::vector<runtime::Buffer>> read_inputs(const std::string& name, const ir::Graph& graph) {
  return read_named(name, graph, input_ids(graph), "input");
}

Result<std::vector<runtime::Buffer>> read_expected(const std::string& name, const ir::Graph& graph) {
  return read_named(name, graph, graph.outputs, "output");
}

reference::HostTensor to_host(const runtime::Buffer& buffer) {
  reference::HostTensor t;
  t.type = ir::TensorType{buffer.dtype(), buffer.shape()};
  auto bytes = buffer.bytes();
  if (bytes.ok()) {
    const auto* first = reinterpret_cast<const uint8_t*>(bytes->data());
    t.bytes.assign(first, first + bytes->size());
  }
  return t;
}

std::vector<double> buffer_doubles(const runtime::Buffer& buffer) { return to_host(buffer).to_doubles(); }

Result<onnx::ImportedModel> import_for_inputs(const std::string& name) {
  // The input files fix symbolic dims (like `carve run`): import, then again with their
  // shapes when they differ from the default (symbolic dims = 1).
  CARVE_ASSIGN_OR_RETURN(onnx::ImportedModel model, onnx::import_model_file(model_path(name)));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> inputs, read_inputs(name, model.graph));
  onnx::ImportOptions options;
  bool differs = false;
  for (ir::ValueId v : input_ids(model.graph)) {
    const runtime::Buffer& b = inputs[options.input_shapes.size()];
    differs = differs || b.shape() != model.graph.value(v).type.shape;
    options.input_shapes[model.graph.value(v).name] = b.shape();
  }
  if (!differs) return model;
  return onnx::import_model_file(model_path(name), options);
}

Result<double> reference_error(const std::string& name) {
  CARVE_ASSIGN_OR_RETURN(onnx::ImportedModel model, import_for_inputs(name));
  CARVE_RETURN_IF_ERROR(onnx::materialize_weights(model));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> inputs, read_inputs(name, model.graph));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> expected, read_expected(name, model.graph));
  std::vector<reference::HostTensor> host;
  for (const auto& b : inputs) host.push_back(to_host(b));
  // An output with a data-dependent extent (ir/extent.h) comes at its bound, the result
  // packed first: its extent, added as an output, says how much of it to compare.
  const size_t declared = model.graph.outputs.size();
  std::vector<std::optional<ir::DynamicExtent>> extents;
  for (size_t i = 0; i < declared; ++i) {
    extents.push_back(ir::dynamic_extent(model.graph, model.graph.outputs[i]));
    if (extents.back()) model.graph.outputs.push_back(extents.back()->extent);
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<reference::HostTensor> outputs, reference::run_reference(model.graph, host));
  std::vector<std::vector<double>> actual;
  for (size_t i = 0, next = declared; i < declared; ++i) {
    std::vector<double> values = outputs[i].to_doubles();
    if (extents[i]) {
      const int64_t extent = outputs[next++].as<int64_t>().at(0);
      values.resize(static_cast<size_t>(*ir::actual_shape(outputs[i].type.shape, *extents[i], extent).num_elements()));
    }
    actual.push_back(std::move(values));
  }
  return worst_error(actual, expected);
}

Result<double> session_error(const std::string& name, const runtime::SessionOptions& session_options) {
  CARVE_ASSIGN_OR_RETURN(onnx::ImportedModel model, import_for_inputs(name));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> inputs, read_inputs(name, model.graph));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> expected, read_expected(name, model.graph));
  CARVE_ASSIGN_OR_RETURN(auto session, runtime::Session::create(session_options));
  runtime::CompileOptions options;
  options.constants = model.mapped_weights;
  CARVE_ASSIGN_OR_RETURN(auto program, session->compile(model.graph, options));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> outputs, program->run(inputs));
  std::vector<std::vector<double>> actual;
  for (const auto& b : outputs) actual.push_back(buffer_doubles(b));
  return worst_error(actual, expected);
}

}  // namespace carve::onnx_test
