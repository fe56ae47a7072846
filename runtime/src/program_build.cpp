#include "program_build.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>
#include <unordered_map>
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include "carve/ir/extent.h"
#include "carve/ir/order.h"
#include "carve/ir/verify.h"
#include "carve/jit/fusion.h"
#include "carve/jit/host_target.h"
#include "carve/jit/library_kernel.h"
#include "carve/jit/tiles.h"
#include "carve/planner/memory_order.h"
#include "carve/planner/parallel_safe.h"

namespace carve::runtime::detail {
namespace {

using planner::Placement;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename T>
int32_t index_of(const std::vector<T>& items, const T& item) {
  auto it = std::find(items.begin(), items.end(), item);
  return it == items.end() ? -1 : static_cast<int32_t>(it - items.begin());
}

Result<int32_t> handle_index(const ir::Graph& graph, const ir::Node& node) {
  auto attr = node.attrs.find("handle");
  if (attr == node.attrs.end() || !attr->second.is_string())
    return Status(ErrorCode::kInvalidArgument, fmt::format("{} names no handle", ir::describe_node(graph, node.id)));
  for (size_t i = 0; i < graph.handles.size(); ++i)
    if (graph.handles[i].name == attr->second.as_string()) return static_cast<int32_t>(i);
  return Status(ErrorCode::kNotFound, fmt::format("{}: no handle '{}'", ir::describe_node(graph, node.id),
                                                  attr->second.as_string()));
}

// Where value `v`'s bytes live.
Result<MemoryRef> value_ref(const Program& p, ir::ValueId v) {
  const ir::Graph& g = p.graph;
  const planner::ValuePlacement& place = p.problem.values[static_cast<size_t>(v)];
  CARVE_ASSIGN_OR_RETURN(int64_t bytes, g.value(v).type.byte_size());
  MemoryRef ref{Region::kArena, 0, place.byte_offset, bytes};
  switch (place.placement) {
    case Placement::kArena:
      ref.offset += p.plan.offsets[static_cast<size_t>(place.buffer)];
      ref.buffer = place.buffer;
      ref.view = p.value_views[static_cast<size_t>(v)];
      return ref;
    case Placement::kInput:
      ref.region = Region::kInput;
      ref.slot = p.input_index(place.root);
      return ref;
    case Placement::kOutput:
      ref.region = Region::kOutput;
      ref.slot = p.output_index(place.root);
      return ref;
    case Placement::kConstant:
      ref.region = Region::kConstant;
      ref.slot = index_of(p.constants, place.root);
      return ref;
    case Placement::kHandle: {
      ref.region = Region::kHandle;
      CARVE_ASSIGN_OR_RETURN(ref.slot, handle_index(g, g.node(g.value(place.root).producer)));
      return ref;
    }
    case Placement::kNone:
      break;
  }
  return Status(ErrorCode::kInternal, fmt::format("{} is kept in registers but a kernel reads it from memory",
                                                  ir::describe_value(g, v)));
}

// Data-dependent extents (ir/extent.h): a node reading such a value would read the
// padding past the actual extent, so it is refused. Returns, per value, whether it is an
// extent the runtime reads after the run (that of a graph output): kept to the end.
Result<std::vector<bool>> check_dynamic_extents(const Program& p) {
  const ir::Graph& g = p.graph;
  std::vector<bool> live_to_end(static_cast<size_t>(g.num_values()), false);
  for (const ir::Node& node : g.nodes) {
    for (ir::ValueId v : node.inputs) {
      if (!ir::dynamic_extent(g, v)) continue;
      return Status(ErrorCode::kUnsupported,
                    fmt::format("data-dependent extent of {} consumed by {} is not supported yet: only a graph "
                                "output may have one",
                                ir::describe_value(g, v), ir::describe_node(g, node.id)));
    }
  }
  for (ir::ValueId v : p.outputs) {
    const std::optional<ir::DynamicExtent> extent = ir::dynamic_extent(g, v);
    if (!extent) continue;
    if (p.on_device)
      return Status(ErrorCode::kUnsupported,
                    fmt::format("graph output {} has a data-dependent extent: it runs in a CPU Session only",
                                ir::describe_value(g, v)));
    live_to_end[static_cast<size_t>(extent->extent)] = true;
  }
  return live_to_end;
}

Status bind_output_extents(Program& p) {
  p.output_extents.assign(p.outputs.size(), OutputExtent{});
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const std::optional<ir::DynamicExtent> extent = ir::dynamic_extent(p.graph, p.outputs[i]);
    if (!extent) continue;
    CARVE_ASSIGN_OR_RETURN(MemoryRef ref, value_ref(p, extent->extent));
    p.output_extents[i] = OutputExtent{extent->axis, ref};
  }
  return Status();
}

// A group whose every output is an alias (a folded view, or a handle read used in
// place) needs no kernel.
bool group_is_alias_only(const Program& p, const jit::KernelGroup& group) {
  if (group.nodes.size() != 1) return false;
  const ir::Node& node = p.graph.node(group.nodes.front());
  if (node.outputs.empty()) return false;
  for (ir::ValueId v : node.outputs) {
    const auto& place = p.problem.values[static_cast<size_t>(v)];
    const bool handle_read = node.op == ir::OpKind::kReadHandle && place.placement == Placement::kHandle;
    if (!place.is_view && !handle_read) return false;
  }
  return true;
}

// Kernel groups after reconciling fusion with the planner: folded views and in-place
// handle reads are dropped, materialised views get a copy kernel; in execution order.
Result<std::vector<jit::KernelGroup>> reconcile_groups(const Program& p, std::vector<jit::KernelGroup> groups) {
  std::vector<bool> grouped(static_cast<size_t>(p.graph.num_nodes()), false);
  std::vector<jit::KernelGroup> kept;
  for (auto& group : groups) {
    for (ir::NodeId n : group.nodes) grouped[static_cast<size_t>(n)] = true;
    if (!group_is_alias_only(p, group)) kept.push_back(std::move(group));
  }
  for (ir::NodeId n : p.order) {
    const ir::Node& node = p.graph.node(n);
    if (grouped[static_cast<size_t>(n)] || node.outputs.empty()) continue;
    if (p.problem.values[static_cast<size_t>(node.outputs[0])].is_view) continue;
    CARVE_ASSIGN_OR_RETURN(jit::KernelGroup copy, jit::make_single_node_group(p.graph, n));
    kept.push_back(std::move(copy));
  }
  std::vector<int64_t> step(static_cast<size_t>(p.graph.num_nodes()));
  for (size_t i = 0; i < p.order.size(); ++i) step[static_cast<size_t>(p.order[i])] = static_cast<int64_t>(i);
  // A group runs at its last node's step (an attention group spans other nodes' steps).
  std::stable_sort(kept.begin(), kept.end(), [&](const auto& a, const auto& b) {
    return step[static_cast<size_t>(a.nodes.back())] < step[static_cast<size_t>(b.nodes.back())];
  });
  return kept;
}

// A caller-bound constant (CompileOptions::constants) must match the declared type.
Status check_bound_constant(const ir::Value& v, const Buffer& b) {
  if (b.dtype() != v.type.dtype)
    return Status(ErrorCode::kTypeMismatch, fmt::format("constant '{}' is {}, the bound buffer {}", v.name,
                                                        v.type.to_string(), b.describe()));
  if (b.shape() != v.type.shape)
    return Status(ErrorCode::kShapeError, fmt::format("constant '{}' is {}, the bound buffer {}", v.name,
                                                      v.type.to_string(), b.describe()));
  return Status();
}

// Every CompileOptions::constants key must name a graph constant that carries no data: a
// misspelt key would otherwise leave the constant unbound and be silently ignored.
Status check_constant_keys(const ir::Graph& g, const CompileOptions& options) {
  for (const auto& [name, buffer] : options.constants) {
    auto it = std::find_if(g.values.begin(), g.values.end(), [&](const ir::Value& v) {
      return v.kind == ir::ValueKind::kConstant && v.name == name;
    });
    if (it == g.values.end())
      return Status(ErrorCode::kNotFound,
                    fmt::format("CompileOptions::constants binds '{}', which is no constant of graph '{}'", name,
                                g.name));
    if (it->data)
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("CompileOptions::constants binds '{}', a constant that already carries its data",
                                name));
  }
  return Status();
}

