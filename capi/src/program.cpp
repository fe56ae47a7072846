// carve.h: running a program, its last run and trace, and its handles.
#include <chrono>

#include "capi_internal.h"

using namespace carve;
using capi::guarded;
using capi::null_argument;

namespace carve::capi {
namespace {

Status run(carve_program* program, const carve_tensor* const* inputs, size_t num_inputs, carve_tensor** outputs,
           size_t num_outputs, const carve_run_options* in, const char* fn) {
  if (program == nullptr) return null_argument(fn, "program");
  if (inputs == nullptr && num_inputs > 0) return null_argument(fn, "inputs");
  if (outputs == nullptr && num_outputs > 0) return null_argument(fn, "outputs");
  if (num_inputs != program->inputs.size() || num_outputs != program->outputs.size())
    return Status(ErrorCode::kInvalidArgument,
                  std::string(fn) + ": " + std::to_string(num_inputs) + " inputs and " + std::to_string(num_outputs) +
                      " outputs given; the program takes " + std::to_string(program->inputs.size()) + " and " +
                      std::to_string(program->outputs.size()));
  CARVE_ASSIGN_OR_RETURN(carve_run_options o, read_options(in, fn, "carve_run_options"));
  runtime::RunOptions options;
  options.check_hazards = o.check_hazards != 0;
  options.fail_on_hazard = o.fail_on_hazard != 0;
  options.record_trace = o.record_trace != 0;
  if (o.cancel != nullptr) options.stop = o.cancel->source.get_token();
  if (o.timeout_ns < 0) return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": timeout_ns is negative");
  if (o.timeout_ns > 0) options.deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(o.timeout_ns);

  std::vector<runtime::Buffer> in_buffers, out_buffers;
  for (size_t i = 0; i < num_inputs; ++i) {
    if (inputs[i] == nullptr)
      return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": input " + std::to_string(i) + " ('" +
                                                     program->inputs[i].name + "') is NULL");
    in_buffers.push_back(inputs[i]->buffer);
  }
  const auto types = program->program->output_types();
  const std::vector<runtime::OutputExtent>& extents = program->program->program().output_extents;
  for (size_t i = 0; i < num_outputs; ++i) {
    if (outputs[i] != nullptr) {
      // A caller tensor keeps its shape: it could not say the actual extent (ir/extent.h).
      if (i < extents.size() && extents[i].axis >= 0)
        return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": output " + std::to_string(i) + " ('" +
                                                       program->outputs[i].name +
                                                       "') has a data-dependent extent: pass NULL and carve returns it "
                                                       "at its actual shape");
      out_buffers.push_back(outputs[i]->buffer);
      continue;
    }
    // A carve-owned output: allocated here, handed over only when the run succeeds.
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer b,
                           runtime::Buffer::allocate(runtime::cpu_allocator(), types[i].dtype, types[i].shape));
    out_buffers.push_back(std::move(b));
  }
  runtime::RunRecord record;
  CARVE_RETURN_IF_ERROR(program->program->run(in_buffers, out_buffers, options, &record));
  std::vector<std::unique_ptr<carve_tensor>> created(num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (outputs[i] != nullptr) continue;
    runtime::Buffer& b = out_buffers[i];
    if (i < record.output_shapes.size() && record.output_shapes[i] != b.shape()) {  // its actual extent
      CARVE_ASSIGN_OR_RETURN(b, b.view(0, b.dtype(), record.output_shapes[i]));
    }
    created[i].reset(new_tensor(b));
  }
  for (size_t i = 0; i < num_outputs; ++i)
    if (created[i]) outputs[i] = created[i].release();
  std::lock_guard lock(program->record_mutex);
  program->last_record = std::move(record);
  return Status();
}

}  // namespace
}  // namespace carve::capi

extern "C" {

carve_status* carve_program_run(carve_program* program, const carve_tensor* const* inputs, size_t num_inputs,
                                carve_tensor** outputs, size_t num_outputs, const carve_run_options* options) {
  static constexpr const char* fn = "carve_program_run";
  return guarded(fn, [&] { return capi::run(program, inputs, num_inputs, outputs, num_outputs, options, fn); });
}

carve_status* carve_program_last_run(const carve_program* program, carve_run_info* out) {
  static constexpr const char* fn = "carve_program_last_run";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    if (out == nullptr) return null_argument(fn, "out");
    std::lock_guard lock(program->record_mutex);
    if (!program->last_record) return Status(ErrorCode::kNotFound, std::string(fn) + ": the program has not run yet");
    const runtime::RunRecord& r = *program->last_record;
    carve_run_info info{sizeof(carve_run_info), r.parallel ? 1 : 0, r.threads, r.hazards_checked ? 1 : 0,
                        static_cast<int64_t>(r.hazards.size()), r.end_ns - r.start_ns};
    return capi::write_out(info, out, fn, "carve_run_info");
  });
}

carve_status* carve_program_write_trace(const carve_program* program, const char* path) {
  static constexpr const char* fn = "carve_program_write_trace";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    if (path == nullptr) return null_argument(fn, "path");
    std::lock_guard lock(program->record_mutex);
    if (!program->last_record) return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": the program has not run yet");
    return program->program->write_trace(path, *program->last_record);
  });
}

carve_status* carve_program_read_handle(const carve_program* program, const char* name, carve_tensor** out) {
  static constexpr const char* fn = "carve_program_read_handle";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    if (name == nullptr) return null_argument(fn, "name");
    if (out == nullptr) return null_argument(fn, "out");
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer value, program->program->read_handle(name));
    *out = capi::new_tensor(std::move(value));
    return Status();
  });
}

carve_status* carve_program_write_handle(carve_program* program, const char* name, const carve_tensor* value) {
  static constexpr const char* fn = "carve_program_write_handle";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    if (name == nullptr) return null_argument(fn, "name");
    if (value == nullptr) return null_argument(fn, "value");
    return program->program->write_handle(name, value->buffer);
  });
}

}  // extern "C"
