// The reference interpreter: shared helpers, HostTensor, reference_node and run_reference.
#include "carve/reference/reference.h"

#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "carve/ir/infer.h"
#include "carve/ir/order.h"
#include "carve/ir/verify.h"
#include "carve/ir/half.h"
#include "reference_internal.h"

namespace carve::reference {
namespace ref {
namespace {

template <typename T>
T read_at(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(data) + static_cast<size_t>(i) * sizeof(T),
              sizeof(T));
  return v;
}

template <typename T>
void write_at(void* data, int64_t i, T v) {
  std::memcpy(static_cast<uint8_t*>(data) + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
}

// Truncates toward zero and saturates to T's range; NaN -> 0.
template <typename T>
T saturating_trunc(double d) {
  if (std::isnan(d)) return 0;
  const double t = std::trunc(d);
  const double limit = std::ldexp(1.0, std::numeric_limits<T>::digits);  // max + 1, exact
  if (t >= limit) return std::numeric_limits<T>::max();
  if (t < static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  return static_cast<T>(t);
}

template <typename Stored, typename F>
void load_loop(const void* data, int64_t n, F&& convert, auto* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = convert(read_at<Stored>(data, i));
}

}  // namespace

Status Ctx::error(ErrorCode code, std::string_view message) const {
  return Status(code, fmt::format("{}: {}", ir::describe_node(graph, node.id), message));
}

int64_t Ctx::attr_int(std::string_view name, int64_t fallback) const {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_int() ? it->second.as_int() : fallback;
}

double Ctx::attr_float(std::string_view name, double fallback) const {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_float() ? it->second.as_float() : fallback;
}

std::vector<int64_t> Ctx::attr_ints(std::string_view name, std::vector<int64_t> fallback) const {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_ints() ? it->second.as_ints() : fallback;
}

std::string Ctx::attr_string(std::string_view name) const {
  auto it = node.attrs.find(name);
  return it != node.attrs.end() && it->second.is_string() ? it->second.as_string()
                                                           : std::string();
}

int64_t count(const ir::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) n *= d;
  return n;
}

std::vector<int64_t> row_major_strides(const ir::Shape& shape) {
  std::vector<int64_t> strides(static_cast<size_t>(shape.rank()), 1);
  for (int i = shape.rank() - 2; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = strides[static_cast<size_t>(i + 1)] * shape[i + 1];
  }
  return strides;
}

std::vector<int64_t> broadcast_strides(const ir::Shape& in, const ir::Shape& out) {
  std::vector<int64_t> own = row_major_strides(in);
  std::vector<int64_t> strides(static_cast<size_t>(out.rank()), 0);
  const int offset = out.rank() - in.rank();
  for (int i = 0; i < in.rank(); ++i) {
    if (in[i] != 1) strides[static_cast<size_t>(offset + i)] = own[static_cast<size_t>(i)];
  }
  return strides;
}

int64_t dims_product(const ir::Shape& shape, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= shape[i];
  return n;
}

int normalize_axis(int64_t axis, int rank) {
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

IndexWalker::IndexWalker(const ir::Shape& shape, std::vector<std::vector<int64_t>> strides)
    : dims_(shape.dims()),
      strides_(std::move(strides)),
      index_(dims_.size(), 0),
      offsets_(strides_.size(), 0) {}

void IndexWalker::next() {
  for (size_t d = dims_.size(); d-- > 0;) {
    ++index_[d];
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] += strides_[k][d];
    if (index_[d] < dims_[d]) return;
    for (size_t k = 0; k < strides_.size(); ++k) offsets_[k] -= strides_[k][d] * dims_[d];
    index_[d] = 0;
  }
}

std::vector<double> load_f64(ir::DType dtype, const void* data, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  double* o = out.data();
  auto same = [](auto v) { return static_cast<double>(v); };
  switch (dtype) {
    case ir::DType::kF32: load_loop<float>(data, n, same, o); break;
    case ir::DType::kF64: load_loop<double>(data, n, same, o); break;
    case ir::DType::kF16:
      load_loop<uint16_t>(data, n, [](uint16_t b) { return double{ir::f16_to_float(b)}; }, o);
      break;
    case ir::DType::kBf16:
      load_loop<uint16_t>(data, n, [](uint16_t b) { return double{ir::bf16_to_float(b)}; }, o);
      break;
    case ir::DType::kI8: load_loop<int8_t>(data, n, same, o); break;
    case ir::DType::kI32: load_loop<int32_t>(data, n, same, o); break;
    case ir::DType::kI64: load_loop<int64_t>(data, n, same, o); break;
    case ir::DType::kU8: load_loop<uint8_t>(data, n, same, o); break;
    case ir::DType::kI16: load_loop<int16_t>(data, n, same, o); break;
    case ir::DType::kU16: load_loop<uint16_t>(data, n, same, o); break;
    case ir::DType::kU32: load_loop<uint32_t>(data, n, same, o); break;
    case ir::DType::kU64: load_loop<uint64_t>(data, n, same, o); break;  // rounds once
    case ir::DType::kBool:
      load_loop<uint8_t>(data, n, [](uint8_t b) { return b != 0 ? 1.0 : 0.0; }, o);
      break;
  }
  return out;
}

std::vector<int64_t> load_i64(ir::DType dtype, const void* data, int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  int64_t* o = out.data();
  auto same = [](auto v) { return static_cast<int64_t>(v); };
  switch (dtype) {
    case ir::DType::kI8: load_loop<int8_t>(data, n, same, o); break;
    case ir::DType::kI32: load_loop<int32_t>(data, n, same, o); break;
    case ir::DType::kI64: load_loop<int64_t>(data, n, same, o); break;
    case ir::DType::kU8: load_loop<uint8_t>(data, n, same, o); break;
    case ir::DType::kI16: load_loop<int16_t>(data, n, same, o); break;
    case ir::DType::kU16: load_loop<uint16_t>(data, n, same, o); break;
    case ir::DType::kU32: load_loop<uint32_t>(data, n, same, o); break;
    case ir::DType::kU64: load_loop<uint64_t>(data, n, same, o); break;  // the bits (modular)
    case ir::DType::kBool:
      load_loop<uint8_t>(data, n, [](uint8_t b) { return int64_t{b != 0}; }, o);
      break;
    default: {
      // Floats: the cast rules (truncate, saturate, NaN -> 0).
      std::vector<double> f = load_f64(dtype, data, n);
      for (int64_t i = 0; i < n; ++i) o[i] = saturating_trunc<int64_t>(f[static_cast<size_t>(i)]);
      break;
    }
  }
  return out;
}

void store_f64(ir::DType dtype, std::span<const double> values, void* data) {
  const auto n = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < n; ++i) {
    const double v = values[static_cast<size_t>(i)];
    switch (dtype) {
      case ir::DType::kF32: write_at<float>(data, i, static_cast<float>(v)); break;
      case ir::DType::kF64: write_at<double>(data, i, v); break;
      case ir::DType::kF16: write_at<uint16_t>(data, i, ir::double_to_f16(v)); break;
      case ir::DType::kBf16: write_at<uint16_t>(data, i, ir::double_to_bf16(v)); break;
      case ir::DType::kI8: write_at<int8_t>(data, i, saturating_trunc<int8_t>(v)); break;
      case ir::DType::kI32: write_at<int32_t>(data, i, saturating_trunc<int32_t>(v)); break;
      case ir::DType::kI64: write_at<int64_t>(data, i, saturating_trunc<int64_t>(v)); break;
      case ir::DType::kU8: write_at<uint8_t>(data, i, saturating_trunc<uint8_t>(v)); break;
      case ir::DType::kI16: write_at<int16_t>(data, i, saturating_trunc<int16_t>(v)); break;
      case ir::DType::kU16: write_at<uint16_t>(data, i, saturating_trunc<uint16_t>(v)); break;
      case ir::DType::kU32: write_at<uint32_t>(data, i, saturating_trunc<uint32_t>(v)); break;
      case ir::DType::kU64: write_at<uint64_t>(data, i, saturating_trunc<uint64_t>(v)); break;
      case ir::DType::kBool: write_at<uint8_t>(data, i, v != 0 ? 1 : 0); break;  // NaN -> 1
    }
  }
}

void store_i64(ir::DType dtype, std::span<const int64_t> values, void* data) {
  const auto n = static_cast<int64_t>(values.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = values[static_cast<size_t>(i)];
    switch (dtype) {
      case ir::DType::kF32: write_at<float>(data, i, static_cast<float>(v)); break;
      case ir::DType::kF64: write_at<double>(data, i, static_cast<double>(v)); break;
      case ir::DType::kF16: write_at<uint16_t>(data, i, ir::int64_to_f16(v)); break;
      case ir::DType::kBf16: write_at<uint16_t>(data, i, ir::int64_to_bf16(v)); break;
      // Narrowing to a signed type is modular in C++20.
      case ir::DType::kI8: write_at<int8_t>(data, i, static_cast<int8_t>(v)); break;
      case ir::DType::kI32: write_at<int32_t>(data, i, static_cast<int32_t>(v)); break;
      case ir::DType::kI64: write_at<int64_t>(data, i, v); break;
      case ir::DType::kU8: write_at<uint8_t>(data, i, static_cast<uint8_t>(v)); break;
      case ir::DType::kI16: write_at<int16_t>(data, i, static_cast<int16_t>(v)); break;
      case ir::DType::kU16: write_at<uint16_t>(data, i, static_cast<uint16_t>(v)); break;
      case ir::DType::kU32: write_at<uint32_t>(data, i, static_cast<uint32_t>(v)); break;
      case ir::DType::kU64: write_at<uint64_t>(data, i, static_cast<uint64_t>(v)); break;
      case ir::DType::kBool: write_at<uint8_t>(data, i, v != 0 ? 1 : 0); break;
    }
  }
}

std::vector<uint64_t> load_u64(ir::DType dtype, const void* data, int64_t n) {
  const std::vector<int64_t> bits = load_i64(dtype, data, n);
  return std::vector<uint64_t>(bits.begin(), bits.end());  // modular: u64's own bits
}

void store_u64(ir::DType dtype, std::span<const uint64_t> values, void* data) {
  const auto n = static_cast<int64_t>(values.size());
  if (!ir::is_float(dtype)) {
    const std::vector<int64_t> bits(values.begin(), values.end());
    store_i64(dtype, bits, data);  // ints keep the low bits either way
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t v = values[static_cast<size_t>(i)];
    switch (dtype) {
      case ir::DType::kF32: write_at<float>(data, i, static_cast<float>(v)); break;
      case ir::DType::kF64: write_at<double>(data, i, static_cast<double>(v)); break;
      case ir::DType::kF16: write_at<uint16_t>(data, i, ir::uint64_to_f16(v)); break;
      case ir::DType::kBf16: write_at<uint16_t>(data, i, ir::uint64_to_bf16(v)); break;
      default: break;
    }
  }
}

std::vector<uint8_t> encode_double(ir::DType dtype, double value) {
  std::vector<uint8_t> bytes(static_cast<size_t>(ir::dtype_size(dtype)));
  const double values[] = {value};
  store_f64(dtype, values, bytes.data());
  return bytes;
}

}  // namespace ref

