// carve.h: sessions, compiling (ONNX file, text file, text string), the program's
// signature and plan.
#include <fstream>
#include <map>
#include <sstream>

#include "capi_internal.h"
#include "carve/ir/text.h"
#ifdef CARVE_HAVE_ONNX
#include "carve/onnx/import.h"
#endif

namespace carve::capi {
namespace {

static_assert(CARVE_INTERNAL == static_cast<int>(ErrorCode::kInternal) &&
                  CARVE_CANCELLED == static_cast<int>(ErrorCode::kCancelled),
              "carve_code mirrors carve::ErrorCode");
static_assert(CARVE_BOOL == static_cast<int>(ir::DType::kBool) &&
                  CARVE_U64 == static_cast<int>(ir::DType::kU64) && CARVE_U64 + 1 == ir::kNumDTypes,
              "carve_dtype mirrors carve::ir::DType");

carve_program::Info tensor_info(std::string name, const ir::TensorType& type) {
  return {std::move(name), from_dtype(type.dtype), type.shape.dims()};
}

Result<runtime::CompileOptions> compile_options(const carve_compile_options* in, const ir::Graph& graph,
                                                const char* fn) {
  CARVE_ASSIGN_OR_RETURN(carve_compile_options o, read_options(in, fn, "carve_compile_options"));
  runtime::CompileOptions options;
  if (o.strategy) options.strategy = o.strategy;
  if (o.order) options.order = o.order;
  options.inplace = o.no_inplace == 0;
  options.fuse = o.no_fuse == 0;
  options.parallel_safe = o.parallel_safe != 0;
  options.schedule.sequential = o.sequential != 0;
  if (o.plan_time_limit_seconds < 0)
    return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": plan_time_limit_seconds is negative");
  if (o.plan_time_limit_seconds > 0) options.plan_time_limit_seconds = o.plan_time_limit_seconds;
  // Every graph handle is bound: shared with another program's handle of that name, or new (zeros).
  for (const ir::Handle& h : graph.handles) {
    if (o.share_handles_with != nullptr) {
      if (auto shared = o.share_handles_with->program->handle(h.name); shared.ok()) {
        options.handles.push_back(*shared);
        continue;
      }
    }
    CARVE_ASSIGN_OR_RETURN(auto handle, runtime::BufferHandle::create(h.name, h.type.dtype, h.type.shape));
    options.handles.push_back(std::move(handle));
  }
  return options;
}

Status compile(carve_session* session, ir::Graph graph, std::map<std::string, runtime::Buffer> constants,
               const carve_compile_options* in, carve_program** out, const char* fn) {
  CARVE_ASSIGN_OR_RETURN(runtime::CompileOptions options, compile_options(in, graph, fn));
  options.constants = std::move(constants);
  CARVE_ASSIGN_OR_RETURN(auto compiled, session->session->compile(std::move(graph), options));
  auto program = std::make_unique<carve_program>();
  const auto in_names = compiled->input_names(), out_names = compiled->output_names();
  const auto in_types = compiled->input_types(), out_types = compiled->output_types();
  for (size_t i = 0; i < in_names.size(); ++i) program->inputs.push_back(tensor_info(in_names[i], in_types[i]));
  for (size_t i = 0; i < out_names.size(); ++i) program->outputs.push_back(tensor_info(out_names[i], out_types[i]));
  const ir::Graph& owned = compiled->program().graph;
  for (const ir::Handle& h : owned.handles) program->handles.push_back(tensor_info(h.name, h.type));
  for (const ir::Value& v : owned.values) {
    carve_program::ValuePlan plan{v.name, std::string(ir::value_kind_name(v.kind))};
    CARVE_ASSIGN_OR_RETURN(plan.bytes, v.type.byte_size());
    if (auto view = compiled->value_view(v.name); view.ok()) {
      plan.in_arena = true;
      plan.buffer_id = view->id().value;
      plan.storage_id = view->storage_id().value;
      plan.offset = static_cast<int64_t>(view->offset());
    }
    program->values.push_back(std::move(plan));
  }
  program->program = std::move(compiled);
  *out = program.release();
  return Status();
}

Status check_compile_args(carve_session* session, const void* source, const char* source_name, carve_program** out,
                          const char* fn) {
  if (session == nullptr) return null_argument(fn, "session");
  if (source == nullptr) return null_argument(fn, source_name);
  if (out == nullptr) return null_argument(fn, "out");
  return Status();
}

Status info_at(const std::vector<carve_program::Info>& list, size_t index, carve_tensor_info* out, const char* fn,
               const char* what) {
  if (out == nullptr) return null_argument(fn, "out");
  if (index >= list.size())
    return Status(ErrorCode::kOutOfBounds, std::string(fn) + ": " + what + " " + std::to_string(index) +
                                               " of a program with " + std::to_string(list.size()));
  const carve_program::Info& info = list[index];
  carve_tensor_info value{sizeof(carve_tensor_info), info.name.c_str(), info.dtype, info.dims.size(), info.dims.data()};
  return write_out(value, out, fn, "carve_tensor_info");
}

}  // namespace
}  // namespace carve::capi

using namespace carve;
using capi::guarded;
using capi::null_argument;

