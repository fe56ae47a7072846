// DeviceExecutor (device_executor.h): NVRTC kernels, device memory and stream/graph runs.
#include "device_executor.h"

#include <fmt/format.h>

#include <cstring>
#include <span>

#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/runtime/session.h"

namespace carve::runtime::detail {

namespace cu = jit::cuda;

namespace {

cuda::DevicePtr dptr(const std::byte* p) { return static_cast<cuda::DevicePtr>(reinterpret_cast<uintptr_t>(p)); }

Status named(const Program& p, int32_t l, Status s) {
  if (s.ok()) return s;
  return s.with_context(fmt::format("launch {} '{}'", l, p.launches[static_cast<size_t>(l)].name));
}

bool on_device(const Buffer& b) { return b.device_type() == DeviceType::kCuda; }

}  // namespace

Result<std::shared_ptr<DeviceBackend>> DeviceBackend::create(const SessionOptions& options) {
  const Device& device = options.device;
  if (device.type != DeviceType::kCuda)
    return Status(ErrorCode::kInvalidArgument, fmt::format("device backend for {}", device.to_string()));
  CARVE_RETURN_IF_ERROR(cuda::driver_status());
  auto backend = std::make_shared<DeviceBackend>();
  backend->device = device;
  backend->streams = std::max(1, options.streams);
  backend->graphs = options.cuda_graphs;
  backend->tf32 = options.cuda_tf32;
  CARVE_ASSIGN_OR_RETURN(backend->info, cuda::device_info(device.index));
  CARVE_ASSIGN_OR_RETURN(backend->allocator, cuda::CudaAllocator::create(device.index));
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<cu::NvrtcCompiler> nvrtc, cu::NvrtcCompiler::create({}));
  backend->nvrtc = std::move(nvrtc);
  if (options.cuda_gemm != CudaGemm::kGenerated) {
    auto lt = cuda::CublasLt::create(backend->allocator->context());
    if (!lt.ok() && options.cuda_gemm == CudaGemm::kCublasLt) return lt.status();
    if (lt.ok()) backend->cublaslt = std::move(*lt);
    else backend->cublaslt_unavailable = lt.status().message();
  }
  return backend;
}

Result<std::optional<LibraryKernel>> DeviceExecutor::make_library_kernel(const Program& p, size_t k) {
  auto gemm = cu::plan_library_gemm(p.graph, p.kernels[k].group);
  if (!gemm.ok()) {
    if (gemm.status().code() == ErrorCode::kUnsupported) return std::optional<LibraryKernel>();
    return gemm.status();
  }
  LibraryKernel lib;
  lib.gemm = std::move(*gemm);
  const cu::LibraryGemm& g = lib.gemm;
  cuda::LtGemm lt{.batch = g.batch, .m = g.m, .n = g.n, .k = g.k, .trans_a = g.a.transposed,
                  .trans_b = g.b.transposed, .lda = g.a.ld, .ldb = g.b.ld, .ldd = g.n,
                  .stride_a = g.a.batch_stride, .stride_b = g.b.batch_stride, .stride_d = g.m * g.n,
                  .tf32 = backend_->tf32};
  auto plan = backend_->cublaslt->plan(lt);
  if (!plan.ok()) {
    if (plan.status().code() == ErrorCode::kUnsupported) return std::optional<LibraryKernel>();
    return plan.status();
  }
  lib.plan = std::move(*plan);
  const auto& ctx = backend_->allocator->context();
  for (auto [source, module] : {std::pair{&g.im2col, &lib.im2col}, std::pair{&g.epilogue, &lib.epilogue}}) {
    if (!*source) continue;
    CARVE_ASSIGN_OR_RETURN(auto bin, backend_->nvrtc->compile((*source)->source, backend_->info.arch()));
    CARVE_ASSIGN_OR_RETURN(*module, cuda::CudaModule::load(ctx, *bin));
  }
  return std::optional<LibraryKernel>(std::move(lib));
}