// Compile-time pre-packing of weights (CompileOptions::prepack_weights): a matmul/gemm
// whose B is a 2-D f32/f64 constant with bytes (its data, or a CompileOptions::constants
// buffer) gets B packed in the strip layout its kernel reads in place
// (jit::tiling::pack_gemv_b with gemv_strips for its m and the host's vector width: the
// GEMV strips for m <= kGemvMaxRows, the micro-kernel's NR columns above), the attribute
// kPrepackedAttr and trans_b 0. The packed bytes replace the constant's data when the
// node is its only reader and it is no output (no copy kept; a transposed B is packed in
// place); otherwise they become a new constant "<name>#prepacked" that the readers
// packing it the same way share (an unrolled recurrent layer reads one weight from every
// step). Runs on the program's graph copy, before the constants are bound.
Status prepack_weights(Program& p, const CompileOptions& options) {
  Result<jit::HostTarget> host = jit::host_target();
  if (!host.ok()) return Status();  // no CPU JIT: nothing to pack for
  const int vector_width = jit::tiling::vector_width_f32(host->features);
  ir::Graph& g = p.graph;
  const auto users = ir::compute_users(g);
  // (B, trans_b, strips.wide, strips.vec) -> its packed copy: the layout depends on nothing else.
  std::map<std::tuple<ir::ValueId, bool, int64_t, int64_t>, ir::ValueId> packed_copies;
  for (ir::Node& node : g.nodes) {
    if ((node.op != ir::OpKind::kMatmul && node.op != ir::OpKind::kGemm) || node.inputs.size() < 2) continue;
    const ir::ValueId bid = node.inputs[1];
    if (node.inputs[0] == bid) continue;
    const ir::DType dtype = g.value(node.inputs[0]).type.dtype;
    {
      const ir::Value& bv = g.value(bid);
      if (bv.kind != ir::ValueKind::kConstant || bv.type.shape.rank() != 2 || bv.type.dtype != dtype ||
          (dtype != ir::DType::kF32 && dtype != ir::DType::kF64))
        continue;
    }
    const jit::tiling::MatmulShape shape = jit::tiling::matmul_shape(g, node);
    if (shape.k <= 0 || shape.n <= 0) continue;
    const bool gemm = node.op == ir::OpKind::kGemm;
    auto tb_it = node.attrs.find("trans_b");
    const bool tb = gemm && tb_it != node.attrs.end() && tb_it->second.is_int() && tb_it->second.as_int() != 0;
    const ir::Value& bv = g.value(bid);
    const void* src = nullptr;
    size_t bytes = 0;
    if (bv.data) {
      src = bv.data->data();
      bytes = bv.data->size();
    } else if (auto bound = options.constants.find(bv.name); bound != options.constants.end()) {
      Result<std::span<const std::byte>> span = bound->second.bytes();
      if (!span.ok()) continue;  // bind_constants reports a bad binding
      src = span->data();
      bytes = span->size();
    } else {
      continue;  // unbound: bind_group reports it
    }
    const int64_t elem = ir::dtype_size(dtype);
    if (static_cast<int64_t>(bytes) != shape.k * shape.n * elem) continue;  // checked when bound
    const jit::tiling::GemvStrips strips = jit::tiling::gemv_strips(shape.m, dtype, vector_width);
    const auto key = std::tuple{bid, tb, strips.wide, strips.vec};
    if (auto copy = packed_copies.find(key); copy != packed_copies.end()) {
      node.inputs[1] = copy->second;
    } else if (bv.data && users[static_cast<size_t>(bid)].size() == 1 && !g.is_output(bid) && tb) {
      ir::Value& v = g.value(bid);
      jit::tiling::pack_transposed_gemv_b_in_place(v.data->data(), shape.k, shape.n, elem, strips);
      v.type.shape = ir::Shape({shape.k, shape.n});
    } else {
      std::vector<uint8_t> packed(bytes);
      jit::tiling::pack_gemv_b(src, packed.data(), shape.k, shape.n, tb, elem, strips);
      if (bv.data && users[static_cast<size_t>(bid)].size() == 1 && !g.is_output(bid)) {
        ir::Value& v = g.value(bid);
        v.data = std::move(packed);
        v.type.shape = ir::Shape({shape.k, shape.n});
      } else {
        ir::Value v;
        v.id = g.num_values();
        v.kind = ir::ValueKind::kConstant;
        v.type = bv.type;
        v.type.shape = ir::Shape({shape.k, shape.n});
        v.name = bv.name + "#prepacked";
        for (int i = 2; g.find_value(v.name) != nullptr; ++i) v.name = fmt::format("{}#prepacked{}", bv.name, i);
        v.data = std::move(packed);
        node.inputs[1] = v.id;
        packed_copies.emplace(key, v.id);
        g.values.push_back(std::move(v));
      }
    }
    if (gemm) node.attrs["trans_b"] = int64_t{0};
    node.attrs[jit::tiling::kPrepackedAttr] = std::vector<int64_t>{strips.wide, strips.vec};
  }
  return Status();
}

