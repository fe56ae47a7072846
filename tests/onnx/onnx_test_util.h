// Helpers for the ONNX import tests: locating the committed models, reading their
// inputs/reference outputs (NAME.input.<input>.npy, NAME.output.<output>.npy), running
// them through the reference interpreter or a Session, and the relative error metric.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "carve/reference/reference.h"
#include "carve/onnx/import.h"
#include "carve/runtime/buffer.h"
#include "carve/runtime/session.h"

namespace carve::onnx_test {

// tests/onnx/models in the source tree.
std::string models_dir();
std::string model_path(const std::string& name);

// max |actual - expected| / max |expected| (max |expected| taken as 1 when it is 0).
// NaN when the element counts differ.
double relative_error(const std::vector<double>& actual, const std::vector<double>& expected);

// The model's inputs as .npy buffers, in graph input order (the graph's input names).
Result<std::vector<runtime::Buffer>> read_inputs(const std::string& name, const ir::Graph& graph);
// The reference outputs, in graph output order.
Result<std::vector<runtime::Buffer>> read_expected(const std::string& name, const ir::Graph& graph);

std::vector<double> buffer_doubles(const runtime::Buffer& buffer);
reference::HostTensor to_host(const runtime::Buffer& buffer);

// Imports NAME with its symbolic dims fixed by its input files' shapes.
Result<onnx::ImportedModel> import_for_inputs(const std::string& name);

// Runs the model NAME through the reference interpreter; returns the worst relative
// error over its outputs.
Result<double> reference_error(const std::string& name);
// The same through Session::compile + run (kUnavailable without the CPU JIT, or without
// a CUDA device when options name one).
Result<double> session_error(const std::string& name, const runtime::SessionOptions& options = {});

}  // namespace carve::onnx_test
