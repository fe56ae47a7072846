#include "carve/runtime/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <thread>

#include "carve/ir/extent.h"
#include "carve/jit/fusion.h"
#include "carve/runtime/executor.h"
#include "carve/runtime/trace.h"
#include "../cuda/device_executor.h"
#include "program_build.h"

namespace carve::runtime {

std::string_view region_name(Region region) {
  switch (region) {
    case Region::kArena: return "arena";
    case Region::kInput: return "input";
    case Region::kOutput: return "output";
    case Region::kConstant: return "constant";
    case Region::kHandle: return "handle";
    case Region::kHostInput: return "host_input";
    case Region::kHostOutput: return "host_output";
    case Region::kHostHandle: return "host_handle";
    case Region::kHostArena: return "host_arena";
    case Region::kHostConstant: return "host_constant";
  }
  return "?";
}

Status PositionCheck::out_of_range(int64_t position) const {
  return Status(ErrorCode::kOutOfBounds,
                fmt::format("{}: position {} is out of range: it needs 0 <= position <= {}", what, position, max));
}

Status IndexCheck::out_of_range(int64_t element, int64_t index) const {
  const int64_t bound = bounds[static_cast<size_t>(element) % bounds.size()];
  return Status(ErrorCode::kOutOfBounds, fmt::format("{}: index {} (element {}) is out of range: it needs {} <= index < {}",
                                                     what, index, element, -bound, bound));
}

std::string_view launch_kind_name(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kKernel: return "kernel";
    case LaunchKind::kCopy: return "copy";
    case LaunchKind::kUpload: return "upload";
    case LaunchKind::kDownload: return "download";
  }
  return "?";
}

int32_t Program::input_index(ir::ValueId v) const {
  auto it = std::find(inputs.begin(), inputs.end(), v);
  return it == inputs.end() ? -1 : static_cast<int32_t>(it - inputs.begin());
}

int32_t Program::output_index(ir::ValueId v) const {
  auto it = std::find(outputs.begin(), outputs.end(), v);
  return it == outputs.end() ? -1 : static_cast<int32_t>(it - outputs.begin());
}

Result<std::unique_ptr<Session>> Session::create(const SessionOptions& options) {
  if (options.threads < 0)
    return Status(ErrorCode::kInvalidArgument, fmt::format("SessionOptions::threads is {} (< 0)", options.threads));
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.device.type == DeviceType::kCuda) {
    if (options.streams < 1)
      return Status(ErrorCode::kInvalidArgument, fmt::format("SessionOptions::streams is {} (< 1)", options.streams));
    CARVE_ASSIGN_OR_RETURN(auto backend, detail::DeviceBackend::create(options));
    std::unique_ptr<Session> session(new Session(nullptr, threads));
    session->device_ = std::move(backend);
    session->jit_options_ = options.jit;
    return session;
  }
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<jit::JitCompiler> jit, jit::JitCompiler::create(options.jit));
  return std::unique_ptr<Session>(new Session(std::shared_ptr<jit::JitCompiler>(std::move(jit)), threads));
}

Device Session::device() const { return device_ ? device_->device : Device{}; }

std::shared_ptr<Allocator> Session::allocator() const {
  return device_ ? std::static_pointer_cast<Allocator>(device_->allocator) : cpu_allocator();
}