Status bind_constants(Program& p, const CompileOptions& options) {
  CARVE_RETURN_IF_ERROR(check_constant_keys(p.graph, options));
  for (const ir::Value& v : p.graph.values) {
    if (v.kind != ir::ValueKind::kConstant) continue;
    p.constants.push_back(v.id);
    auto bound = v.data ? options.constants.end() : options.constants.find(v.name);
    if (bound != options.constants.end()) {
      CARVE_RETURN_IF_ERROR(check_bound_constant(v, bound->second));
      p.constant_buffers.push_back(bound->second);
      continue;
    }
    if (!v.data) {
      p.constant_buffers.emplace_back(std::nullopt);  // unused constants may lack data; used ones are checked when bound
      continue;
    }
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data->data()), v.data->size());
    CARVE_ASSIGN_OR_RETURN(Buffer buffer, Buffer::borrow(bytes, v.type.dtype, v.type.shape));
    p.constant_buffers.push_back(std::move(buffer));
  }
  return Status();
}

// CompileOptions::handles: no null entry and no two with one name (which one would be bound
// is ambiguous). Handles the graph does not declare are allowed: one set may serve several
// graphs (prefill and decode), and a declared handle left unbound is an error of its own.
Status check_handle_bindings(const CompileOptions& options) {
  for (size_t i = 0; i < options.handles.size(); ++i) {
    const auto& h = options.handles[i];
    if (!h) return Status(ErrorCode::kInvalidArgument, fmt::format("CompileOptions::handles[{}] is null", i));
    for (size_t j = 0; j < i; ++j)
      if (options.handles[j]->name() == h->name())
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("CompileOptions::handles binds two handles named '{}' (entries {} and {})",
                                  h->name(), j, i));
  }
  return Status();
}

Status bind_handles(Program& p, const CompileOptions& options) {
  CARVE_RETURN_IF_ERROR(check_handle_bindings(options));
  for (const ir::Handle& declared : p.graph.handles) {
    auto it = std::find_if(options.handles.begin(), options.handles.end(),
                           [&](const auto& h) { return h && h->name() == declared.name; });
    if (it == options.handles.end())
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("graph handle '{}' ({}) has no BufferHandle bound (CompileOptions::handles)",
                                declared.name, declared.type.to_string()));
    if ((*it)->type().dtype != declared.type.dtype)
      return Status(ErrorCode::kTypeMismatch, fmt::format("handle '{}': graph declares {}, bound handle is {}",
                                                          declared.name, declared.type.to_string(),
                                                          (*it)->type().to_string()));
    if ((*it)->type().shape != declared.type.shape)
      return Status(ErrorCode::kShapeError, fmt::format("handle '{}': graph declares {}, bound handle is {}",
                                                        declared.name, declared.type.to_string(),
                                                        (*it)->type().to_string()));
    p.handles.push_back(*it);
  }
  return Status();
}

// Plans the arena; `scratch_buffer[g]` receives group g's scratch buffer index (-1: none).
Status plan_memory(Program& p, const CompileOptions& options, const std::vector<jit::KernelGroup>& groups,
                   std::vector<int32_t>& scratch_buffer) {
  const auto start = std::chrono::steady_clock::now();
  scratch_buffer.assign(groups.size(), -1);
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].scratch_bytes > 0) {
      CARVE_ASSIGN_OR_RETURN(scratch_buffer[g],
                             planner::add_scratch_buffer(p.problem, groups[g].name + ".scratch",
                                                         groups[g].scratch_bytes, 64, groups[g].nodes, p.order));
    }
  PlanSummary& s = p.plan_summary;
  s.strategy = options.strategy;
  s.lower_bound_bytes = planner::lower_bound_bytes(p.problem.problem);
  s.buffers = static_cast<int64_t>(p.problem.problem.buffers.size());
  s.views = p.problem.num_views;
  s.inplace = p.problem.num_inplace;
  for (const auto& b : p.problem.problem.buffers) s.no_reuse_bytes += b.size;
  if (options.parallel_safe) {
    CARVE_ASSIGN_OR_RETURN(auto pairs, planner::unordered_buffer_pairs(p.graph, p.problem));
    CARVE_ASSIGN_OR_RETURN(p.plan, planner::plan_with_conflicts(p.problem.problem, pairs));
    CARVE_RETURN_IF_ERROR(planner::validate_with_conflicts(p.problem.problem, p.plan, pairs));
    s.strategy = "parallel-safe";
    s.unordered_pairs = static_cast<int64_t>(pairs.size());
  } else {
    CARVE_ASSIGN_OR_RETURN(auto strategy, planner::make_strategy(options.strategy));
    planner::PlanOptions plan_options;
    plan_options.time_limit_seconds = options.plan_time_limit_seconds;
    CARVE_ASSIGN_OR_RETURN(planner::PlanResult result, strategy->plan(p.problem.problem, plan_options));
    CARVE_RETURN_IF_ERROR(planner::validate_plan(p.problem.problem, result.plan));
    p.plan = std::move(result.plan);
    s.strategy = result.strategy;
  }
  s.arena_bytes = p.plan.arena_bytes;
  s.plan_seconds = seconds_since(start);
  return Status();
}

