// run_graph: a sequential whole-graph GPU executor for tests and gpu-check (cuda_runner.h).
#include "carve/runtime/cuda/cuda_runner.h"

#include <fmt/format.h>

#include <map>

#include "carve/ir/order.h"
#include "carve/ir/verify.h"
#include "carve/runtime/cuda/cuda_device.h"

namespace carve::runtime::cuda {
namespace {

struct DeviceBuffers {
  std::shared_ptr<CudaContext> ctx;
  std::vector<DevicePtr> owned;
  ~DeviceBuffers() {
    for (DevicePtr p : owned) (void)ctx->free(p);
  }
  Result<DevicePtr> alloc(size_t bytes) {
    CARVE_ASSIGN_OR_RETURN(DevicePtr p, ctx->allocate(bytes));
    owned.push_back(p);
    return p;
  }
};

size_t bytes_of(const ir::TensorType& t) {
  auto b = t.byte_size();
  return b.ok() ? static_cast<size_t>(*b) : 0;
}

}  // namespace

Result<std::vector<reference::HostTensor>> run_graph(const ir::Graph& graph, std::span<const reference::HostTensor> inputs,
                                          reference::ReferenceHandles* handles, const RunnerOptions& options) {
  CARVE_RETURN_IF_ERROR(ir::verify(graph));
  CARVE_ASSIGN_OR_RETURN(std::shared_ptr<CudaContext> ctx, CudaContext::create(options.device));
  CARVE_ASSIGN_OR_RETURN(std::unique_ptr<jit::cuda::NvrtcCompiler> nv, jit::cuda::NvrtcCompiler::create(options.nvrtc));
  CARVE_ASSIGN_OR_RETURN(std::vector<ir::NodeId> order, ir::execution_order(graph));
  CARVE_ASSIGN_OR_RETURN(std::vector<jit::KernelGroup> groups, jit::form_kernel_groups(graph, order, options.fusion));
  DeviceBuffers mem{ctx, {}};
  std::vector<DevicePtr> buf(static_cast<size_t>(graph.num_values()), 0);

  // Inputs and constants.
  size_t next_input = 0;
  for (const ir::Value& v : graph.values) {
    if (v.kind == ir::ValueKind::kIntermediate) continue;
    const size_t bytes = bytes_of(v.type);
    CARVE_ASSIGN_OR_RETURN(DevicePtr p, mem.alloc(bytes));
    buf[static_cast<size_t>(v.id)] = p;
    if (v.kind == ir::ValueKind::kInput) {
      if (next_input >= inputs.size()) {
        return Status(ErrorCode::kInvalidArgument, fmt::format("run_graph: no input tensor for {}", ir::describe_value(graph, v.id)));
      }
      const reference::HostTensor& t = inputs[next_input++];
      if (t.type != v.type || t.bytes.size() != bytes) {
        return Status(ErrorCode::kInvalidArgument, fmt::format("run_graph: input for {} is {}", ir::describe_value(graph, v.id), t.type.to_string()));
      }
      CARVE_RETURN_IF_ERROR(ctx->copy_to_device(p, t.bytes.data(), bytes));
    } else if (v.data.has_value()) {
      CARVE_RETURN_IF_ERROR(ctx->copy_to_device(p, v.data->data(), bytes));
    }
  }
  // Intermediates: views alias their input, everything else gets its own buffer.
  for (ir::NodeId id : order) {
    const ir::Node& n = graph.node(id);
    for (ir::ValueId out : n.outputs) {
      if (ir::is_view(n.op) && !n.inputs.empty()) {
        buf[static_cast<size_t>(out)] = buf[static_cast<size_t>(n.inputs[0])];
      } else {
        CARVE_ASSIGN_OR_RETURN(DevicePtr p, mem.alloc(bytes_of(graph.value(out).type)));
        buf[static_cast<size_t>(out)] = p;
      }
    }
  }
  // Handles.
  std::map<std::string, DevicePtr> handle_buf;
  for (const ir::Handle& h : graph.handles) {
    const size_t bytes = bytes_of(h.type);
    CARVE_ASSIGN_OR_RETURN(DevicePtr p, mem.alloc(bytes));
    CARVE_RETURN_IF_ERROR(ctx->memset(p, 0, bytes));
    if (handles != nullptr) {
      auto it = handles->find(h.name);
      if (it != handles->end()) {
        if (it->second.type != h.type || it->second.bytes.size() != bytes) {
          return Status(ErrorCode::kInvalidArgument, fmt::format("run_graph: handle '{}' state is {}, declared {}", h.name,
                                                                 it->second.type.to_string(), h.type.to_string()));
        }
        CARVE_RETURN_IF_ERROR(ctx->copy_to_device(p, it->second.bytes.data(), bytes));
      }
    }
    handle_buf[h.name] = p;
  }
  CARVE_ASSIGN_OR_RETURN(DeviceInfo info, device_info(options.device));
  std::vector<std::unique_ptr<CudaModule>> modules;
  for (const jit::KernelGroup& group : groups) {
    CARVE_ASSIGN_OR_RETURN(jit::cuda::KernelSource src, jit::cuda::generate_kernel(graph, group, options.codegen));
    auto bin = nv->compile(src.source, info.arch());
    if (!bin.ok()) return bin.status().with_context(fmt::format("kernel group '{}'", group.name));
    CARVE_ASSIGN_OR_RETURN(std::unique_ptr<CudaModule> mod, CudaModule::load(ctx, **bin));
    std::vector<DevicePtr> params;
    const ir::Node& anchor = graph.node(group.nodes.front());
    for (const jit::KernelOperand& op : group.operands) {
      if (op.value != ir::kNoValue) {
        params.push_back(buf[static_cast<size_t>(op.value)]);
      } else if (op.role == jit::OperandRole::kScratch) {
        CARVE_ASSIGN_OR_RETURN(DevicePtr p, mem.alloc(static_cast<size_t>(group.scratch_bytes)));
        params.push_back(p);
      } else {
        auto it = anchor.attrs.find("handle");
        const std::string name = it != anchor.attrs.end() && it->second.is_string() ? it->second.as_string() : "";
        auto h = handle_buf.find(name);
        if (h == handle_buf.end()) return Status(ErrorCode::kNotFound, fmt::format("{}: handle '{}' is not declared", ir::describe_node(graph, anchor.id), name));
        params.push_back(h->second);
      }
    }
    CARVE_RETURN_IF_ERROR(mod->launch(src.launch, params));
    modules.push_back(std::move(mod));
  }
  CARVE_RETURN_IF_ERROR(ctx->synchronize());
  std::vector<reference::HostTensor> outs;
  for (ir::ValueId v : graph.outputs) {
    reference::HostTensor t;
    t.type = graph.value(v).type;
    t.bytes.resize(bytes_of(t.type));
    CARVE_RETURN_IF_ERROR(ctx->copy_from_device(t.bytes.data(), buf[static_cast<size_t>(v)], t.bytes.size()));
    outs.push_back(std::move(t));
  }
  if (handles != nullptr) {
    for (const ir::Handle& h : graph.handles) {
      reference::HostTensor t;
      t.type = h.type;
      t.bytes.resize(bytes_of(h.type));
      CARVE_RETURN_IF_ERROR(ctx->copy_from_device(t.bytes.data(), handle_buf[h.name], t.bytes.size()));
      (*handles)[h.name] = std::move(t);
    }
  }
  return outs;
}

}  // namespace carve::runtime::cuda