std::string DeviceExecutor::describe() const {
  std::string text = fmt::format("cuda: {}, {} streams ({} used), {}", backend_->info.to_string(), plan_.streams,
                                 plan_.streams_used, backend_->graphs ? "CUDA graph replay" : "no CUDA graph");
  if (!backend_->cublaslt) {
    return text + (backend_->cublaslt_unavailable.empty() ? "; GEMM groups: generated kernels"
                                                          : "; GEMM groups: generated kernels (" +
                                                                backend_->cublaslt_unavailable + ")");
  }
  return text + fmt::format("; GEMM groups: {} through {} ({})", library_gemms(), backend_->cublaslt->version(),
                            backend_->tf32 ? "TF32 allowed" : "f32");
}

int64_t DeviceExecutor::library_gemms() const {
  int64_t n = 0;
  for (const auto& l : library_) n += l.has_value() ? 1 : 0;
  return n;
}

Result<std::unique_ptr<DeviceExecutor>> DeviceExecutor::create(std::shared_ptr<DeviceBackend> backend,
                                                               const Program& p, const Schedule& schedule,
                                                               bool sequential) {
  std::unique_ptr<DeviceExecutor> ex(new DeviceExecutor());
  ex->backend_ = backend;
  ex->schedule_ = &schedule;
  if (schedule.task_count() != static_cast<int32_t>(p.launches.size()))
    return Status(ErrorCode::kInternal, "device schedule must have one task per launch");
  const auto& ctx = backend->allocator->context();
  const std::vector<bool> device_kernel = device_kernels(p);  // kernels only the host runs get no module
  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    const ProgramKernel& k = p.kernels[ki];
    ex->library_.emplace_back();
    if (device_kernel[ki] && backend->cublaslt) {
      auto lib = ex->make_library_kernel(p, ki);
      if (!lib.ok()) return lib.status().with_context(fmt::format("kernel group '{}'", k.group.name));
      ex->library_.back() = std::move(*lib);
    }
    if (!device_kernel[ki] || ex->library_.back()) {
      ex->modules_.push_back(nullptr);
      ex->configs_.emplace_back();
      ex->error_word_.push_back(false);
      continue;
    }
    CARVE_ASSIGN_OR_RETURN(cu::KernelSource src, cu::generate_kernel(p.graph, k.group));
    auto bin = backend->nvrtc->compile(src.source, backend->info.arch());
    if (!bin.ok()) return bin.status().with_context(fmt::format("kernel group '{}'", k.group.name));
    CARVE_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaModule> module, cuda::CudaModule::load(ctx, **bin));
    ex->modules_.push_back(std::move(module));
    ex->configs_.push_back(src.launch);
    ex->error_word_.push_back(src.error_word);
  }
  auto alloc = std::static_pointer_cast<Allocator>(backend->allocator);
  for (const auto& host : p.constant_buffers) {  // uploaded once
    if (!host) {
      ex->constants_.emplace_back(std::nullopt);
      continue;
    }
    CARVE_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(alloc, host->dtype(), host->shape()));
    CARVE_RETURN_IF_ERROR(b.copy_from(*host));
    ex->constants_.push_back(std::move(b));
  }
  for (const auto& h : p.handles) {
    ex->handle_staging_.emplace_back(std::nullopt);
    if (!h->memory().is_cpu_accessible()) {
      ex->handle_mirrors_.emplace_back(std::nullopt);
      if (p.mixed()) {  // CPU-placed handle ops of a mixed program work on a host copy
        CARVE_ASSIGN_OR_RETURN(Buffer staging, Buffer::allocate(cpu_allocator(), h->type().dtype, h->type().shape));
        ex->handle_staging_.back() = std::move(staging);
      }
      continue;
    }
    CARVE_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(alloc, h->type().dtype, h->type().shape));
    ex->handle_mirrors_.push_back(std::move(b));
  }
  for (ir::ValueId v : p.inputs) {
    const auto& t = p.graph.value(v).type;
    CARVE_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(alloc, t.dtype, t.shape));
    ex->input_staging_.push_back(std::move(b));
  }
  for (ir::ValueId v : p.outputs) {
    const auto& t = p.graph.value(v).type;
    CARVE_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(alloc, t.dtype, t.shape));
    ex->output_staging_.push_back(std::move(b));
  }
  if (p.mixed()) {  // the host copy of the arena (same offsets) for the CPU-placed kernels
    CARVE_ASSIGN_OR_RETURN(Buffer b, Buffer::allocate(cpu_allocator(), ir::DType::kU8,
                                                      ir::Shape({std::max<int64_t>(1, p.plan.arena_bytes)})));
    ex->host_arena_ = std::move(b);
  }
  std::vector<uint8_t> host(static_cast<size_t>(schedule.task_count()), 0);  // mixed: CPU-placed kernels
  for (int32_t t = 0; t < schedule.task_count(); ++t)
    host[static_cast<size_t>(t)] = p.launches[static_cast<size_t>(schedule.tasks()[static_cast<size_t>(t)].launch)].on_host;
  CARVE_ASSIGN_OR_RETURN(ex->plan_, plan_streams(schedule, {.streams = sequential ? 1 : backend->streams,
                                                            .host = std::move(host)}));
  int64_t workspace_floats = -1;  // the largest library kernel's columns + product
  for (const auto& lib : ex->library_)
    if (lib) workspace_floats = std::max(workspace_floats, lib->gemm.workspace_elements());
  for (int s = 0; s < ex->plan_.streams; ++s) {
    CARVE_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaStream> stream, cuda::CudaStream::create(ctx));
    ex->streams_.push_back(std::move(stream));
    if (workspace_floats < 0) continue;
    CARVE_ASSIGN_OR_RETURN(Buffer ws, Buffer::allocate(alloc, ir::DType::kU8,
                                                       ir::Shape({cuda::CublasLt::kWorkspaceBytes + 4 * workspace_floats})));
    ex->workspaces_.push_back(std::move(ws));
  }
  for (int32_t t = 0; t < schedule.task_count(); ++t) {
    ex->events_.emplace_back();
    // A host task is complete before anything later is enqueued: waits on it need no event.
    if (!ex->plan_.records[static_cast<size_t>(t)] || ex->plan_.on_host(t)) continue;
    CARVE_ASSIGN_OR_RETURN(ex->events_.back(), cuda::CudaEvent::create(ctx));
  }
  for (int s = 0; s < ex->plan_.streams; ++s) {
    CARVE_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaEvent> e, cuda::CudaEvent::create(ctx));
    ex->joins_.push_back(std::move(e));
  }
  ex->nodes_.assign(p.launches.size(), nullptr);
  return ex;
}