// The arena and its views: one per value placed in the arena (of the value's dtype and
// shape, at its planned offset), one per kernel scratch. `scratch_view[g]` receives
// group g's scratch view (-1: none).
Status make_arena(Program& p, std::shared_ptr<Allocator> allocator, const std::vector<jit::KernelGroup>& groups,
                  const std::vector<int32_t>& scratch_buffer, std::vector<int32_t>& scratch_view) {
  if (allocator == nullptr) return Status(ErrorCode::kInvalidArgument, "compile: null arena allocator");
  const size_t alignment = arena_base_alignment(p.problem.problem, allocator->default_alignment());
  CARVE_ASSIGN_OR_RETURN(Arena arena,
                         Arena::create(std::move(allocator), static_cast<size_t>(p.plan.arena_bytes), alignment));
  p.value_views.assign(static_cast<size_t>(p.graph.num_values()), -1);
  for (const ir::Value& v : p.graph.values) {
    const planner::ValuePlacement& place = p.problem.values[static_cast<size_t>(v.id)];
    if (place.placement != Placement::kArena || place.buffer < 0) continue;
    const int64_t offset = p.plan.offsets[static_cast<size_t>(place.buffer)] + place.byte_offset;
    CARVE_ASSIGN_OR_RETURN(p.value_views[static_cast<size_t>(v.id)],
                           arena.add_view(v.name, offset, v.type.dtype, v.type.shape));
  }
  scratch_view.assign(groups.size(), -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (scratch_buffer[g] < 0) continue;
    const auto b = static_cast<size_t>(scratch_buffer[g]);
    CARVE_ASSIGN_OR_RETURN(scratch_view[g], arena.add_view(groups[g].name + "#scratch", p.plan.offsets[b],
                                                           ir::DType::kU8,
                                                           ir::Shape{p.problem.problem.buffers[b].size}));
  }
  p.arena = std::make_unique<Arena>(std::move(arena));
  return Status();
}

// The run-time range check of every write_handle_at position in the group.
Status add_position_checks(const Program& p, const jit::KernelGroup& group, Launch& launch) {
  for (ir::NodeId id : group.nodes) {
    const ir::Node& node = p.graph.node(id);
    if (node.op != ir::OpKind::kWriteHandleAt) continue;
    CARVE_ASSIGN_OR_RETURN(int32_t h, handle_index(p.graph, node));
    const ir::Handle& handle = p.graph.handles[static_cast<size_t>(h)];
    const ir::TensorType& value = p.graph.value(node.inputs[0]).type;
    const int rank = handle.type.shape.rank();
    auto axis_attr = node.attrs.find("axis");
    int64_t axis = axis_attr != node.attrs.end() && axis_attr->second.is_int() ? axis_attr->second.as_int() : 0;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || value.shape.rank() != rank)
      return Status(ErrorCode::kInvalidArgument, fmt::format("{}: bad axis for handle '{}' {}",
                                                             ir::describe_node(p.graph, id), handle.name,
                                                             handle.type.to_string()));
    const int64_t extent = handle.type.shape[static_cast<int>(axis)];
    const int64_t len = value.shape[static_cast<int>(axis)];
    CARVE_ASSIGN_OR_RETURN(MemoryRef position, value_ref(p, node.inputs[1]));
    launch.position_checks.push_back(
        {position, extent - len,
         fmt::format("write_handle_at '{}' of {} into handle '{}' {} along axis {}", node.name, value.to_string(),
                     handle.name, handle.type.to_string(), axis)});
  }
  return Status();
}

// The run-time check of every gather-family node's indices in the group (IndexCheck).
// Indices computed inside the group (no launch operand) cannot be read before it runs:
// such a group is refused, so no out-of-range index goes unreported.
Status add_index_checks(const Program& p, const jit::KernelGroup& group, Launch& launch) {
  for (ir::NodeId id : group.nodes) {
    const ir::Node& node = p.graph.node(id);
    if (node.op != ir::OpKind::kGather && node.op != ir::OpKind::kGatherElements && node.op != ir::OpKind::kGatherNd &&
        node.op != ir::OpKind::kScatterNd)
      continue;
    const ir::TensorType& data = p.graph.value(node.inputs[0]).type;
    const ir::Value& indices = p.graph.value(node.inputs[1]);
    auto attr = [&](const char* name) {
      auto it = node.attrs.find(name);
      return it != node.attrs.end() && it->second.is_int() ? it->second.as_int() : int64_t{0};
    };
    IndexCheck check;
    check.dtype = indices.type.dtype;
    CARVE_ASSIGN_OR_RETURN(check.count, indices.type.shape.num_elements());
    const int rank = data.shape.rank();
    std::string along;
    if (node.op == ir::OpKind::kGather || node.op == ir::OpKind::kGatherElements) {
      int64_t axis = attr("axis");
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) continue;  // the verifier rejects it
      check.bounds = {data.shape[static_cast<int>(axis)]};
      along = fmt::format("along axis {}", axis);
    } else {  // the last index dim picks k leading dims (after gather_nd's batch dims)
      const int index_rank = indices.type.shape.rank();
      const int64_t k = index_rank > 0 ? indices.type.shape[index_rank - 1] : 0;
      const int64_t first = node.op == ir::OpKind::kGatherNd ? attr("batch_dims") : 0;
      if (k <= 0 || first < 0 || first + k > rank) continue;  // nothing indexed, or rejected by inference
      for (int64_t d = 0; d < k; ++d) check.bounds.push_back(data.shape[static_cast<int>(first + d)]);
      along = fmt::format("into dims {}..{}", first, first + k - 1);
    }
    if (check.count == 0) continue;
    auto operand = std::find_if(group.operands.begin(), group.operands.end(), [&](const jit::KernelOperand& o) {
      return o.role == jit::OperandRole::kInput && o.value == indices.id;
    });
    if (operand == group.operands.end())
      return Status(ErrorCode::kInternal, fmt::format("{}: its indices are computed inside kernel group '{}', where "
                                                      "they cannot be checked before it runs",
                                                      ir::describe_node(p.graph, id), group.name));
    check.operand = static_cast<int32_t>(operand - group.operands.begin());
    check.what = fmt::format("{} '{}': indices '{}' {} into data {} {}", ir::op_name(node.op), node.name,
                             indices.name, indices.type.to_string(), data.to_string(), along);
    launch.index_checks.push_back(std::move(check));
  }
  return Status();
}

