// onnx::Model: an ONNX model as a graph family, one import per input signature (model.h).
#include "carve/onnx/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "context.h"
#include "wire.h"

namespace carve::onnx {
namespace {

// "ids i64[1,32]" for messages and keys.
std::string describe(std::string_view name, const runtime::Buffer& b) {
  return fmt::format("{} {}{}", name, ir::dtype_name(b.dtype()), b.shape().to_string());
}

}  // namespace

Model::Model(std::vector<std::byte> bytes, std::string name, ModelOptions options)
    : bytes_(std::move(bytes)), name_(std::move(name)), options_(std::move(options)) {}

Result<std::unique_ptr<Model>> Model::load_file(const std::string& path, ModelOptions options) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(ErrorCode::kIoError, fmt::format("cannot open '{}'", path));
  // Read straight into the bytes the model keeps: a model's weights are most of its file.
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  file.seekg(0, std::ios::beg);
  if (size < 0 || !file) return Status(ErrorCode::kIoError, fmt::format("cannot read '{}'", path));
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  file.read(reinterpret_cast<char*>(bytes.data()), size);
  if (file.gcount() != size) return Status(ErrorCode::kIoError, fmt::format("cannot read '{}'", path));
  if (options.import.external_data_dir.empty())
    options.import.external_data_dir = std::filesystem::path(path).parent_path().string();
  return load_owned(std::move(bytes), path, std::move(options));
}

Result<std::unique_ptr<Model>> Model::load_bytes(std::span<const std::byte> bytes, std::string_view name,
                                                 ModelOptions options) {
  return load_owned(std::vector<std::byte>(bytes.begin(), bytes.end()), name, std::move(options));
}

Result<std::unique_ptr<Model>> Model::load_owned(std::vector<std::byte> bytes, std::string_view name,
                                                 ModelOptions options) {
  return no_exceptions(fmt::format("loading '{}'", name), [&]() -> Result<std::unique_ptr<Model>> {
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
      return Status(ErrorCode::kUnsupported, fmt::format("'{}': models over 2 GiB need external data", name));
    ::onnx::ModelProto proto;  // for the names: the weights are not copied (wire.h)
    std::vector<detail::RawData> raw;
    const std::span<const uint8_t> u8(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    bool parsed = detail::parse_leaving_raw_data(u8, proto, raw);
    if (!parsed) {
      proto.Clear();
      parsed = proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
    }
    if (!parsed || !proto.has_graph())
      return Status(ErrorCode::kParseError, fmt::format("'{}' is not a valid ONNX model", name));
    std::unique_ptr<Model> model(new Model(std::move(bytes), std::string(name), std::move(options)));
    const auto& graph = proto.graph();
    std::set<std::string, std::less<>> initializers;
    for (const auto& init : graph.initializer()) initializers.insert(init.name());
    for (const auto& info : graph.input())  // IR version < 4 lists initializers as inputs too
      if (!initializers.contains(info.name())) model->input_names_.push_back(info.name());
    for (const auto& info : graph.output()) model->output_names_.push_back(info.name());
    return model;
  });
}

Status Model::check_inputs(const NamedBuffers& inputs) const {
  for (const auto& [name, buffer] : inputs)
    if (std::find(input_names_.begin(), input_names_.end(), name) == input_names_.end())
      return Status(ErrorCode::kInvalidArgument, fmt::format("onnx model '{}' has no input '{}' (its inputs: {})",
                                                             name_, name, fmt::join(input_names_, ", ")));
  return Status();
}

// Imports at the inputs' shapes with the learned inputs as values; an import that names
// new inputs it needs as values is retried with them (the set only grows: at most one
// retry per graph input).
Result<ImportedModel> Model::import_locked(const NamedBuffers& inputs) {
  for (;;) {
    ImportOptions options = options_.import;
    for (const auto& [name, buffer] : inputs) options.input_shapes[name] = buffer.shape();
    for (const std::string& name : needed_) {
      auto it = inputs.find(name);
      if (it == inputs.end())
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("onnx model '{}': input '{}' is needed at import (a shape or other operand carve "
                                  "must know is computed from it): give its value",
                                  name_, name));
      CARVE_ASSIGN_OR_RETURN(int64_t elements, it->second.shape().num_elements());
      if (elements > options_.max_value_elements)
        return Status(ErrorCode::kUnsupported,
                      fmt::format("onnx model '{}': input '{}' ({} elements) is needed at import as a value, but "
                                  "carve specialises on at most {} elements (ModelOptions::max_value_elements)",
                                  name_, describe(name, it->second), elements,
                                  options_.max_value_elements));
      options.input_values.insert_or_assign(name, it->second);
    }
    std::set<std::string> wanted;
    ++stats_.imports;
    Result<ImportedModel> imported = detail::import_bytes_reporting(bytes_, name_, options, &wanted);
    if (imported.ok()) return imported;
    bool learned = false;
    for (const std::string& name : wanted) learned = needed_.insert(name).second || learned;
    if (!learned) return imported.status();
  }
}

Result<std::string> Model::key_locked(const NamedBuffers& inputs) const {
  std::string key;
  for (const auto& [name, buffer] : inputs) {
    key += describe(name, buffer);
    key += ';';
    if (!needed_.contains(name)) continue;
    CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, buffer.bytes());
    key += "=";
    for (std::byte b : bytes) key += fmt::format("{:02x}", static_cast<unsigned>(b));
  }
  return key;
}

Result<ImportedModel> Model::import_for(const NamedBuffers& inputs) {
  return no_exceptions(fmt::format("importing '{}'", name_), [&]() -> Result<ImportedModel> {
    CARVE_RETURN_IF_ERROR(check_inputs(inputs));
    std::lock_guard<std::mutex> lock(mutex_);
    return import_locked(inputs);
  });
}

NamedBuffers Model::by_name(std::span<const runtime::Buffer> inputs) const {
  NamedBuffers named;
  for (size_t i = 0; i < inputs.size() && i < input_names_.size(); ++i) named.insert_or_assign(input_names_[i], inputs[i]);
  return named;
}

Result<std::string> Model::key(std::span<const runtime::Buffer> inputs) const {
  return no_exceptions(fmt::format("keying '{}'", name_), [&]() -> Result<std::string> {
    std::lock_guard<std::mutex> lock(mutex_);
    return key_locked(by_name(inputs));
  });
}

Result<runtime::GraphSpecialisation> Model::specialise(std::span<const runtime::Buffer> inputs) {
  return no_exceptions(fmt::format("importing '{}'", name_), [&]() -> Result<runtime::GraphSpecialisation> {
    if (inputs.size() != input_names_.size())
      return Status(ErrorCode::kInvalidArgument, fmt::format("onnx model '{}' takes {} inputs ({}), got {}", name_,
                                                             input_names_.size(), fmt::join(input_names_, ", "),
                                                             inputs.size()));
    const NamedBuffers named = by_name(inputs);
    std::lock_guard<std::mutex> lock(mutex_);
    // Errors as the import words them (naming the model, node or input).
    CARVE_ASSIGN_OR_RETURN(ImportedModel imported, import_locked(named));
    runtime::GraphSpecialisation out;
    CARVE_ASSIGN_OR_RETURN(out.key, key_locked(named));  // after the import: it may have learned inputs
    out.graph = std::move(imported.graph);
    for (auto& [name, buffer] : imported.mapped_weights) out.constants.insert_or_assign(name, std::move(buffer));
    return out;
  });
}

std::vector<std::string> Model::inputs_needed_at_import() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {needed_.begin(), needed_.end()};
}

ModelStats Model::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace carve::onnx