DeviceExecutor::~DeviceExecutor() = default;

Status DeviceExecutor::launch_one(const Program& p, int32_t l, const RegionBases& bases, size_t stream_index) const {
  const Launch& launch = p.launches[static_cast<size_t>(l)];
  cuda::CudaStream* stream = streams_[stream_index].get();
  switch (launch.kind) {
    case LaunchKind::kKernel: {
      const auto k = static_cast<size_t>(launch.kernel);
      if (library_[k]) return named(p, l, launch_library(p, l, bases, stream_index));
      const std::vector<uint64_t> params = launch_addresses(p, launch, bases);
      return named(p, l, modules_[k]->launch(configs_[k], params, stream));
    }
    case LaunchKind::kCopy:
      return named(p, l, stream->copy_device_async(dptr(operand_address(p, bases, launch.operands[1])),
                                                   dptr(operand_address(p, bases, launch.operands[0])),
                                                   static_cast<size_t>(launch.operands[0].bytes)));
    case LaunchKind::kUpload:
      return named(p, l, stream->copy_to_device_async(dptr(operand_address(p, bases, launch.operands[1])),
                                                      operand_address(p, bases, launch.operands[0]),
                                                      static_cast<size_t>(launch.operands[0].bytes)));
    case LaunchKind::kDownload:
      return named(p, l, stream->copy_from_device_async(operand_address(p, bases, launch.operands[1]),
                                                        dptr(operand_address(p, bases, launch.operands[0])),
                                                        static_cast<size_t>(launch.operands[0].bytes)));
  }
  return Status(ErrorCode::kInternal, "unknown launch kind");
}