// Operand references, aliasing pairs and the hazard sets of one kernel group.
Result<Launch> bind_group(const Program& p, jit::KernelGroup& group, int32_t scratch_buffer, int32_t scratch_view) {
  Launch launch;
  launch.name = group.name;
  for (const jit::KernelOperand& operand : group.operands) {
    MemoryRef ref;
    if (operand.role == jit::OperandRole::kScratch) {
      const auto index = static_cast<size_t>(scratch_buffer);
      ref = MemoryRef{Region::kArena, 0, p.plan.offsets[index], p.problem.problem.buffers[index].size, scratch_buffer,
                      scratch_view};
    } else if (operand.value == ir::kNoValue) {  // a state op's handle
      const ir::Node& node = p.graph.node(group.nodes.front());
      CARVE_ASSIGN_OR_RETURN(int32_t h, handle_index(p.graph, node));
      ref = MemoryRef{Region::kHandle, h, 0, static_cast<int64_t>(p.handles[static_cast<size_t>(h)]->byte_size())};
    } else {
      CARVE_ASSIGN_OR_RETURN(ref, value_ref(p, operand.value));
      if (ref.region == Region::kConstant && !p.constant_buffers[static_cast<size_t>(ref.slot)])
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("{} has no data (weights must be given to run the graph)",
                                  ir::describe_value(p.graph, operand.value)));
    }
    launch.operands.push_back(ref);
    if (operand.role != jit::OperandRole::kOutput) launch.reads.push_back(ref);
    if (operand.role != jit::OperandRole::kInput) launch.writes.push_back(ref);
  }
  group.may_alias.clear();
  for (size_t i = 0; i < launch.operands.size(); ++i)
    for (size_t j = i + 1; j < launch.operands.size(); ++j)
      if (launch.operands[i].overlaps(launch.operands[j]))
        group.may_alias.emplace_back(static_cast<int32_t>(i), static_cast<int32_t>(j));
  CARVE_RETURN_IF_ERROR(add_position_checks(p, group, launch));
  if (!p.on_device) CARVE_RETURN_IF_ERROR(add_index_checks(p, group, launch));
  launch.tile_begin = 0;
  launch.tile_end = group.num_tiles;
  return launch;
}

// Graph outputs no kernel writes: inputs and constants (the verifier rejects an output
// listed twice).
Status add_output_copies(Program& p) {
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const ir::ValueId v = p.outputs[i];
    if (p.problem.values[static_cast<size_t>(v)].placement == Placement::kOutput) continue;
    CARVE_ASSIGN_OR_RETURN(MemoryRef source, value_ref(p, v));
    MemoryRef destination{Region::kOutput, static_cast<int32_t>(i), 0, source.bytes};
    Launch copy{fmt::format("copy_output_{}", i), LaunchKind::kCopy, -1, 0, 1, {source, destination}, {source},
                {destination}};
    p.launches.push_back(std::move(copy));
  }
  return Status();
}

// Whether a concat folded into views (planner concat_views) can gather blocked inputs: one
// image of rank 4 joined on channels, each input whole blocks of `block` channels, so each
// input's blocked bytes are the output's blocked bytes at the input's byte offset.
bool concat_keeps_blocks(const ir::Graph& graph, const ir::Node& concat, int64_t block) {
  const ir::Shape& out = graph.value(concat.outputs[0]).type.shape;
  if (block <= 0 || out.rank() != 4 || out[0] != 1) return false;
  return std::all_of(concat.inputs.begin(), concat.inputs.end(), [&](ir::ValueId v) {
    const ir::Shape& in = graph.value(v).type.shape;
    return in.rank() == 4 && in[0] == 1 && in[1] % block == 0 && in[2] == out[2] && in[3] == out[3];
  });
}

// Values that can stay in a library's blocked layout (jit::LibraryKernel::blocked_layout)
// with the library kernels in `kernels`: written by one library kernel and read only by
// library kernels, every one naming the same layout for it; never a graph output, and no
// other node (a view, a generated kernel) reads it. A concat folded into views is no
// reader: its inputs and output stay blocked together or not at all (concat_keeps_blocks),
// the output's readers agreeing with every input's writer.
std::vector<bool> blocked_values(const Program& p, const std::vector<jit::KernelGroup>& groups,
                                 const std::vector<std::unique_ptr<jit::LibraryKernel>>& kernels) {
  const auto values = static_cast<size_t>(p.graph.num_values());
  std::vector<std::vector<std::pair<size_t, int32_t>>> readers(values), writers(values);  // (group, operand)
  std::vector<bool> plain(values, false), blocked(values, false);
  for (ir::ValueId v : p.outputs) plain[static_cast<size_t>(v)] = true;
  std::vector<bool> in_library(static_cast<size_t>(p.graph.num_nodes()), false);
  const int64_t block = jit::library_channel_block();
  std::vector<ir::NodeId> folded;  // concats that may keep their inputs blocked
  for (const planner::ConcatView& view : p.problem.concat_views) {
    if (!concat_keeps_blocks(p.graph, p.graph.node(view.concat), block)) continue;
    folded.push_back(view.concat);
    in_library[static_cast<size_t>(view.concat)] = true;  // not a plain reader
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!kernels[g]) continue;
    for (ir::NodeId n : groups[g].nodes) in_library[static_cast<size_t>(n)] = true;
    for (size_t i = 0; i < groups[g].operands.size(); ++i) {
      const jit::KernelOperand& o = groups[g].operands[i];
      if (o.value == ir::kNoValue) continue;
      auto& uses = o.role == jit::OperandRole::kOutput ? writers : readers;
      uses[static_cast<size_t>(o.value)].emplace_back(g, static_cast<int32_t>(i));
    }
  }
  for (const ir::Node& n : p.graph.nodes)
    if (!in_library[static_cast<size_t>(n.id)])
      for (ir::ValueId v : n.inputs) plain[static_cast<size_t>(v)] = true;
  // Whether every library kernel reading v names `layout` for it.
  auto readers_agree = [&](size_t v, const std::string& layout) {
    return std::all_of(readers[v].begin(), readers[v].end(),
                       [&](const auto& r) { return kernels[r.first]->blocked_layout(r.second) == layout; });
  };
  // The blocked layout v's one library writer names for it when its readers agree, else "".
  auto written_blocked = [&](size_t v) -> std::string {
    if (plain[v] || writers[v].size() != 1) return "";
    const auto [wg, wi] = writers[v].front();
    std::string layout = kernels[wg]->blocked_layout(wi);
    return !layout.empty() && readers_agree(v, layout) ? layout : "";
  };
  for (size_t v = 0; v < values; ++v)
    if (!readers[v].empty()) blocked[v] = !written_blocked(v).empty();
  for (ir::NodeId c : folded) {
    const ir::Node& concat = p.graph.node(c);
    const auto out = static_cast<size_t>(concat.outputs[0]);
    const std::string layout = written_blocked(static_cast<size_t>(concat.inputs.front()));
    // Only the channel-blocked layout's blocks of channels are contiguous (not NHWC's).
    bool agree = !layout.empty() && layout == jit::library_blocked_layout() && !plain[out] && !readers[out].empty() &&
                 readers_agree(out, layout);
    for (ir::ValueId v : concat.inputs) agree = agree && written_blocked(static_cast<size_t>(v)) == layout;
    blocked[out] = agree;
    for (ir::ValueId v : concat.inputs) blocked[static_cast<size_t>(v)] = agree;
  }
  return blocked;
}

