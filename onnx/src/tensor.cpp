// ONNX TensorProto -> Tensor: dtype mapping, inline data (raw_data or the typed repeated
// fields), external data files (mapped, not copied), and element conversions.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "carve/reference/reference.h"
#include "context.h"

namespace carve::onnx::detail {
namespace {

using ::onnx::TensorProto;

Status tensor_error(ErrorCode code, const TensorProto& proto, std::string_view message) {
  return Status(code, fmt::format("onnx tensor '{}': {}", proto.name(), message));
}

Result<ir::Shape> proto_shape(const TensorProto& proto) {
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  ir::Shape shape(std::move(dims));
  Status valid = shape.validate();
  if (!valid.ok()) return tensor_error(ErrorCode::kParseError, proto, valid.message());
  return shape;
}

// Appends each element of a repeated field as `Out`, little-endian (x86 and ARM hosts).
template <typename Out, typename Field>
std::vector<uint8_t> pack(const Field& field) {
  std::vector<uint8_t> bytes(static_cast<size_t>(field.size()) * sizeof(Out));
  for (int i = 0; i < field.size(); ++i) {
    const Out v = static_cast<Out>(field.Get(i));
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(Out), &v, sizeof(Out));
  }
  return bytes;
}

// The typed repeated field that holds the elements when raw_data is absent.
std::vector<uint8_t> typed_field_bytes(const TensorProto& proto, ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return pack<float>(proto.float_data());
    case ir::DType::kF64: return pack<double>(proto.double_data());
    case ir::DType::kI64: return pack<int64_t>(proto.int64_data());
    case ir::DType::kI32: return pack<int32_t>(proto.int32_data());
    case ir::DType::kI8: return pack<int8_t>(proto.int32_data());
    case ir::DType::kI16: return pack<int16_t>(proto.int32_data());
    case ir::DType::kU16: return pack<uint16_t>(proto.int32_data());
    case ir::DType::kU32: return pack<uint32_t>(proto.uint64_data());
    case ir::DType::kU64: return pack<uint64_t>(proto.uint64_data());
    case ir::DType::kU8:
    case ir::DType::kBool: return pack<uint8_t>(proto.int32_data());
    case ir::DType::kF16:
    case ir::DType::kBf16: return pack<uint16_t>(proto.int32_data());  // bit patterns
  }
  return {};
}

Result<uint64_t> parse_u64(const TensorProto& proto, const std::string& key, const std::string& text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return tensor_error(ErrorCode::kParseError, proto, fmt::format("external data {} '{}' is not a number", key, text));
  return v;
}

Result<std::string> external_path(const TensorProto& proto, const Context& ctx, uint64_t& offset,
                                  std::optional<uint64_t>& length) {
  std::string location;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      CARVE_ASSIGN_OR_RETURN(offset, parse_u64(proto, entry.key(), entry.value()));
    } else if (entry.key() == "length") {
      CARVE_ASSIGN_OR_RETURN(length, parse_u64(proto, entry.key(), entry.value()));
    }
  }
  if (location.empty()) return tensor_error(ErrorCode::kParseError, proto, "external data without a location");
  namespace fs = std::filesystem;
  const fs::path path(location);
  auto outside = [&] {
    return tensor_error(ErrorCode::kInvalidArgument, proto,
                        fmt::format("external data location '{}' must be relative, inside the model's directory",
                                    location));
  };
  if (path.is_absolute()) return outside();
  // Resolved with symlinks followed (weakly_canonical: realpath for the part that
  // exists), then required to stay under the resolved directory: a '..' component or a
  // symlink pointing out escapes, while a name like "w..bin" is just a file name.
  const fs::path dir = ctx.options.external_data_dir.empty() ? fs::path(".") : fs::path(ctx.options.external_data_dir);
  std::error_code ec;
  fs::path base = fs::weakly_canonical(dir, ec);
  if (!ec && !base.has_filename() && base.has_parent_path()) base = base.parent_path();  // "dir/" -> "dir"
  if (ec) return tensor_error(ErrorCode::kIoError, proto, fmt::format("cannot resolve '{}': {}", dir.string(), ec.message()));
  const fs::path resolved = fs::weakly_canonical(dir / path, ec);
  if (ec) return tensor_error(ErrorCode::kIoError, proto, fmt::format("cannot resolve '{}': {}", (dir / path).string(), ec.message()));
  const auto [base_end, rest] = std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  if (base_end != base.end() || resolved == base) return outside();
  return (dir / path).string();
}