namespace {

Status check_placement(const ir::Graph& graph, const CompileOptions& options, const Device& device) {
  for (const auto& [name, type] : options.placement) {
    const auto it = std::find_if(graph.nodes.begin(), graph.nodes.end(), [&](const ir::Node& n) { return n.name == name; });
    if (it == graph.nodes.end())
      return Status(ErrorCode::kNotFound, fmt::format("CompileOptions::placement names node '{}', which graph '{}' "
                                                      "does not have", name, graph.name));
    if (device.type == DeviceType::kCpu && type != DeviceType::kCpu)
      return Status(ErrorCode::kUnsupported,
                    fmt::format("{} is placed on cuda but the session runs on cpu: mixed programs are built by a "
                                "cuda Session (SessionOptions::device) with the CPU nodes placed on cpu",
                                ir::describe_node(graph, it->id)));
  }
  return Status();
}

bool placed_on_cpu(const ir::Graph& graph, const CompileOptions& options, ir::NodeId n) {
  const auto it = options.placement.find(graph.node(n).name);
  return it != options.placement.end() && it->second == DeviceType::kCpu;
}

// Per launch of a device program: whether its kernel group is placed on the CPU.
Result<std::vector<bool>> host_launches(const Program& p, const CompileOptions& options) {
  std::vector<bool> host(p.launches.size(), false);
  for (size_t l = 0; l < p.launches.size(); ++l) {
    const Launch& launch = p.launches[l];
    if (launch.kind != LaunchKind::kKernel) continue;
    const jit::KernelGroup& group = p.kernels[static_cast<size_t>(launch.kernel)].group;
    int cpu = 0;
    for (ir::NodeId n : group.nodes) cpu += placed_on_cpu(p.graph, options, n) ? 1 : 0;
    if (cpu > 0 && cpu != static_cast<int>(group.nodes.size()))
      return Status(ErrorCode::kInternal, fmt::format("kernel group '{}' mixes CPU- and GPU-placed nodes", group.name));
    host[l] = cpu > 0;
  }
  return host;
}

bool any_cpu_placement(const CompileOptions& options) {
  return std::any_of(options.placement.begin(), options.placement.end(),
                     [](const auto& kv) { return kv.second == DeviceType::kCpu; });
}

}  // namespace

Result<std::unique_ptr<Program>> build_device_program(ir::Graph graph, const CompileOptions& options,
                                                      std::shared_ptr<Allocator> arena_allocator) {
  CARVE_RETURN_IF_ERROR(check_placement(graph, options, Device{DeviceType::kCuda, 0}));
  // Mixed programs fuse within each side: no kernel group spans the CPU/GPU boundary
  // (build_program splits groups by placement).
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<Program> program,
                         detail::build_program(std::move(graph), options, nullptr, std::move(arena_allocator)));
  if (any_cpu_placement(options)) {
    CARVE_ASSIGN_OR_RETURN(std::vector<bool> host, host_launches(*program, options));
    if (std::find(host.begin(), host.end(), true) != host.end()) CARVE_RETURN_IF_ERROR(place_on_host(*program, host));
  }
  std::vector<bool> host_handle;
  for (const auto& h : program->handles) host_handle.push_back(h->memory().is_cpu_accessible());
  CARVE_RETURN_IF_ERROR(add_device_transfers(*program, host_handle));
  return program;
}

Result<Schedule> build_device_schedule(const Program& program, const CompileOptions& options) {
  ScheduleOptions schedule_options = options.schedule;
  schedule_options.threads = 1;
  schedule_options.chunks_per_launch = 1;
  schedule_options.allow_fallback = false;
  schedule_options.sequential = false;  // on a device: one stream (DeviceExecutor::create)
  return build_schedule(program, schedule_options);
}

// CPU code for the kernels a mixed program runs on the host (the session's CPU JIT, made on
// first use: kUnavailable in a build without it).
Result<std::shared_ptr<jit::JitCompiler>> Session::compile_host_kernels(Program& p) {
  std::shared_ptr<jit::JitCompiler> jit;
  {
    std::lock_guard lock(host_jit_mutex_);
    if (!host_jit_) {
      auto created = jit::JitCompiler::create(jit_options_);
      if (!created.ok())
        return created.status().with_context("nodes placed on the CPU need the CPU JIT");
      host_jit_ = std::shared_ptr<jit::JitCompiler>(std::move(*created));
    }
    jit = host_jit_;
  }
  std::vector<int32_t> kernels;
  std::vector<jit::KernelGroup> groups;
  for (const Launch& l : p.launches)
    if (l.on_host && std::find(kernels.begin(), kernels.end(), l.kernel) == kernels.end()) {
      kernels.push_back(l.kernel);
      groups.push_back(p.kernels[static_cast<size_t>(l.kernel)].group);
    }
  CARVE_ASSIGN_OR_RETURN(auto compiled, jit->compile(p.graph, groups));
  for (size_t i = 0; i < compiled.size(); ++i) p.kernels[static_cast<size_t>(kernels[i])].fn = compiled[i].fn;
  return jit;
}