Status DeviceExecutor::launch_library(const Program& p, int32_t l, const RegionBases& bases,
                                      size_t stream_index) const {
  const Launch& launch = p.launches[static_cast<size_t>(l)];
  const LibraryKernel& lib = *library_[static_cast<size_t>(launch.kernel)];
  const cu::LibraryGemm& g = lib.gemm;
  cuda::CudaStream* stream = streams_[stream_index].get();
  const cuda::DevicePtr workspace = dptr(workspaces_[stream_index].unsafe_data());  // this stream's own
  const cuda::DevicePtr columns = workspace + cuda::CublasLt::kWorkspaceBytes;
  const cuda::DevicePtr product = columns + 4 * static_cast<uint64_t>(g.column_elements);
  std::vector<uint64_t> params = launch_addresses(p, launch, bases);
  auto matrix = [&](const cu::GemmMatrix& m) {
    return m.operand < 0 ? columns : params[static_cast<size_t>(m.operand)] + 4 * static_cast<uint64_t>(m.offset);
  };
  if (g.im2col) {
    const std::vector<uint64_t> col_params{params[static_cast<size_t>(g.column_source)], columns};
    CARVE_RETURN_IF_ERROR(lib.im2col->launch(g.im2col->launch, col_params, stream).with_context("im2col"));
  }
  const cuda::DevicePtr d = g.epilogue ? product : params[static_cast<size_t>(g.product_operand)];
  CARVE_RETURN_IF_ERROR(lib.plan->run(matrix(g.a), matrix(g.b), d, workspace, stream));
  if (!g.epilogue) return Status();
  params.push_back(product);
  return lib.epilogue->launch(g.epilogue->launch, params, stream).with_context("gemm epilogue");
}

// Every launch on its planned stream. capture: only kernels and device copies (transfers
// run outside the graph, before/after it on stream 0), recording each kernel's node.
Status DeviceExecutor::enqueue(const Program& p, const RegionBases& bases, const std::vector<uint8_t>& skip,
                               bool capture) {
  for (int32_t t = 0; t < schedule_->task_count(); ++t) {
    const int32_t l = schedule_->tasks()[static_cast<size_t>(t)].launch;
    const Launch& launch = p.launches[static_cast<size_t>(l)];
    if (capture && is_transfer(launch)) continue;
    if (launch.on_host) {  // mixed placement: the host waits for the device work it reads, then runs
      for (int32_t w : plan_.waits[static_cast<size_t>(t)])
        if (!plan_.on_host(w)) CARVE_RETURN_IF_ERROR(named(p, l, events_[static_cast<size_t>(w)]->synchronize()));
      CARVE_RETURN_IF_ERROR(host_position_checks(p, launch, bases));
      std::vector<void*> operands;
      for (const MemoryRef& r : launch.operands) operands.push_back(operand_address(p, bases, r));
      p.kernels[static_cast<size_t>(launch.kernel)].fn(operands.data(), launch.tile_begin, launch.tile_end);
      continue;
    }
    const auto stream_index = static_cast<size_t>(plan_.stream_of[static_cast<size_t>(t)]);
    cuda::CudaStream* stream = streams_[stream_index].get();
    for (int32_t w : plan_.waits[static_cast<size_t>(t)]) {
      const int32_t wl = schedule_->tasks()[static_cast<size_t>(w)].launch;
      if (capture && is_transfer(p.launches[static_cast<size_t>(wl)])) continue;  // done before the graph
      if (plan_.on_host(w)) continue;  // ran on this thread before this enqueue
      CARVE_RETURN_IF_ERROR(named(p, l, stream->wait(*events_[static_cast<size_t>(w)])));
    }
    if (!skip[static_cast<size_t>(l)]) CARVE_RETURN_IF_ERROR(launch_one(p, l, bases, stream_index));
    if (capture && launch.kind == LaunchKind::kKernel && !library_[static_cast<size_t>(launch.kernel)]) {
      CARVE_ASSIGN_OR_RETURN(nodes_[static_cast<size_t>(l)], stream->last_captured_node());
    }
    if (plan_.records[static_cast<size_t>(t)])
      CARVE_RETURN_IF_ERROR(named(p, l, events_[static_cast<size_t>(t)]->record(stream)));
  }
  return Status();
}