// Maps an external-data tensor read-only. A region not aligned to its element size is
// copied instead (kernels load elements at their natural alignment).
Result<Tensor> map_external(const TensorProto& proto, Context& ctx, ir::TensorType type) {
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  Result<std::string> path = external_path(proto, ctx, offset, length);
  if (!path.ok()) return path.status();
  CARVE_ASSIGN_OR_RETURN(int64_t bytes, type.byte_size());
  if (length && *length != static_cast<uint64_t>(bytes))
    return tensor_error(ErrorCode::kParseError, proto,
                        fmt::format("external data length {} but {} needs {} bytes", *length, type.to_string(), bytes));
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer mapped, runtime::Buffer::map_file(*path, offset, static_cast<size_t>(bytes)));
  CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> view, mapped.bytes());
  auto data = std::make_shared<Data>();
  data->name = proto.name();
  const auto* first = reinterpret_cast<const uint8_t*>(view.data());
  if (offset % static_cast<uint64_t>(ir::dtype_size(type.dtype)) != 0) {
    data->owned.assign(first, first + view.size());
    data->view = data->owned;
  } else {
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer typed, mapped.view(0, type.dtype, type.shape));
    data->mapped = std::move(typed);
    data->view = std::span<const uint8_t>(first, view.size());
  }
  return Tensor{std::move(type), ir::kNoValue, std::move(data)};
}

bool has_external_data(const TensorProto& proto) {
  return proto.has_data_location() && proto.data_location() == TensorProto::EXTERNAL;
}

}  // namespace

Result<ir::DType> dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return ir::DType::kF32;
    case TensorProto::DOUBLE: return ir::DType::kF64;
    case TensorProto::FLOAT16: return ir::DType::kF16;
    case TensorProto::BFLOAT16: return ir::DType::kBf16;
    case TensorProto::INT8: return ir::DType::kI8;
    case TensorProto::UINT8: return ir::DType::kU8;
    case TensorProto::INT32: return ir::DType::kI32;
    case TensorProto::INT64: return ir::DType::kI64;
    case TensorProto::BOOL: return ir::DType::kBool;
    case TensorProto::INT16: return ir::DType::kI16;
    case TensorProto::UINT16: return ir::DType::kU16;
    case TensorProto::UINT32: return ir::DType::kU32;
    case TensorProto::UINT64: return ir::DType::kU64;
    default: break;
  }
  const std::string name =
      TensorProto::DataType_IsValid(elem_type) ? TensorProto::DataType_Name(elem_type) : std::to_string(elem_type);
  return Status(ErrorCode::kUnsupported, fmt::format("ONNX element type {} has no carve dtype", name));
}

Tensor known_tensor(std::string name, ir::TensorType type, std::vector<uint8_t> bytes) {
  auto data = std::make_shared<Data>();
  data->name = std::move(name);
  data->owned = std::move(bytes);
  data->view = data->owned;
  return Tensor{std::move(type), ir::kNoValue, std::move(data)};
}