Result<std::unique_ptr<CompiledProgram>> Session::compile_for_device(ir::Graph graph, const CompileOptions& options) {
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<Program> program,
                         build_device_program(std::move(graph), options, device_->allocator));
  std::shared_ptr<jit::JitCompiler> host_jit;
  if (program->mixed()) {
    CARVE_ASSIGN_OR_RETURN(host_jit, compile_host_kernels(*program));
  }
  CARVE_ASSIGN_OR_RETURN(Schedule schedule, build_device_schedule(*program, options));
  std::unique_ptr<CompiledProgram> compiled(new CompiledProgram(host_jit, std::move(program), std::move(schedule)));
  CARVE_ASSIGN_OR_RETURN(compiled->device_,
                         detail::DeviceExecutor::create(device_, *compiled->program_, compiled->schedule_,
                                                        options.schedule.sequential));
  return compiled;
}

Result<std::unique_ptr<CompiledProgram>> Session::compile(ir::Graph graph, const CompileOptions& options) {
  using Compiled = Result<std::unique_ptr<CompiledProgram>>;
  const std::string context = fmt::format("compiling graph '{}'", graph.name);
  return no_exceptions(context, [&]() -> Compiled {
    if (options.schedule.threads < 0)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("CompileOptions::schedule.threads is {} (< 0)", options.schedule.threads));
    CARVE_RETURN_IF_ERROR(check_placement(graph, options, device()));
    if (device_) return compile_for_device(std::move(graph), options);
    CARVE_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, detail::build_program(std::move(graph), options, jit_.get()));
    const auto start = std::chrono::steady_clock::now();
    ScheduleOptions schedule_options = options.schedule;
    if (schedule_options.threads == 0) schedule_options.threads = threads_;
    CARVE_ASSIGN_OR_RETURN(Schedule schedule, build_schedule(*program, schedule_options));
    std::unique_ptr<CompiledProgram> compiled(new CompiledProgram(jit_, std::move(program), std::move(schedule)));
    compiled->program_->times.schedule =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return compiled;
  });
}

namespace {

Status check_buffer(const Buffer& buffer, const ir::TensorType& type, std::string_view what,
                    const std::string& name, const Device& device) {
  if (!buffer.is_allocated())
    return Status(ErrorCode::kNotAllocated, fmt::format("{} '{}': buffer #{} has no memory", what, name,
                                                        buffer.id().value));
  const bool same_device = device.type == DeviceType::kCuda && buffer.device_type() == DeviceType::kCuda &&
                           buffer.device_id() == device.index;
  if (!buffer.is_cpu_accessible() && !same_device)
    return Status(ErrorCode::kNotCpuAccessible, fmt::format("{} '{}': buffer #{} is not in host memory", what, name,
                                                            buffer.id().value));
  if (buffer.dtype() != type.dtype)
    return Status(ErrorCode::kTypeMismatch, fmt::format("{} '{}' is {}, got {}{}", what, name, type.to_string(),
                                                        ir::dtype_name(buffer.dtype()), buffer.shape().to_string()));
  if (buffer.shape() != type.shape)
    return Status(ErrorCode::kShapeError, fmt::format("{} '{}' is {}, got {}{}", what, name, type.to_string(),
                                                      ir::dtype_name(buffer.dtype()), buffer.shape().to_string()));
  return Status();
}

// Whether two buffers share any byte of memory, by address range (two Buffers borrowed
// over the same pointer are different storages but the same bytes). Buffers in different
// memory spaces (host vs a device, or two devices) never overlap.
bool same_bytes(const Buffer& a, const Buffer& b) {
  if (a.size() == 0 || b.size() == 0 || !a.is_allocated() || !b.is_allocated()) return false;
  const bool a_host = a.is_cpu_accessible(), b_host = b.is_cpu_accessible();
  if (a_host != b_host) return false;
  if (!a_host && a.device_id() != b.device_id()) return false;
  const auto* pa = a.unsafe_data();
  const auto* pb = b.unsafe_data();
  return pa < pb + b.size() && pb < pa + a.size();
}

}  // namespace

