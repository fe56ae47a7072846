// DynamicProgram: a Session's program over a graph family, one specialisation per input
// signature (dynamic_program.h).
#include "carve/runtime/dynamic_program.h"

#include <fmt/format.h>

#include <algorithm>

namespace carve::runtime {

std::unique_ptr<Session> Session::share() {
  std::unique_ptr<Session> shared(new Session(jit_, threads_));
  shared->device_ = device_;
  shared->jit_options_ = jit_options_;
  std::lock_guard lock(host_jit_mutex_);
  shared->host_jit_ = host_jit_;
  return shared;
}

Result<std::unique_ptr<DynamicProgram>> Session::compile(std::shared_ptr<GraphSource> source,
                                                         const CompileOptions& options) {
  if (!source) return Status(ErrorCode::kInvalidArgument, "Session::compile: the graph source is null");
  if (options.max_specialisations < 1)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("compiling '{}': CompileOptions::max_specialisations must be >= 1", source->source_name()));
  if (options.schedule.threads < 0)
    return Status(ErrorCode::kInvalidArgument, fmt::format("compiling '{}': CompileOptions::schedule.threads is {} (< 0)",
                                                           source->source_name(), options.schedule.threads));
  if (source->output_names().empty())
    return Status(ErrorCode::kInvalidArgument, fmt::format("compiling '{}': the graph source has no outputs", source->source_name()));
  return std::unique_ptr<DynamicProgram>(new DynamicProgram(share(), std::move(source), options));
}

DynamicProgram::DynamicProgram(std::unique_ptr<Session> session, std::shared_ptr<GraphSource> source,
                               CompileOptions options)
    : session_(std::move(session)), source_(std::move(source)), options_(std::move(options)) {}

DynamicProgram::~DynamicProgram() = default;

DynamicProgramStats DynamicProgram::stats() const {
  std::lock_guard lock(mutex_);
  DynamicProgramStats s = stats_;
  s.cached = cache_.size();
  return s;
}

Result<std::shared_ptr<CompiledProgram>> DynamicProgram::find_or_compile_locked(std::span<const Buffer> inputs) {
  const size_t expected = source_->input_names().size();
  if (inputs.size() != expected)
    return Status(ErrorCode::kInvalidArgument, fmt::format("'{}' takes {} inputs, got {}", source_->source_name(),
                                                           expected, inputs.size()));
  CARVE_ASSIGN_OR_RETURN(std::string key, source_->key(inputs));
  auto hit = std::find_if(cache_.begin(), cache_.end(), [&](const Entry& e) { return e.key == key; });
  if (hit != cache_.end()) {
    ++stats_.hits;
    cache_.splice(cache_.begin(), cache_, hit);
    return cache_.front().program;
  }
  CARVE_ASSIGN_OR_RETURN(GraphSpecialisation special, source_->specialise(inputs));
  if (special.key != key) {  // the source learned: every cached key was made the old way
    stats_.evictions += static_cast<int64_t>(cache_.size());
    cache_.clear();
  }
  CompileOptions options = options_;
  for (auto& [name, buffer] : special.constants) options.constants.insert_or_assign(name, std::move(buffer));
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<CompiledProgram> compiled,
                         session_->compile(std::move(special.graph), options));
  ++stats_.specialisations;
  cache_.push_front(Entry{std::move(special.key), std::move(compiled)});
  while (cache_.size() > options_.max_specialisations) {
    cache_.pop_back();
    ++stats_.evictions;
  }
  return cache_.front().program;
}

Result<std::shared_ptr<CompiledProgram>> DynamicProgram::specialise(std::span<const Buffer> inputs) {
  return no_exceptions(fmt::format("specialising '{}'", source_->source_name()),
                       [&]() -> Result<std::shared_ptr<CompiledProgram>> {
                         std::lock_guard lock(mutex_);
                         return find_or_compile_locked(inputs);
                       });
}

Result<std::vector<Buffer>> DynamicProgram::run(std::span<const Buffer> inputs, const RunOptions& options,
                                                RunRecord* record) {
  std::shared_ptr<CompiledProgram> program;
  {
    std::lock_guard lock(mutex_);
    ++stats_.runs;
  }
  CARVE_ASSIGN_OR_RETURN(program, specialise(inputs));
  // Inputs the specialisation took as constants are not the program's: bind the others by name.
  const std::vector<std::string>& names = source_->input_names();
  std::vector<Buffer> bound;
  for (const std::string& name : program->input_names()) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      return Status(ErrorCode::kInternal, fmt::format("'{}': program input '{}' is not an input of the graph source",
                                                      source_->source_name(), name));
    bound.push_back(inputs[static_cast<size_t>(it - names.begin())]);
  }
  CARVE_ASSIGN_OR_RETURN(std::vector<Buffer> outputs, program->run(bound, options, record));
  const std::vector<std::string> produced = program->output_names();
  std::vector<Buffer> ordered;
  for (const std::string& name : source_->output_names()) {
    auto it = std::find(produced.begin(), produced.end(), name);
    if (it == produced.end())
      return Status(ErrorCode::kInternal, fmt::format("'{}': output '{}' is not in the specialised program",
                                                      source_->source_name(), name));
    ordered.push_back(std::move(outputs[static_cast<size_t>(it - produced.begin())]));
  }
  return ordered;
}

}  // namespace carve::runtime