Result<Tensor> decode_tensor(const TensorProto& proto, Context& ctx, bool load_data, const RawData* raw) {
  Result<ir::DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype.ok()) return tensor_error(ErrorCode::kUnsupported, proto, dtype.status().message());
  CARVE_ASSIGN_OR_RETURN(ir::Shape shape, proto_shape(proto));
  ir::TensorType type{*dtype, std::move(shape)};
  Status valid = type.validate();
  if (!valid.ok()) return tensor_error(ErrorCode::kParseError, proto, valid.message());
  // Without weights, small float tensors are still read: scalars such as a LayerNorm
  // exponent or a scale can feed shape arithmetic; they are structure, not weights.
  constexpr int64_t kAlwaysLoadedElements = 64;
  if (!load_data && ir::is_float(*dtype) && *type.shape.num_elements() > kAlwaysLoadedElements) {
    auto data = std::make_shared<Data>();
    data->name = proto.name();
    data->known = false;
    return Tensor{std::move(type), ir::kNoValue, std::move(data)};
  }
  if (has_external_data(proto)) return map_external(proto, ctx, std::move(type));
  const int64_t want = *type.byte_size();
  std::vector<uint8_t> bytes;
  if (raw != nullptr && raw->present)
    bytes.assign(raw->bytes.begin(), raw->bytes.end());
  else if (proto.has_raw_data())
    bytes.assign(proto.raw_data().begin(), proto.raw_data().end());
  else
    bytes = typed_field_bytes(proto, *dtype);
  if (static_cast<int64_t>(bytes.size()) != want)
    return tensor_error(ErrorCode::kParseError, proto,
                        fmt::format("{} needs {} bytes of data, found {}", type.to_string(), want, bytes.size()));
  return known_tensor(proto.name(), std::move(type), std::move(bytes));
}

std::vector<double> to_doubles(const Tensor& t) {
  reference::HostTensor host{t.type, std::vector<uint8_t>(t.bytes().begin(), t.bytes().end())};
  return host.to_doubles();
}

std::vector<int64_t> to_int64s(const Tensor& t) {
  const auto bytes = t.bytes();
  const int64_t n = static_cast<int64_t>(bytes.size()) / std::max<int64_t>(1, ir::dtype_size(t.type.dtype));
  std::vector<int64_t> out(static_cast<size_t>(n));
  auto read = [&](auto sample) {
    using T = decltype(sample);
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      out[static_cast<size_t>(i)] = static_cast<int64_t>(v);
    }
  };
  switch (t.type.dtype) {
    case ir::DType::kI64: read(int64_t{}); break;
    case ir::DType::kI32: read(int32_t{}); break;
    case ir::DType::kI8: read(int8_t{}); break;
    case ir::DType::kI16: read(int16_t{}); break;
    case ir::DType::kU16: read(uint16_t{}); break;
    case ir::DType::kU32: read(uint32_t{}); break;
    case ir::DType::kU64: read(uint64_t{}); break;  // modulo 2^64
    case ir::DType::kU8:
    case ir::DType::kBool: read(uint8_t{}); break;
    default: {  // floats by the cast rules (reference.h): truncate, saturate, NaN -> 0; -inf is no UB
      const reference::HostTensor ints =
          reference::HostTensor::from_doubles(ir::DType::kI64, t.type.shape, to_doubles(t));
      std::memcpy(out.data(), ints.bytes.data(), out.size() * sizeof(int64_t));
    }
  }
  return out;
}

Tensor from_doubles(std::string name, ir::DType dtype, ir::Shape shape, const std::vector<double>& values) {
  reference::HostTensor host = reference::HostTensor::from_doubles(dtype, shape, values);
  return known_tensor(std::move(name), host.type, std::move(host.bytes));
}

Tensor from_int64s(std::string name, ir::DType dtype, ir::Shape shape, const std::vector<int64_t>& values) {
  if (ir::is_integer(dtype)) {
    // Narrowed modulo 2^width (little-endian: the low bytes), exact past 2^53.
    const auto size = static_cast<size_t>(ir::dtype_size(dtype));
    std::vector<uint8_t> bytes(values.size() * size);
    for (size_t i = 0; i < values.size(); ++i) std::memcpy(bytes.data() + i * size, &values[i], size);
    return known_tensor(std::move(name), ir::TensorType{dtype, std::move(shape)}, std::move(bytes));
  }
  std::vector<double> d(values.begin(), values.end());
  return from_doubles(std::move(name), dtype, std::move(shape), d);
}

}  // namespace carve::onnx::detail