Status CompiledProgram::check_run_args(std::span<const Buffer> inputs, std::span<Buffer> outputs) const {
  const Program& p = *program_;
  if (inputs.size() != p.inputs.size())
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("graph '{}' takes {} inputs, got {}", p.graph.name, p.inputs.size(), inputs.size()));
  if (outputs.size() != p.outputs.size())
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("graph '{}' has {} outputs, got {}", p.graph.name, p.outputs.size(), outputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& v = p.graph.value(p.inputs[i]);
    CARVE_RETURN_IF_ERROR(check_buffer(inputs[i], v.type, "input", v.name, device()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ir::Value& v = p.graph.value(p.outputs[i]);
    CARVE_RETURN_IF_ERROR(check_buffer(outputs[i], v.type, "output", v.name, device()));
    if (!outputs[i].is_mutable())
      return Status(ErrorCode::kReadOnly, fmt::format("output '{}': buffer #{} is read-only", v.name,
                                                      outputs[i].id().value));
  }
  return check_caller_overlaps(inputs, outputs);
}

namespace {

// The stop token of a run: the caller's, or, with a deadline, one that a timer thread
// requests at the deadline (or when the caller's is requested). The timer ends with the run.
class DeadlineStop {
 public:
  DeadlineStop(std::stop_token caller, std::optional<std::chrono::steady_clock::time_point> deadline)
      : caller_(std::move(caller)) {
    if (!deadline) return;
    forward_.emplace(caller_, [this] { source_.request_stop(); });
    timer_ = std::jthread([this, at = *deadline](std::stop_token run_ended) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      if (!cv.wait_until(lock, run_ended, at, [] { return false; }) && !run_ended.stop_requested())
        source_.request_stop();
    });
  }
  std::stop_token token() const { return timer_.joinable() ? source_.get_token() : caller_; }

 private:
  std::stop_token caller_;
  std::stop_source source_;
  std::optional<std::stop_callback<std::function<void()>>> forward_;
  std::jthread timer_;  // declared last: joined first, before source_ goes
};

// Every handle some launch writes.
std::vector<BufferHandle*> written_handles(const Program& p) {
  std::vector<bool> written(p.handles.size(), false);
  for (const Launch& launch : p.launches)
    for (const MemoryRef& w : launch.writes)
      if (w.region == Region::kHandle) written[static_cast<size_t>(w.slot)] = true;
  std::vector<BufferHandle*> handles;
  for (size_t h = 0; h < p.handles.size(); ++h)
    if (written[h]) handles.push_back(p.handles[h].get());
  return handles;
}

// Each output's shape after a run: its type's, with a data-dependent extent read from
// the slot its kernel wrote (program.h OutputExtent); one outside [0, bound] is kInternal.
Result<std::vector<ir::Shape>> actual_output_shapes(const Program& p, const RegionBases& bases) {
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const ir::Shape& planned = p.graph.value(p.outputs[i]).type.shape;
    const OutputExtent* extent = i < p.output_extents.size() ? &p.output_extents[i] : nullptr;
    if (extent == nullptr || extent->axis < 0) {
      shapes.push_back(planned);
      continue;
    }
    int64_t actual = 0;
    std::memcpy(&actual, operand_address(p, bases, extent->extent), sizeof actual);
    if (actual < 0 || actual > planned[extent->axis])
      return Status(ErrorCode::kInternal, fmt::format("output {}: its kernel wrote the extent {} outside [0, {}]",
                                                      ir::describe_value(p.graph, p.outputs[i]), actual,
                                                      planned[extent->axis]));
    shapes.push_back(ir::actual_shape(planned, {extent->axis, ir::kNoValue}, actual));
  }
  return shapes;
}

// Kernels may have written handles before a failure: their values are undefined now.
void invalidate_written_handles(const Program& p, const Status& failure) {
  for (BufferHandle* h : written_handles(p))
    h->invalidate(fmt::format("a run of '{}' failed: {}", p.graph.name, failure.message()));
}

// Copies of the bytes of every handle some launch writes (CPU programs).
Result<std::vector<std::pair<BufferHandle*, std::vector<std::byte>>>> save_written_handles(const Program& p) {
  std::vector<std::pair<BufferHandle*, std::vector<std::byte>>> saved;
  for (BufferHandle* h : written_handles(p)) {
    CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, h->memory().bytes());
    saved.emplace_back(h, std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  return saved;
}

}  // namespace