// ---------------------------------------------------------------------------------------
// HostTensor

int64_t HostTensor::num_elements() const {
  Result<int64_t> n = type.shape.num_elements();
  return n.ok() ? *n : 0;
}

HostTensor HostTensor::from_doubles(ir::DType dtype, ir::Shape shape,
                                    const std::vector<double>& values) {
  HostTensor t;
  t.type = ir::TensorType{dtype, std::move(shape)};
  assert(static_cast<int64_t>(values.size()) == t.num_elements());
  t.bytes.resize(values.size() * static_cast<size_t>(ir::dtype_size(dtype)));
  ref::store_f64(dtype, values, t.bytes.data());
  return t;
}

Result<HostTensor> HostTensor::zeros(ir::TensorType type) {
  CARVE_RETURN_IF_ERROR(type.validate());
  CARVE_ASSIGN_OR_RETURN(int64_t size, type.byte_size());
  HostTensor t;
  t.type = std::move(type);
  t.bytes.assign(static_cast<size_t>(size), 0);
  return t;
}

std::vector<double> HostTensor::to_doubles() const {
  const int64_t n = static_cast<int64_t>(bytes.size()) / std::max<int64_t>(1, ir::dtype_size(type.dtype));
  return ref::load_f64(type.dtype, bytes.data(), n);
}