// The operands of group g whose values stay blocked.
std::vector<int32_t> blocked_operands(const jit::KernelGroup& group, const std::vector<bool>& blocked) {
  std::vector<int32_t> operands;
  for (size_t i = 0; i < group.operands.size(); ++i) {
    const ir::ValueId v = group.operands[i].value;
    if (v != ir::kNoValue && blocked[static_cast<size_t>(v)]) operands.push_back(static_cast<int32_t>(i));
  }
  return operands;
}

// Blocked values joined only through kernels that run as fast in either layout
// (LibraryKernel::any_layout) -- a batch norm and its relu between two generated kernels --
// gain nothing and would cost their conversions: each set of blocked values joined through
// them (and through folded concats) stays blocked only when some other library kernel reads
// or writes one of its values.
void unblock_unanchored(const Program& p, const std::vector<jit::KernelGroup>& groups,
                        const std::vector<std::unique_ptr<jit::LibraryKernel>>& kernels, std::vector<bool>& blocked) {
  std::vector<size_t> root(blocked.size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = v;
  auto find = [&](size_t v) {
    while (root[v] != v) v = root[v] = root[root[v]];
    return v;
  };
  auto join = [&](const std::vector<size_t>& values) {
    for (size_t v : values) root[find(v)] = find(values.front());
  };
  auto blocked_values_of = [&](const std::vector<ir::ValueId>& values) {
    std::vector<size_t> out;
    for (ir::ValueId v : values)
      if (v != ir::kNoValue && blocked[static_cast<size_t>(v)]) out.push_back(static_cast<size_t>(v));
    return out;
  };
  for (const planner::ConcatView& view : p.problem.concat_views) {
    std::vector<ir::ValueId> values = p.graph.node(view.concat).inputs;
    values.push_back(p.graph.node(view.concat).outputs[0]);
    if (auto b = blocked_values_of(values); !b.empty()) join(b);
  }
  std::vector<size_t> anchors;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!kernels[g]) continue;
    std::vector<ir::ValueId> values;
    for (const jit::KernelOperand& o : groups[g].operands) values.push_back(o.value);
    const std::vector<size_t> b = blocked_values_of(values);
    if (b.empty()) continue;
    if (kernels[g]->any_layout()) {
      join(b);
    } else {
      anchors.insert(anchors.end(), b.begin(), b.end());
    }
  }
  std::vector<bool> anchored(blocked.size(), false);
  for (size_t v : anchors) anchored[find(v)] = true;
  for (size_t v = 0; v < blocked.size(); ++v) blocked[v] = blocked[v] && anchored[find(v)];
}

// Decides the layouts between library kernels: drops the kernels not worth running with
// the reorders they would still need (LibraryKernel::worth_it) -- which can leave their
// neighbours' values plain, so until nothing changes -- then tells every kernel which of
// its operands stay blocked.
void keep_blocked(const Program& p, const std::vector<jit::KernelGroup>& groups,
                  std::vector<std::unique_ptr<jit::LibraryKernel>>& kernels) {
  std::vector<bool> blocked;
  for (bool dropped = true; dropped;) {
    blocked = blocked_values(p, groups, kernels);
    dropped = false;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (kernels[g] && !kernels[g]->worth_it(blocked_operands(groups[g], blocked))) {
        kernels[g].reset();
        dropped = true;
      }
    }
  }
  unblock_unanchored(p, groups, kernels, blocked);
  for (size_t g = 0; g < groups.size(); ++g)
    if (kernels[g])
      for (int32_t operand : blocked_operands(groups[g], blocked)) kernels[g]->use_blocked(operand);
}

// The bytes of the program's constants, for the library kernels.
jit::ConstantBytes constant_bytes_of(const Program& p) {
  return [&p](ir::ValueId v) -> const void* {
    auto it = std::lower_bound(p.constants.begin(), p.constants.end(), v);
    if (it == p.constants.end() || *it != v) return nullptr;
    const auto& buffer = p.constant_buffers[static_cast<size_t>(it - p.constants.begin())];
    return buffer ? buffer->unsafe_data() : nullptr;
  };
}

// Library kernels made before planning, by group name (null: the library declined it).
using MadeLibraryKernels = std::unordered_map<std::string, std::unique_ptr<jit::LibraryKernel>>;

// A matmul group whose whole epilogue no library kernel runs (gelu's erf chain) but whose
// prefix one does: the prefix becomes its own group, for the library, and the rest a
// generated elementwise group. bert's and gpt's MLP runs faster so, and the erf chain
// compiles in a fraction of the fused GEMM's time (docs/benchmarks.md, "Library kernels:
// oneDNN matmuls"). Runs before planning: the prefix's result is stored now. Returns the
// kernels it made, for take_library_groups.
MadeLibraryKernels split_library_prefixes(const Program& p, std::vector<jit::KernelGroup>& groups,
                                          const jit::FusionOptions& fusion) {
  const jit::ConstantBytes constant_bytes = constant_bytes_of(p);
  MadeLibraryKernels made;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<ir::NodeId> nodes = groups[g].nodes;
    if (nodes.size() < 2 || p.graph.node(nodes.front()).op != ir::OpKind::kMatmul) continue;
    std::unique_ptr<jit::LibraryKernel> whole = jit::make_library_kernel(p.graph, groups[g], constant_bytes);
    const bool taken = whole != nullptr;
    made[groups[g].name] = std::move(whole);
    if (taken) continue;
    for (size_t k = nodes.size() - 1; k > 0; --k) {
      auto prefix = jit::make_group(p.graph, {nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(k)}, fusion);
      if (!prefix.ok()) continue;
      std::unique_ptr<jit::LibraryKernel> kernel = jit::make_library_kernel(p.graph, *prefix, constant_bytes);
      if (!kernel) continue;
      auto rest = jit::make_group(p.graph, {nodes.begin() + static_cast<std::ptrdiff_t>(k), nodes.end()}, fusion);
      if (!rest.ok()) break;
      made[prefix->name] = std::move(kernel);
      groups[g] = std::move(*prefix);
      groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(g) + 1, std::move(*rest));
      ++g;
      break;
    }
  }
  return made;
}