Status CompiledProgram::check_caller_overlaps(std::span<const Buffer> inputs, std::span<Buffer> outputs) const {
  const Program& p = *program_;
  // Caller buffer i: the inputs, then the outputs. Names are built only for the error.
  const size_t num_inputs = inputs.size(), num_caller = inputs.size() + outputs.size();
  auto caller = [&](size_t i) -> const Buffer& { return i < num_inputs ? inputs[i] : outputs[i - num_inputs]; };
  auto caller_name = [&](size_t i) {
    return i < num_inputs ? fmt::format("input '{}'", p.graph.value(p.inputs[i]).name)
                          : fmt::format("output '{}'", p.graph.value(p.outputs[i - num_inputs]).name);
  };
  auto overlap_error = [](const std::string& a, const Buffer& ba, const std::string& b, const Buffer& bb) {
    return Status(ErrorCode::kInvalidArgument, fmt::format("{} (buffer #{}) overlaps {} (buffer #{})", a,
                                                           ba.id().value, b, bb.id().value));
  };
  // An output may not share bytes with an input or another output (inputs may share).
  for (size_t o = num_inputs; o < num_caller; ++o)
    for (size_t i = 0; i < o; ++i)
      if (same_bytes(caller(o), caller(i))) return overlap_error(caller_name(o), caller(o), caller_name(i), caller(i));
  // No caller buffer may share bytes with the arena, a constant or a handle.
  for (size_t i = 0; i < num_caller; ++i) {
    const Buffer& b = caller(i);
    if (p.arena && same_bytes(b, p.arena->arena()))
      return overlap_error(caller_name(i), b, fmt::format("the arena (storage #{})", p.arena->storage_id().value),
                           p.arena->arena());
    for (size_t c = 0; c < p.constant_buffers.size(); ++c)
      if (p.constant_buffers[c] && same_bytes(b, *p.constant_buffers[c]))
        return overlap_error(caller_name(i), b, fmt::format("constant '{}'", p.graph.value(p.constants[c]).name),
                             *p.constant_buffers[c]);
    for (const auto& h : p.handles)
      if (same_bytes(b, h->memory())) return overlap_error(caller_name(i), b, fmt::format("handle '{}'", h->name()), h->memory());
  }
  return Status();
}

Status CompiledProgram::run(std::span<const Buffer> inputs, std::span<Buffer> outputs, const RunOptions& options,
                            RunRecord* record) {
  return no_exceptions(fmt::format("running graph '{}'", program_->graph.name), [&]() -> Status {
    std::lock_guard run_lock(run_mutex_);
    CARVE_RETURN_IF_ERROR(check_run_args(inputs, outputs));
    const Program& p = *program_;
    // Handles shared with other programs: lock in address order so two programs never deadlock.
    std::vector<BufferHandle*> handles;
    for (const auto& h : p.handles) handles.push_back(h.get());
    std::sort(handles.begin(), handles.end());
    handles.erase(std::unique(handles.begin(), handles.end()), handles.end());
    std::vector<std::unique_lock<std::mutex>> handle_locks;
    for (BufferHandle* h : handles) handle_locks.emplace_back(h->run_mutex());
    for (BufferHandle* h : handles) CARVE_RETURN_IF_ERROR(h->check_valid());

    if (options.stop.stop_requested())
      return Status(ErrorCode::kCancelled, fmt::format("run of '{}' cancelled before it started", p.graph.name));
    if (options.deadline && std::chrono::steady_clock::now() >= *options.deadline)
      return Status(ErrorCode::kCancelled, fmt::format("run of '{}': the deadline passed before it started", p.graph.name));
    if (device_) {
      CARVE_RETURN_IF_ERROR(device_->check_arguments(p, inputs, outputs));  // before anything runs
      Status status = device_->run(p, inputs, outputs, record);
      if (!status.ok()) invalidate_written_handles(p, status);
      if (status.ok() && record != nullptr) {  // device programs have static shapes only
        record->output_shapes.clear();
        for (ir::ValueId v : p.outputs) record->output_shapes.push_back(p.graph.value(v).type.shape);
      }
      return status;
    }
    // Only the caller-bound operands are re-resolved; arena operands come from their views.
    for (size_t i = 0; i < inputs.size(); ++i) bases_.inputs[i] = inputs[i].unsafe_data();
    for (size_t i = 0; i < outputs.size(); ++i) bases_.outputs[i] = outputs[i].unsafe_data();
    for (size_t i = 0; i < p.handles.size(); ++i) bases_.handles[i] = p.handles[i]->memory().unsafe_data();
    operands_.bind(p, bases_);
    DeadlineStop deadline_stop(options.stop, options.deadline);
    operands_.set_stop(deadline_stop.token());
    ParallelRunOptions run_options;
    run_options.check_hazards = options.check_hazards;
    run_options.fail_on_hazard = options.fail_on_hazard;
    run_options.record_trace = options.record_trace;
    run_options.stretch_us = options.stretch_us;
    // A run that can fail after its kernels ran (the checker finds a race) first saves the
    // handles it writes, and puts them back when it fails: a failed run leaves handles as
    // they were.
    std::vector<std::pair<BufferHandle*, std::vector<std::byte>>> saved;
    if (options.check_hazards && options.fail_on_hazard) {
      CARVE_ASSIGN_OR_RETURN(saved, save_written_handles(p));
    }
    Status status = executor_.run(p, schedule_, operands_, run_options, record);
    if (status.ok()) {
      if (record == nullptr) return status;
      CARVE_ASSIGN_OR_RETURN(record->output_shapes, actual_output_shapes(p, bases_));
      return status;
    }
    if (!saved.empty()) {
      for (auto& [handle, bytes] : saved) std::memcpy(handle->memory().unsafe_data(), bytes.data(), bytes.size());
      return status;
    }
    invalidate_written_handles(p, status);
    return status;
  });
}