// ---------------------------------------------------------------------------------------
// reference_node

Status reference_node(const ir::Graph& graph, const ir::Node& node,
                      std::span<const void* const> inputs, std::span<void* const> outputs,
                      ReferenceHandles* handles) {
  // describe_node and the op code read the graph's own node: `node` must be it (or equal).
  if (!graph.has_node(node.id) ||
      (&graph.node(node.id) != &node && !(graph.node(node.id) == node))) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("node '{}' ({}) is not a node of graph '{}'", node.name,
                              ir::op_name(node.op), graph.name));
  }
  auto fail = [&](ErrorCode code, const std::string& message) {
    return Status(code, fmt::format("{}: {}", ir::describe_node(graph, node.id), message));
  };
  if (inputs.size() != node.inputs.size() || outputs.size() != node.outputs.size()) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("got {} input and {} output pointers for {} inputs and {} outputs",
                            inputs.size(), outputs.size(), node.inputs.size(),
                            node.outputs.size()));
  }
  std::vector<ir::TensorType> in_types;
  for (ir::ValueId id : node.inputs) {
    if (!graph.has_value(id)) {
      return fail(ErrorCode::kInvalidArgument, fmt::format("input value #{} is not in the graph", id));
    }
    in_types.push_back(graph.value(id).type);
  }
  for (ir::ValueId id : node.outputs) {
    if (!graph.has_value(id)) {
      return fail(ErrorCode::kInvalidArgument, fmt::format("output value #{} is not in the graph", id));
    }
  }
  Result<std::vector<ir::TensorType>> inferred =
      ir::infer_types(node.op, in_types, node.attrs, graph.handles);
  if (!inferred.ok()) {
    return Status(inferred.status().code(),
                  fmt::format("{}: {}", ir::describe_node(graph, node.id), inferred.status().message()));
  }
  if (inferred->size() != node.outputs.size()) {
    return fail(ErrorCode::kVerifyError, fmt::format("has {} outputs, inference gives {}",
                                                     node.outputs.size(), inferred->size()));
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const ir::TensorType& stored = graph.value(node.outputs[i]).type;
    if (stored != (*inferred)[i]) {
      return fail(ErrorCode::kVerifyError,
                  fmt::format("output #{} is stored as {} but inference gives {}", i,
                              stored.to_string(), (*inferred)[i].to_string()));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr && ref::count(in_types[i].shape) != 0) {
      return fail(ErrorCode::kInvalidArgument, fmt::format("input #{} pointer is null", i));
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == nullptr && ref::count((*inferred)[i].shape) != 0) {
      return fail(ErrorCode::kInvalidArgument, fmt::format("output #{} pointer is null", i));
    }
  }

  const ir::Node& own = graph.node(node.id);
  ref::Ctx ctx{graph, own, inputs, outputs, handles};
  if (ir::is_state(node.op)) {
    if (handles == nullptr) {
      return ctx.error(ErrorCode::kInvalidArgument, "a state op needs handle storage (handles is null)");
    }
    return ref::run_state(ctx);
  }
  if (ir::is_elementwise(node.op)) return ref::run_elementwise(ctx);
  if (static_cast<int>(node.op) <= static_cast<int>(ir::OpKind::kBatchNorm)) return ref::run_nn(ctx);
  return ref::run_layout(ctx);
}