// Two groups a library kernel may take as one, the second group's one node reading the
// first's last result: a batch norm and the elementwise node after it (densenet121's 62
// pre-activation batch norm -> relu pairs: fusion starts chains at elementwise nodes and
// compute anchors only, so it leaves the two apart); a conv and the transpose to NHWC after
// it (convnext_tiny's depthwise convs: the library writes the conv's result transposed).
bool library_pair(const ir::Graph& graph, const jit::KernelGroup& first, const jit::KernelGroup& next) {
  if (next.nodes.size() != 1) return false;
  const ir::Node& anchor = graph.node(first.nodes.front());
  const ir::Node& last = graph.node(first.nodes.back());
  const ir::Node& second = graph.node(next.nodes[0]);
  if (last.outputs.size() != 1 || std::find(second.inputs.begin(), second.inputs.end(), last.outputs[0]) == second.inputs.end())
    return false;
  if (first.nodes.size() == 1 && anchor.op == ir::OpKind::kBatchNorm) return ir::is_elementwise(second.op);
  return anchor.op == ir::OpKind::kConv2d && second.op == ir::OpKind::kTranspose;
}

// Pairs of groups (library_pair) become one group when a library kernel takes the two
// together: one pass over the data where there were two. Runs before planning, adding the
// kernels it made to `made`.
void merge_library_pairs(const Program& p, std::vector<jit::KernelGroup>& groups, const jit::FusionOptions& fusion,
                         MadeLibraryKernels& made) {
  if (!fusion.fuse) return;
  const jit::ConstantBytes constant_bytes = constant_bytes_of(p);
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    if (!library_pair(p.graph, groups[g], groups[g + 1])) continue;
    const ir::Node& first = p.graph.node(groups[g].nodes.back());
    const ir::Node& next = p.graph.node(groups[g + 1].nodes[0]);
    if (!fusion.side.empty() && fusion.side[static_cast<size_t>(first.id)] != fusion.side[static_cast<size_t>(next.id)])
      continue;
    std::vector<ir::NodeId> nodes = groups[g].nodes;
    nodes.push_back(next.id);
    auto merged = jit::make_group(p.graph, std::move(nodes), fusion);
    if (!merged.ok()) continue;
    // The first group's result must be internal: read by the second node alone.
    const std::vector<ir::ValueId>& internal = merged->internal_values;
    if (std::find(internal.begin(), internal.end(), first.outputs[0]) == internal.end()) continue;
    std::unique_ptr<jit::LibraryKernel> kernel = jit::make_library_kernel(p.graph, *merged, constant_bytes);
    // Worth it with every operand plain, so keep_blocked never drops it: the generated
    // kernels cannot run a conv and its transpose as one group.
    if (!kernel || !kernel->worth_it({})) continue;
    made[merged->name] = std::move(kernel);
    groups[g] = std::move(*merged);
    groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(g) + 1);
  }
}

// Groups a library takes (CompileOptions::library_kernels; jit/library_kernel.h): their
// scratch and tiles become the library kernel's, before the arena is planned. Index-
// parallel to `groups`; null where the JIT generates the kernel. A group
// split_library_prefixes already offered keeps its answer from `made`.
std::vector<std::shared_ptr<const jit::LibraryKernel>> take_library_groups(const Program& p,
                                                                            std::vector<jit::KernelGroup>& groups,
                                                                            MadeLibraryKernels made) {
  const jit::ConstantBytes constant_bytes = constant_bytes_of(p);
  std::vector<std::unique_ptr<jit::LibraryKernel>> kernels(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    auto it = made.find(groups[g].name);
    kernels[g] = it != made.end() ? std::move(it->second) : jit::make_library_kernel(p.graph, groups[g], constant_bytes);
  }
  keep_blocked(p, groups, kernels);
  std::vector<std::shared_ptr<const jit::LibraryKernel>> library(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!kernels[g]) continue;
    jit::KernelGroup& group = groups[g];
    std::erase_if(group.operands, [](const jit::KernelOperand& o) { return o.role == jit::OperandRole::kScratch; });
    group.scratch_bytes = kernels[g]->scratch_bytes();
    if (group.scratch_bytes > 0) group.operands.push_back({jit::OperandRole::kScratch, ir::kNoValue});
    group.num_tiles = 0;
    for (int64_t tiles : kernels[g]->phase_tiles()) group.num_tiles += tiles;
    library[g] = std::move(kernels[g]);
  }
  return library;
}

// Constants read only by library kernels that copied them when they took their groups
// (LibraryKernel::reads_at_run): their bytes are freed -- the graph's data, or the
// reference to a caller's buffer -- so a model's weights are held once, in the library's
// layout. Decided over every launch operand (views of a constant resolve to its slot), so
// a constant some other launch reads is kept. Launches keep their reference: it resolves
// to null, which the library kernel never reads.
void release_copied_constants(Program& p, const std::vector<std::shared_ptr<const jit::LibraryKernel>>& libraries) {
  enum : uint8_t { kUnread, kCopied, kRead };
  std::vector<uint8_t> state(p.constants.size(), kUnread);
  for (const Launch& launch : p.launches) {
    const jit::LibraryKernel* library =
        launch.kind == LaunchKind::kKernel ? libraries[static_cast<size_t>(launch.kernel)].get() : nullptr;
    auto mark = [&](const MemoryRef& ref, bool copied) {
      if (ref.region != Region::kConstant) return;
      uint8_t& s = state[static_cast<size_t>(ref.slot)];
      s = copied && s != kRead ? kCopied : kRead;
    };
    for (size_t i = 0; i < launch.operands.size(); ++i)
      mark(launch.operands[i], library && !library->reads_at_run(static_cast<int32_t>(i)));
    for (const PositionCheck& check : launch.position_checks) mark(check.position, false);
  }
  for (size_t c = 0; c < p.constants.size(); ++c) {
    if (state[c] != kCopied || !p.constant_buffers[c] || p.graph.is_output(p.constants[c])) continue;
    p.released_constant_bytes += static_cast<int64_t>(p.constant_buffers[c]->size());
    p.constant_buffers[c].reset();
    p.graph.value(p.constants[c]).data.reset();
  }
}

}  // namespace