CompiledProgram::CompiledProgram(std::shared_ptr<jit::JitCompiler> jit, std::unique_ptr<Program> program,
                                 Schedule schedule)
    : jit_(std::move(jit)), program_(std::move(program)), schedule_(std::move(schedule)),
      executor_(schedule_.threads()) {
  const Program& p = *program_;
  if (p.on_device) return;  // the device executor binds its own addresses
  bases_.inputs.assign(p.inputs.size(), nullptr);
  bases_.outputs.assign(p.outputs.size(), nullptr);
  for (const auto& b : p.constant_buffers) bases_.constants.push_back(b ? b->unsafe_data() : nullptr);
  for (const auto& h : p.handles) bases_.handles.push_back(h->memory().unsafe_data());
  operands_ = LaunchOperands(p, bases_);
}

CompiledProgram::~CompiledProgram() = default;

Device CompiledProgram::device() const {
  return device_ ? device_->backend_device() : Device{};
}

const StreamPlan* CompiledProgram::stream_plan() const { return device_ ? &device_->stream_plan() : nullptr; }

Status CompiledProgram::write_trace(const std::string& path, const RunRecord& record) const {
  return write_trace_json(path, *program_, schedule_, record);
}

Result<std::vector<Buffer>> CompiledProgram::run(std::span<const Buffer> inputs, const RunOptions& options,
                                                 RunRecord* record) {
  std::vector<Buffer> outputs;
  for (const ir::TensorType& type : output_types()) {
    CARVE_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(cpu_allocator(), type.dtype, type.shape));
    outputs.push_back(std::move(b));
  }
  RunRecord local;
  RunRecord& rec = record != nullptr ? *record : local;
  CARVE_RETURN_IF_ERROR(run(inputs, outputs, options, &rec));
  // An output with a data-dependent extent: a view of its actual shape over the planned bytes.
  for (size_t i = 0; i < outputs.size() && i < rec.output_shapes.size(); ++i) {
    if (rec.output_shapes[i] == outputs[i].shape()) continue;
    CARVE_ASSIGN_OR_RETURN(outputs[i], outputs[i].view(0, outputs[i].dtype(), rec.output_shapes[i]));
  }
  return outputs;
}

std::vector<std::string> CompiledProgram::input_names() const {
  std::vector<std::string> names;
  for (ir::ValueId v : program_->inputs) names.push_back(program_->graph.value(v).name);
  return names;
}

std::vector<std::string> CompiledProgram::output_names() const {
  std::vector<std::string> names;
  for (ir::ValueId v : program_->outputs) names.push_back(program_->graph.value(v).name);
  return names;
}

std::vector<ir::TensorType> CompiledProgram::input_types() const {
  std::vector<ir::TensorType> types;
  for (ir::ValueId v : program_->inputs) types.push_back(program_->graph.value(v).type);
  return types;
}

std::vector<ir::TensorType> CompiledProgram::output_types() const {
  std::vector<ir::TensorType> types;
  for (ir::ValueId v : program_->outputs) types.push_back(program_->graph.value(v).type);
  return types;
}

Result<std::shared_ptr<BufferHandle>> CompiledProgram::handle(std::string_view name) const {
  std::string bound;
  for (const auto& h : program_->handles) {
    if (h->name() == name) return h;
    bound += (bound.empty() ? "" : ", ") + h->name();
  }
  return Status(ErrorCode::kNotFound, fmt::format("no handle '{}' is bound (bound: {})", name,
                                                  bound.empty() ? "none" : bound));
}