extern "C" {

carve_status* carve_session_create(const carve_session_options* options, carve_session** out) {
  static constexpr const char* fn = "carve_session_create";
  return guarded(fn, [&]() -> Status {
    if (out == nullptr) return null_argument(fn, "out");
    CARVE_ASSIGN_OR_RETURN(carve_session_options o, capi::read_options(options, fn, "carve_session_options"));
    if (o.threads < 0) return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": threads is negative");
    runtime::SessionOptions session_options;
    session_options.threads = o.threads;
    switch (o.device) {
      case CARVE_DEVICE_CPU: break;
      case CARVE_DEVICE_CUDA: session_options.device = {runtime::DeviceType::kCuda, o.device_ordinal}; break;
      default:
        return Status(ErrorCode::kInvalidArgument,
                      std::string(fn) + ": unknown device type " + std::to_string(static_cast<int>(o.device)));
    }
    CARVE_ASSIGN_OR_RETURN(auto session, runtime::Session::create(session_options));
    *out = new carve_session{std::move(session)};
    return Status();
  });
}

void carve_session_free(carve_session* session) { delete session; }

carve_status* carve_session_compile_onnx_file(carve_session* session, const char* path,
                                              const carve_compile_options* options, carve_program** out) {
  static constexpr const char* fn = "carve_session_compile_onnx_file";
  return guarded(fn, [&]() -> Status {
    CARVE_RETURN_IF_ERROR(capi::check_compile_args(session, path, "path", out, fn));
#ifdef CARVE_HAVE_ONNX
    CARVE_ASSIGN_OR_RETURN(onnx::ImportedModel model, onnx::import_model_file(path));
    return capi::compile(session, std::move(model.graph), std::move(model.mapped_weights), options, out, fn);
#else
    (void)options;
    return Status(ErrorCode::kUnavailable,
                  std::string(fn) + ": '" + path + "': this libcarve was built without the ONNX importer (CARVE_WITH_ONNX=OFF)");
#endif
  });
}

carve_status* carve_session_compile_text_file(carve_session* session, const char* path,
                                              const carve_compile_options* options, carve_program** out) {
  static constexpr const char* fn = "carve_session_compile_text_file";
  return guarded(fn, [&]() -> Status {
    CARVE_RETURN_IF_ERROR(capi::check_compile_args(session, path, "path", out, fn));
    std::ifstream file(path, std::ios::binary);
    if (!file.is_open()) return Status(ErrorCode::kIoError, std::string("cannot open '") + path + "'");
    std::ostringstream text;
    text << file.rdbuf();
    if (file.bad()) return Status(ErrorCode::kIoError, std::string("cannot read '") + path + "'");
    auto graph = ir::parse(text.str());
    if (!graph.ok()) return graph.status().with_context(path);
    return capi::compile(session, std::move(*graph), {}, options, out, fn);
  });
}

carve_status* carve_session_compile_text(carve_session* session, const char* text, size_t length,
                                         const carve_compile_options* options, carve_program** out) {
  static constexpr const char* fn = "carve_session_compile_text";
  return guarded(fn, [&]() -> Status {
    CARVE_RETURN_IF_ERROR(capi::check_compile_args(session, text, "text", out, fn));
    CARVE_ASSIGN_OR_RETURN(ir::Graph graph, ir::parse(std::string_view(text, length)));
    return capi::compile(session, std::move(graph), {}, options, out, fn);
  });
}

void carve_program_free(carve_program* program) { delete program; }

size_t carve_program_input_count(const carve_program* program) { return program ? program->inputs.size() : 0; }
size_t carve_program_output_count(const carve_program* program) { return program ? program->outputs.size() : 0; }
size_t carve_program_handle_count(const carve_program* program) { return program ? program->handles.size() : 0; }

carve_status* carve_program_input_info(const carve_program* program, size_t index, carve_tensor_info* out) {
  static constexpr const char* fn = "carve_program_input_info";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    return capi::info_at(program->inputs, index, out, fn, "input");
  });
}
carve_status* carve_program_output_info(const carve_program* program, size_t index, carve_tensor_info* out) {
  static constexpr const char* fn = "carve_program_output_info";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    return capi::info_at(program->outputs, index, out, fn, "output");
  });
}
carve_status* carve_program_handle_info(const carve_program* program, size_t index, carve_tensor_info* out) {
  static constexpr const char* fn = "carve_program_handle_info";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    return capi::info_at(program->handles, index, out, fn, "handle");
  });
}

carve_status* carve_program_plan(const carve_program* program, carve_plan_summary* out) {
  static constexpr const char* fn = "carve_program_plan";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    if (out == nullptr) return null_argument(fn, "out");
    const runtime::PlanSummary& s = program->program->plan_summary();
    carve_plan_summary value{sizeof(carve_plan_summary), s.strategy.c_str(), s.arena_bytes, s.lower_bound_bytes,
                             s.no_reuse_bytes, s.buffers, s.views, s.inplace, s.plan_seconds};
    return capi::write_out(value, out, fn, "carve_plan_summary");
  });
}

size_t carve_program_value_count(const carve_program* program) { return program ? program->values.size() : 0; }

carve_status* carve_program_value_plan(const carve_program* program, size_t index, carve_value_plan* out) {
  static constexpr const char* fn = "carve_program_value_plan";
  return guarded(fn, [&]() -> Status {
    if (program == nullptr) return null_argument(fn, "program");
    if (out == nullptr) return null_argument(fn, "out");
    if (index >= program->values.size())
      return Status(ErrorCode::kOutOfBounds, std::string(fn) + ": value " + std::to_string(index) +
                                                 " of a program with " + std::to_string(program->values.size()));
    const carve_program::ValuePlan& v = program->values[index];
    carve_value_plan value{sizeof(carve_value_plan), v.name.c_str(), v.kind.c_str(), v.in_arena ? 1 : 0,
                           v.buffer_id, v.storage_id, v.offset, v.bytes};
    return capi::write_out(value, out, fn, "carve_value_plan");
  });
}

}  // extern "C"