Status DeviceExecutor::capture(const Program& p, const RegionBases& bases) {
  graph_.reset();
  cuda::CudaStream* origin = streams_[0].get();
  CARVE_RETURN_IF_ERROR(origin->begin_capture());
  // Fork: every other stream joins the capture by waiting on an event of the origin.
  Status s = joins_[0]->record(origin);
  for (size_t i = 1; s.ok() && i < streams_.size(); ++i) s = streams_[i]->wait(*joins_[0]);
  const std::vector<uint8_t> none(p.launches.size(), 0);
  if (s.ok()) s = enqueue(p, bases, none, /*capture=*/true);
  // Join: the origin waits for every other stream before the capture ends.
  for (size_t i = 1; s.ok() && i < streams_.size(); ++i) {
    s = joins_[i]->record(streams_[i].get());
    if (s.ok()) s = origin->wait(*joins_[i]);
  }
  auto graph = origin->end_capture();  // always end, so the stream leaves capture mode
  CARVE_RETURN_IF_ERROR(s.with_context("capturing the CUDA graph"));
  CARVE_ASSIGN_OR_RETURN(graph_, std::move(graph));
  captured_ = bases;
  ++captures_;
  return Status();
}

Status DeviceExecutor::transfers(const Program& p, const RegionBases& bases, const std::vector<uint8_t>& skip,
                                 LaunchKind kind) {
  for (size_t l = 0; l < p.launches.size(); ++l)
    if (p.launches[l].kind == kind && !skip[l])
      CARVE_RETURN_IF_ERROR(launch_one(p, static_cast<int32_t>(l), bases, 0));
  return Status();
}

// A CPU-placed write_handle_at of a mixed program: its position is host memory, checked
// before the kernel runs, as the CPU executor does.
Status DeviceExecutor::host_position_checks(const Program& p, const Launch& launch, const RegionBases& bases) const {
  for (const PositionCheck& check : launch.position_checks) {
    int64_t position = 0;
    std::memcpy(&position, operand_address(p, bases, check.position), sizeof(position));
    if (position < 0 || position > check.max) return check.out_of_range(position);
  }
  return Status();
}

// Every kernel with an error word: read it, clear a set one, and report the first.
Status DeviceExecutor::read_error_words(const Program& p) const {
  Status first;
  for (const Launch& launch : p.launches) {
    if (launch.kind != LaunchKind::kKernel || launch.on_host) continue;
    const auto k = static_cast<size_t>(launch.kernel);
    if (!error_word_[k]) continue;
    int64_t word[2] = {0, 0};
    CARVE_RETURN_IF_ERROR(modules_[k]->read_global(cu::kErrorWord, std::as_writable_bytes(std::span(word))));
    if (word[0] == 0) continue;
    const int64_t zero[2] = {0, 0};
    CARVE_RETURN_IF_ERROR(modules_[k]->write_global(cu::kErrorWord, std::as_bytes(std::span(zero))));
    if (!first.ok()) continue;
    first = launch.position_checks.empty()
                ? Status(ErrorCode::kOutOfBounds, fmt::format("launch '{}': position {} is out of range", launch.name,
                                                              word[1]))
                : launch.position_checks.front().out_of_range(word[1]);
  }
  return first;
}

Status DeviceExecutor::check_arguments(const Program& p, std::span<const Buffer> inputs,
                                       std::span<const Buffer> outputs) const {
  // Caller device memory is used in place: it must be this device's.
  auto check = [&](std::string_view role, size_t i, ir::ValueId v, const Buffer& b) -> Status {
    if (!on_device(b)) return Status();
    if (p.mixed())
      return Status(ErrorCode::kUnsupported, "a program with CPU-placed nodes takes host inputs and outputs");
    if (b.device_id() == backend_->device.index) return Status();
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("{} {} '{}' is {} on cuda:{}; this session runs on {}", role, i, p.graph.value(v).name,
                              b.describe(), b.device_id(), backend_->device.to_string()));
  };
  for (size_t i = 0; i < inputs.size() && i < p.inputs.size(); ++i)
    CARVE_RETURN_IF_ERROR(check("input", i, p.inputs[i], inputs[i]));
  for (size_t i = 0; i < outputs.size() && i < p.outputs.size(); ++i)
    CARVE_RETURN_IF_ERROR(check("output", i, p.outputs[i], outputs[i]));
  return Status();
}