Result<std::unique_ptr<Program>> build_program(ir::Graph graph, const CompileOptions& options,
                                               jit::JitCompiler* jit, std::shared_ptr<Allocator> arena_allocator) {
  auto phase_start = std::chrono::steady_clock::now();
  auto phase_seconds = [&phase_start] {  // since the previous call
    const double s = seconds_since(phase_start);
    phase_start = std::chrono::steady_clock::now();
    return s;
  };
  CARVE_RETURN_IF_ERROR(ir::verify(graph));
  auto p = std::make_unique<Program>();
  p->on_device = jit == nullptr;
  p->graph = std::move(graph);
  if (!p->on_device && options.prepack_weights) CARVE_RETURN_IF_ERROR(prepack_weights(*p, options));
  if (options.order == "memory") {
    CARVE_ASSIGN_OR_RETURN(planner::MemoryOrder memory, planner::memory_aware_order(p->graph));
    p->order = std::move(memory.order);
  } else if (options.order == "given") {
    CARVE_ASSIGN_OR_RETURN(p->order, ir::execution_order(p->graph));
  } else {
    return Status(ErrorCode::kInvalidArgument, fmt::format("unknown order '{}' (given|memory)", options.order));
  }
  for (const ir::Value& v : p->graph.values)
    if (v.kind == ir::ValueKind::kInput) p->inputs.push_back(v.id);
  p->outputs = p->graph.outputs;
  CARVE_RETURN_IF_ERROR(bind_constants(*p, options));
  CARVE_RETURN_IF_ERROR(bind_handles(*p, options));
  CARVE_ASSIGN_OR_RETURN(std::vector<bool> live_to_end, check_dynamic_extents(*p));

  // Nodes placed on another device than the program's never share a kernel group.
  std::vector<uint8_t> side;
  const DeviceType home = p->on_device ? DeviceType::kCuda : DeviceType::kCpu;
  if (!options.placement.empty()) {
    side.assign(static_cast<size_t>(p->graph.num_nodes()), 0);
    for (const ir::Node& n : p->graph.nodes) {
      const auto it = options.placement.find(n.name);
      side[static_cast<size_t>(n.id)] = it != options.placement.end() && it->second != home ? 1 : 0;
    }
  }
  const jit::FusionOptions fusion{.fuse = options.fuse, .fuse_attention = !p->on_device, .side = std::move(side)};
  CARVE_ASSIGN_OR_RETURN(auto fused, jit::form_kernel_groups(p->graph, p->order, fusion));
  MadeLibraryKernels made;
  if (!p->on_device && options.library_kernels) {
    made = split_library_prefixes(*p, fused, fusion);
    merge_library_pairs(*p, fused, fusion, made);
  }
  planner::GraphPlanOptions plan_options;
  plan_options.live_to_end = std::move(live_to_end);
  plan_options.inplace = options.inplace;
  plan_options.concat_views = options.concat_views;
  plan_options.unstored.assign(static_cast<size_t>(p->graph.num_values()), false);
  for (const auto& group : fused) {
    for (ir::ValueId v : group.internal_values) plan_options.unstored[static_cast<size_t>(v)] = true;
    if (group.nodes.size() > 1) plan_options.fused_groups.push_back(group.nodes);
  }
  CARVE_ASSIGN_OR_RETURN(p->problem, planner::build_graph_problem(p->graph, p->order, plan_options));
  CARVE_ASSIGN_OR_RETURN(auto groups, reconcile_groups(*p, std::move(fused)));
  std::vector<std::shared_ptr<const jit::LibraryKernel>> library(groups.size());
  if (!p->on_device && options.library_kernels) library = take_library_groups(*p, groups, std::move(made));
  p->times.prepare = phase_seconds();
  std::vector<int32_t> scratch_buffer;
  CARVE_RETURN_IF_ERROR(plan_memory(*p, options, groups, scratch_buffer));
  p->times.plan = phase_seconds();
  std::vector<int32_t> scratch_view;
  CARVE_RETURN_IF_ERROR(make_arena(*p, std::move(arena_allocator), groups, scratch_buffer, scratch_view));

  for (size_t g = 0; g < groups.size(); ++g) {
    CARVE_ASSIGN_OR_RETURN(Launch launch, bind_group(*p, groups[g], scratch_buffer[g], scratch_view[g]));
    launch.kernel = static_cast<int32_t>(g);
    if (!library[g]) {
      p->launches.push_back(std::move(launch));
      continue;
    }
    // One launch per phase of a library kernel (library_kernel.h), in order: every phase
    // writes the scratch, so the hazard DAG runs each after the one before.
    const std::vector<int64_t> phases = library[g]->phase_tiles();
    int64_t first = 0;
    for (size_t ph = 0; ph < phases.size(); ++ph) {
      Launch part = launch;
      if (ph + 1 < phases.size()) part.name += fmt::format("#phase{}", ph);
      part.tile_begin = first;
      part.tile_end = first + phases[ph];
      first = part.tile_end;
      p->launches.push_back(std::move(part));
    }
  }
  CARVE_RETURN_IF_ERROR(bind_output_extents(*p));
  p->times.materialise = phase_seconds();
  if (p->on_device) {  // the device executor compiles the same groups with NVRTC
    for (auto& group : groups) p->kernels.push_back({std::move(group), nullptr, false});
    CARVE_RETURN_IF_ERROR(add_output_copies(*p));
    return p;
  }
  // Before compiling: the copies and the originals are not held together at LLVM's peak.
  release_copied_constants(*p, library);
#if defined(__GLIBC__)
  // The freed weights sit in malloc's heap, under later allocations: hand the free pages
  // back (gpt's peak RSS 87.9 -> 77.5 MB).
  if (p->released_constant_bytes > 0) malloc_trim(0);
#endif
  const auto start = std::chrono::steady_clock::now();
  std::vector<jit::KernelGroup> generated;
  for (size_t g = 0; g < groups.size(); ++g)
    if (!library[g]) generated.push_back(groups[g]);
  CARVE_ASSIGN_OR_RETURN(auto compiled, jit->compile(p->graph, generated, options.kernel_disk_cache));
  p->jit_seconds = seconds_since(start);
  p->times.jit = p->jit_seconds;
  size_t next = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (library[g]) {
      p->kernels.push_back({std::move(groups[g]), nullptr, false, std::move(library[g])});
      continue;
    }
    jit::CompiledKernel& kernel = compiled[next++];
    p->kernels_from_cache += kernel.from_memory_cache || kernel.from_disk_cache;
    p->kernels_from_memory += kernel.from_memory_cache;
    p->kernels_from_disk += kernel.from_disk_cache;
    p->kernels_compiled += !kernel.from_memory_cache && !kernel.from_disk_cache;
    p->kernels.push_back({std::move(kernel.group), kernel.fn, kernel.from_memory_cache || kernel.from_disk_cache});
  }
  CARVE_RETURN_IF_ERROR(add_output_copies(*p));
  return p;
}

}  // namespace carve::runtime::detail