// ---------------------------------------------------------------------------------------
// run_reference

namespace {

Status check_tensor(const ir::Graph& graph, const ir::Value& value, const HostTensor& t) {
  if (t.type != value.type) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("input {} was given a tensor of type {}",
                              ir::describe_value(graph, value.id), t.type.to_string()));
  }
  const int64_t want = *value.type.byte_size();
  if (static_cast<int64_t>(t.bytes.size()) != want) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("input {} was given {} bytes, expected {}",
                              ir::describe_value(graph, value.id), t.bytes.size(), want));
  }
  return Status();
}

Result<std::vector<HostTensor>> run_graph(const ir::Graph& graph,
                                          std::vector<std::optional<HostTensor>> values,
                                          ReferenceHandles* handles) {
  // Constants the run reads (node inputs and graph outputs).
  std::vector<bool> read(values.size(), false);
  for (const ir::Node& node : graph.nodes) {
    for (ir::ValueId id : node.inputs) read[static_cast<size_t>(id)] = true;
  }
  for (ir::ValueId id : graph.outputs) read[static_cast<size_t>(id)] = true;
  for (const ir::Value& value : graph.values) {
    if (value.kind != ir::ValueKind::kConstant || !read[static_cast<size_t>(value.id)]) continue;
    if (!value.data.has_value()) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("constant {} has no data", ir::describe_value(graph, value.id)));
    }
    values[static_cast<size_t>(value.id)] = HostTensor{value.type, *value.data};
  }

  // Handle state: a working copy, committed only on success.
  ReferenceHandles state;
  for (const ir::Handle& h : graph.handles) {
    if (handles != nullptr) {
      auto it = handles->find(h.name);
      if (it != handles->end()) {
        const int64_t want = *h.type.byte_size();
        if (it->second.type != h.type || static_cast<int64_t>(it->second.bytes.size()) != want) {
          return Status(ErrorCode::kInvalidArgument,
                        fmt::format("handle '{}' is declared {} but its state is {} ({} bytes)",
                                    h.name, h.type.to_string(), it->second.type.to_string(),
                                    it->second.bytes.size()));
        }
        state[h.name] = it->second;
        continue;
      }
    }
    CARVE_ASSIGN_OR_RETURN(state[h.name], HostTensor::zeros(h.type));
  }

  CARVE_ASSIGN_OR_RETURN(std::vector<ir::NodeId> order, ir::execution_order(graph));
  for (ir::NodeId id : order) {
    const ir::Node& node = graph.node(id);
    std::vector<const void*> in;
    for (ir::ValueId v : node.inputs) {
      const std::optional<HostTensor>& t = values[static_cast<size_t>(v)];
      if (!t.has_value()) {
        return Status(ErrorCode::kInternal, fmt::format("{}: input {} is not computed",
                                                        ir::describe_node(graph, id),
                                                        ir::describe_value(graph, v)));
      }
      in.push_back(t->bytes.data());
    }
    std::vector<void*> out;
    for (ir::ValueId v : node.outputs) {
      CARVE_ASSIGN_OR_RETURN(values[static_cast<size_t>(v)], HostTensor::zeros(graph.value(v).type));
      out.push_back(values[static_cast<size_t>(v)]->bytes.data());
    }
    CARVE_RETURN_IF_ERROR(reference_node(graph, node, in, out, &state));
  }

  std::vector<HostTensor> result;
  for (ir::ValueId v : graph.outputs) {
    const std::optional<HostTensor>& t = values[static_cast<size_t>(v)];
    if (!t.has_value()) {
      return Status(ErrorCode::kInternal,
                    fmt::format("graph output {} was not computed", ir::describe_value(graph, v)));
    }
    result.push_back(*t);
  }
  if (handles != nullptr) {
    for (auto& [name, tensor] : state) (*handles)[name] = std::move(tensor);
  }
  return result;
}

}  // namespace