Status DeviceExecutor::run(const Program& p, std::span<const Buffer> inputs, std::span<Buffer> outputs,
                           RunRecord* record) {
  RegionBases bases;
  if (host_arena_) bases.host_arena = host_arena_->unsafe_data();
  for (const auto& c : p.constant_buffers) bases.host_constants.push_back(c ? c->unsafe_data() : nullptr);
  std::vector<uint8_t> skip(p.launches.size(), 0);
  std::vector<int32_t> upload_of_input(p.inputs.size(), -1), download_of_output(p.outputs.size(), -1);
  for (size_t l = 0; l < p.launches.size(); ++l) {
    const Launch& launch = p.launches[l];
    if (launch.kind == LaunchKind::kUpload && launch.operands[0].region == Region::kHostInput)
      upload_of_input[static_cast<size_t>(launch.operands[0].slot)] = static_cast<int32_t>(l);
    if (launch.kind == LaunchKind::kDownload && launch.operands[1].region == Region::kHostOutput)
      download_of_output[static_cast<size_t>(launch.operands[1].slot)] = static_cast<int32_t>(l);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool dev = on_device(inputs[i]);
    bases.inputs.push_back(dev ? inputs[i].unsafe_data() : input_staging_[i].unsafe_data());
    bases.host_inputs.push_back(dev ? nullptr : inputs[i].unsafe_data());
    if (dev && upload_of_input[i] >= 0) skip[static_cast<size_t>(upload_of_input[i])] = 1;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const bool dev = on_device(outputs[i]);
    bases.outputs.push_back(dev ? outputs[i].unsafe_data() : output_staging_[i].unsafe_data());
    bases.host_outputs.push_back(dev ? nullptr : outputs[i].unsafe_data());
    if (dev && download_of_output[i] >= 0) skip[static_cast<size_t>(download_of_output[i])] = 1;
  }
  for (const auto& c : constants_) bases.constants.push_back(c ? c->unsafe_data() : nullptr);
  for (size_t h = 0; h < p.handles.size(); ++h) {
    const Buffer& memory = p.handles[h]->memory();
    bases.handles.push_back(handle_mirrors_[h] ? handle_mirrors_[h]->unsafe_data() : memory.unsafe_data());
    bases.host_handles.push_back(handle_mirrors_[h]   ? memory.unsafe_data()
                                 : handle_staging_[h] ? handle_staging_[h]->unsafe_data()
                                                      : nullptr);
  }
  if (record != nullptr) {
    record->parallel = plan_.streams_used > 1;
    record->threads = plan_.streams;
    record->fallback_reason = record->parallel ? "" : "one stream";
  }
  if (!backend_->graphs || p.mixed()) {  // host kernels cannot be captured: streams
    Status status = enqueue(p, bases, skip, /*capture=*/false);
    for (auto& s : streams_) {  // every stream drained even after an error, so no work is left in flight
      Status synced = s->synchronize();
      if (status.ok()) status = synced;
    }
    CARVE_RETURN_IF_ERROR(status);
    return read_error_words(p);
  }
  CARVE_RETURN_IF_ERROR(transfers(p, bases, skip, LaunchKind::kUpload));
  bool recapture = !graph_;
  std::vector<int32_t> changed;
  if (!recapture) {
    changed = changed_launches(p, *captured_, bases);
    for (int32_t l : changed) {  // copies and library launches (several nodes each) are re-captured
      const Launch& launch = p.launches[static_cast<size_t>(l)];
      recapture = recapture || launch.kind != LaunchKind::kKernel || library_[static_cast<size_t>(launch.kernel)];
    }
  }
  if (recapture) {
    CARVE_RETURN_IF_ERROR(capture(p, bases));
  } else {
    for (int32_t l : changed) {  // kernel parameters updated in place
      const std::vector<uint64_t> params = launch_addresses(p, p.launches[static_cast<size_t>(l)], bases);
      CARVE_RETURN_IF_ERROR(named(p, l, graph_->set_kernel_params(nodes_[static_cast<size_t>(l)], params)));
      ++param_updates_;
    }
    captured_ = bases;
  }
  CARVE_RETURN_IF_ERROR(graph_->launch(streams_[0].get()).with_context("cuGraphLaunch"));
  CARVE_RETURN_IF_ERROR(transfers(p, bases, skip, LaunchKind::kDownload));
  CARVE_RETURN_IF_ERROR(streams_[0]->synchronize());
  return read_error_words(p);
}

}  // namespace carve::runtime::detail