Result<Buffer> CompiledProgram::read_handle(std::string_view name) const {
  CARVE_ASSIGN_OR_RETURN(auto h, handle(name));
  return h->read();
}

Status CompiledProgram::write_handle(std::string_view name, const Buffer& value) {
  CARVE_ASSIGN_OR_RETURN(auto h, handle(name));
  return h->set(value);
}

namespace {

std::string_view where_not_in_arena(planner::Placement placement) {
  switch (placement) {
    case planner::Placement::kInput: return "it lives in the caller's input";
    case planner::Placement::kOutput: return "it lives in the caller's output";
    case planner::Placement::kConstant: return "it is a constant";
    case planner::Placement::kHandle: return "it lives in a handle";
    case planner::Placement::kNone: return "a fused kernel keeps it in registers";
    case planner::Placement::kArena: break;
  }
  return "no view";
}

// Every arena view: "x: buffer #17 = storage #3 [0, 256) f32[1,64]".
std::string explain_views(const Program& p) {
  if (!p.arena) return {};
  std::string text = fmt::format("arena: storage #{}, {} bytes, {} views (value: buffer = storage [begin, end) type)\n",
                                 p.arena->storage_id().value, p.arena->arena_bytes(), p.arena->views().size());
  for (const ArenaView& v : p.arena->views()) {
    const Buffer& b = v.buffer;
    text += fmt::format("  {}: buffer #{} = storage #{} [{}, {}) {}{}\n", v.name, b.id().value, b.storage_id().value,
                        b.offset(), b.offset() + b.size(), ir::dtype_name(b.dtype()), b.shape().to_string());
  }
  return text;
}

}  // namespace

Result<Buffer> CompiledProgram::value_view(std::string_view value_name) const {
  const Program& p = *program_;
  const ir::Value* v = p.graph.find_value(value_name);
  if (v == nullptr)
    return Status(ErrorCode::kNotFound, fmt::format("graph '{}' has no value '{}'", p.graph.name, value_name));
  const int32_t view = p.value_views.empty() ? -1 : p.value_views[static_cast<size_t>(v->id)];
  if (view < 0)
    return Status(ErrorCode::kNotFound,
                  fmt::format("{} has no arena view: {}", ir::describe_value(p.graph, v->id),
                              where_not_in_arena(p.problem.values[static_cast<size_t>(v->id)].placement)));
  return p.arena->views()[static_cast<size_t>(view)].buffer;
}

std::string CompiledProgram::explain() const {
  const Program& p = *program_;
  const PlanSummary& s = p.plan_summary;
  std::string text = fmt::format("graph '{}': {} nodes, {} kernels, {} launches\n", p.graph.name,
                                 p.graph.num_nodes(), p.kernels.size(), p.launches.size());
  text += "kernels (fused groups):\n";
  int64_t library_kernels = 0;
  for (const ProgramKernel& k : p.kernels) {
    text += "  " + jit::describe_group(p.graph, k.group);
    if (k.library) text += " | " + k.library->describe();
    text += "\n";
    library_kernels += k.library != nullptr;
  }
  text += fmt::format(
      "arena plan: strategy {}, arena {} bytes, lower bound {} bytes ({:.4f}x), no reuse {} bytes; "
      "{} buffers, {} views folded, {} in place; planned in {:.3f} ms\n",
      s.strategy, s.arena_bytes, s.lower_bound_bytes,
      s.lower_bound_bytes > 0 ? double(s.arena_bytes) / double(s.lower_bound_bytes) : 1.0, s.no_reuse_bytes,
      s.buffers, s.views, s.inplace, s.plan_seconds * 1e3);
  text += fmt::format("jit: {} kernels in {:.1f} ms: {} compiled, {} from the memory cache, {} from the disk cache\n",
                      p.kernels.size() - static_cast<size_t>(library_kernels), p.jit_seconds * 1e3,
                      p.kernels_compiled, p.kernels_from_memory, p.kernels_from_disk);
  if (library_kernels > 0)
    text += fmt::format("library kernels: {} through {}\n", library_kernels, jit::library_provider_name());
  text += explain_views(p);
  text += fmt::format("schedule: {}\n", schedule_.stats().to_string());
  if (device_) text += device_->describe() + "\n";
  return text;
}

}  // namespace carve::runtime