Result<std::vector<HostTensor>> run_reference(const ir::Graph& graph,
                                              std::span<const HostTensor> inputs,
                                              ReferenceHandles* handles) {
  CARVE_RETURN_IF_ERROR(ir::verify(graph));
  std::vector<std::optional<HostTensor>> values(graph.values.size());
  size_t next = 0;
  for (const ir::Value& value : graph.values) {
    if (value.kind != ir::ValueKind::kInput) continue;
    if (next >= inputs.size()) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("graph '{}' has more inputs than the {} given (missing {})",
                                graph.name, inputs.size(), ir::describe_value(graph, value.id)));
    }
    CARVE_RETURN_IF_ERROR(check_tensor(graph, value, inputs[next]));
    values[static_cast<size_t>(value.id)] = inputs[next];
    ++next;
  }
  if (next != inputs.size()) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("graph '{}' has {} inputs, {} were given", graph.name, next,
                              inputs.size()));
  }
  return run_graph(graph, std::move(values), handles);
}

Result<std::vector<HostTensor>> run_reference(const ir::Graph& graph,
                                              const std::map<std::string, HostTensor>& inputs,
                                              ReferenceHandles* handles) {
  CARVE_RETURN_IF_ERROR(ir::verify(graph));
  std::vector<std::optional<HostTensor>> values(graph.values.size());
  size_t used = 0;
  for (const ir::Value& value : graph.values) {
    if (value.kind != ir::ValueKind::kInput) continue;
    auto it = inputs.find(value.name);
    if (it == inputs.end()) {
      return Status(ErrorCode::kInvalidArgument,
                    fmt::format("no tensor given for input {}", ir::describe_value(graph, value.id)));
    }
    CARVE_RETURN_IF_ERROR(check_tensor(graph, value, it->second));
    values[static_cast<size_t>(value.id)] = it->second;
    ++used;
  }
  if (used != inputs.size()) {
    for (const auto& [name, tensor] : inputs) {
      const ir::Value* v = graph.find_value(name);
      if (v == nullptr || v->kind != ir::ValueKind::kInput) {
        return Status(ErrorCode::kInvalidArgument,
                      fmt::format("'{}' is not an input of graph '{}'", name, graph.name));
      }
    }
  }
  return run_graph(graph, std::move(values), handles);
}

}  // namespace carve::reference
