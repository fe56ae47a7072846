// NumPy .npy reading and writing (see npy.h for the format and the error contract).
#include "carve/file.h"
#include "carve/runtime/npy.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

namespace carve::runtime {
namespace {

static_assert(std::endian::native == std::endian::little,
              "npy.cpp reads little-endian data straight into buffers");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// Prefix sizes: magic + version (2) + header length (2 in v1, 4 in v2/v3).
constexpr size_t kPrefixV1 = kMagicSize + 2 + 2;
constexpr size_t kPrefixV2 = kMagicSize + 2 + 4;
constexpr size_t kAlignment = 64;  // numpy aligns the data to 64 bytes
// numpy writes headers of a few hundred bytes (and reads at most 10000 by default); a v2
// length field can announce 4 GiB, which is refused before reading it.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;

Status npy_error(ErrorCode code, std::string_view name, std::string_view message) {
  return Status(code, fmt::format("npy '{}': {}", name, message));
}

struct DTypeCode {
  char kind;  // 'f', 'i', 'u', 'b'
  int size;
  ir::DType dtype;
};
constexpr DTypeCode kCodes[] = {
    {'f', 4, ir::DType::kF32}, {'f', 8, ir::DType::kF64}, {'f', 2, ir::DType::kF16},
    {'i', 1, ir::DType::kI8},  {'i', 4, ir::DType::kI32}, {'i', 8, ir::DType::kI64},
    {'u', 1, ir::DType::kU8},  {'b', 1, ir::DType::kBool}, {'i', 2, ir::DType::kI16},
    {'u', 2, ir::DType::kU16}, {'u', 4, ir::DType::kU32}, {'u', 8, ir::DType::kU64},
};

// The descr numpy writes for a dtype; empty for bf16.
std::string_view descr_of(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return "<f4";
    case ir::DType::kF64: return "<f8";
    case ir::DType::kF16: return "<f2";
    case ir::DType::kI8: return "|i1";
    case ir::DType::kI32: return "<i4";
    case ir::DType::kI64: return "<i8";
    case ir::DType::kU8: return "|u1";
    case ir::DType::kBool: return "|b1";
    case ir::DType::kI16: return "<i2";
    case ir::DType::kU16: return "<u2";
    case ir::DType::kU32: return "<u4";
    case ir::DType::kU64: return "<u8";
    case ir::DType::kBf16: return "";
  }
  return "";
}

Result<ir::DType> dtype_from_descr(std::string_view descr, std::string_view name) {
  auto unsupported = [&](std::string_view why) {
    return npy_error(ErrorCode::kUnsupported, name,
                     fmt::format("dtype '{}' is not supported ({}); carve reads <f4 <f8 <f2 |i1 "
                                 "<i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1",
                                 descr, why));
  };
  if (descr.size() < 3) return unsupported("unknown type code");
  const char order = descr[0];
  const char kind = descr[1];
  int size = 0;
  for (char c : descr.substr(2)) {
    if (c < '0' || c > '9' || size > 1000) return unsupported("unknown type code");
    size = size * 10 + (c - '0');
  }
  const DTypeCode* code = nullptr;
  for (const DTypeCode& c : kCodes) {
    if (c.kind == kind && c.size == size) code = &c;
  }
  if (code == nullptr) return unsupported("unknown type code");
  if (order == '>' && size > 1) return unsupported("big-endian data");
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    return unsupported("unknown byte order");
  }
  if (order == '|' && size > 1) return unsupported("'|' byte order on a multi-byte type");
  return code->dtype;
}

// ---- a tiny parser for the header's Python dict literal ----

struct HeaderValue {
  enum Kind { kString, kBool, kTuple, kList } kind = kString;
  std::string text;
  bool flag = false;
  std::vector<int64_t> ints;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  Result<std::vector<std::pair<std::string, HeaderValue>>> parse_dict() {
    std::vector<std::pair<std::string, HeaderValue>> entries;
    skip_space();
    CARVE_RETURN_IF_ERROR(expect('{'));
    skip_space();
    while (!at('}')) {
      CARVE_ASSIGN_OR_RETURN(std::string key, parse_string());
      skip_space();
      CARVE_RETURN_IF_ERROR(expect(':'));
      skip_space();
      CARVE_ASSIGN_OR_RETURN(HeaderValue value, parse_value());
      entries.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (at(',')) {
        ++pos_;
        skip_space();
      } else if (!at('}')) {
        return error("expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) return error("unexpected text after the dict");
    return entries;
  }

 private:
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status error(std::string_view what) const {
    return npy_error(ErrorCode::kParseError, name_,
                     fmt::format("malformed header at offset {}: {} (header: {})", pos_, what,
                                 text_.substr(0, 200)));
  }
  Status expect(char c) {
    if (!at(c)) return error(fmt::format("expected '{}'", c));
    ++pos_;
    return Status();
  }

  Result<std::string> parse_string() {
    if (!at('\'') && !at('"')) return error("expected a quoted string");
    const char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') return error("escapes in strings are not supported");
      out.push_back(text_[pos_++]);
    }
    if (pos_ >= text_.size()) return error("unterminated string");
    ++pos_;
    return out;
  }

  Result<int64_t> parse_int() {
    const size_t begin = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return error("dim overflows int64");
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == begin) return error("expected a non-negative integer");
    if (at('L')) ++pos_;  // Python 2 long suffix in old files
    return v;
  }

  Result<HeaderValue> parse_value() {
    HeaderValue v;
    if (at('\'') || at('"')) {
      CARVE_ASSIGN_OR_RETURN(v.text, parse_string());
      v.kind = HeaderValue::kString;
      return v;
    }
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      v.kind = HeaderValue::kBool;
      v.flag = true;
      return v;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      v.kind = HeaderValue::kBool;
      return v;
    }
    if (at('[')) {  // a structured dtype's field list: skip to the matching ']'
      int depth = 0;
      for (; pos_ < text_.size(); ++pos_) {
        if (text_[pos_] == '[') ++depth;
        if (text_[pos_] == ']' && --depth == 0) break;
      }
      if (pos_ >= text_.size()) return error("unterminated list");
      ++pos_;
      v.kind = HeaderValue::kList;
      return v;
    }
    if (at('(')) {
      ++pos_;
      v.kind = HeaderValue::kTuple;
      skip_space();
      while (!at(')')) {
        CARVE_ASSIGN_OR_RETURN(int64_t d, parse_int());
        v.ints.push_back(d);
        skip_space();
        if (at(',')) {
          ++pos_;
          skip_space();
        } else if (!at(')')) {
          return error("expected ',' or ')' in the shape tuple");
        }
      }
      ++pos_;
      return v;
    }
    return error("expected a string, True, False or a tuple");
  }

  std::string_view text_;
  std::string_view name_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::byte* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

// Reads up to `n` bytes into `out`; the count read (short only at the end of the stream).
size_t read_some(std::istream& in, std::byte* out, size_t n) {
  in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n));
  return static_cast<size_t>(in.gcount());
}

// The magic, version, header length and header dict of the stream `in`, read and
// checked before anything of the payload: the header says how much to read after it, so
// a stream that never ends (/dev/zero, a FIFO) is read only that far.
Result<NpyHeader> read_header(std::istream& in, const std::string& path) {
  std::vector<std::byte> head(kPrefixV1);
  head.resize(read_some(in, head.data(), head.size()));
  if (head.size() >= kMagicSize + 2 && static_cast<int>(head[kMagicSize]) != 1 &&
      head.size() == kPrefixV1) {
    head.resize(kPrefixV2);
    head.resize(kPrefixV1 + read_some(in, head.data() + kPrefixV1, kPrefixV2 - kPrefixV1));
  }
  // Magic, version and a short prefix are reported by parse_npy_header.
  const bool v1 = head.size() >= kMagicSize + 2 && static_cast<int>(head[kMagicSize]) == 1;
  const size_t prefix = v1 ? kPrefixV1 : kPrefixV2;
  if (head.size() < prefix || std::memcmp(head.data(), kMagic, kMagicSize) != 0) return parse_npy_header(head, path);
  const uint64_t header_len = read_le(head.data() + kMagicSize + 2, prefix - kMagicSize - 2);
  if (header_len > kMaxHeaderBytes) return parse_npy_header(head, path);  // says "header of N bytes"
  head.resize(prefix + static_cast<size_t>(header_len));
  head.resize(prefix + read_some(in, head.data() + prefix, static_cast<size_t>(header_len)));
  if (in.bad()) return npy_error(ErrorCode::kIoError, path, fmt::format("read failed: {}", std::strerror(errno)));
  return parse_npy_header(head, path);
}

Status check_bools(std::span<const std::byte> data, std::string_view name) {
  for (size_t i = 0; i < data.size(); ++i) {
    const auto b = static_cast<uint8_t>(data[i]);
    if (b > 1) {
      return npy_error(ErrorCode::kParseError, name,
                       fmt::format("bool element {} is {}, not 0 or 1", i, b));
    }
  }
  return Status();
}

// Checks that exactly the data follows the header.
Status check_data_size(const NpyHeader& h, uint64_t total, std::string_view name) {
  const uint64_t have = total - h.data_offset;
  if (have < h.data_bytes) {
    return npy_error(ErrorCode::kParseError, name,
                     fmt::format("truncated data: {} {} needs {} bytes after the header, the "
                                 "file has {}",
                                 ir::dtype_name(h.dtype), h.shape.to_string(), h.data_bytes, have));
  }
  if (have > h.data_bytes) {
    return npy_error(ErrorCode::kParseError, name,
                     fmt::format("{} trailing bytes after the {} data bytes of {} {}",
                                 have - h.data_bytes, h.data_bytes, ir::dtype_name(h.dtype),
                                 h.shape.to_string()));
  }
  return Status();
}

}  // namespace

Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, std::string_view name) {
  if (bytes.size() < kMagicSize + 2 ||
      std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return npy_error(ErrorCode::kParseError, name,
                     bytes.size() < kMagicSize + 2 ? "too short for the .npy magic and version"
                                                   : "not a .npy file (bad magic)");
  }
  NpyHeader h;
  h.major_version = static_cast<int>(bytes[kMagicSize]);
  h.minor_version = static_cast<int>(bytes[kMagicSize + 1]);
  if (h.major_version < 1 || h.major_version > 3) {
    return npy_error(ErrorCode::kUnsupported, name,
                     fmt::format("format version {}.{} is not supported (1.0, 2.0, 3.0 are)",
                                 h.major_version, h.minor_version));
  }
  const size_t prefix = h.major_version == 1 ? kPrefixV1 : kPrefixV2;
  if (bytes.size() < prefix) {
    return npy_error(ErrorCode::kParseError, name, "truncated header length");
  }
  const uint64_t header_len = read_le(bytes.data() + kMagicSize + 2, prefix - kMagicSize - 2);
  if (header_len > kMaxHeaderBytes) {
    return npy_error(ErrorCode::kParseError, name,
                     fmt::format("header of {} bytes is over the {} carve reads", header_len, kMaxHeaderBytes));
  }
  if (header_len > bytes.size() - prefix) {
    return npy_error(ErrorCode::kParseError, name,
                     fmt::format("truncated header: {} bytes announced, {} present", header_len,
                                 bytes.size() - prefix));
  }
  h.data_offset = prefix + static_cast<size_t>(header_len);
  // Version 1.0 and 2.0 headers are latin1, 3.0 UTF-8; the keys and values carve accepts
  // are ASCII either way, so the bytes are parsed as they are.
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + prefix),
                        static_cast<size_t>(header_len));
  HeaderParser parser(text, name);
  CARVE_ASSIGN_OR_RETURN(auto entries, parser.parse_dict());

  std::optional<HeaderValue> descr, fortran, shape;
  for (auto& [key, value] : entries) {
    std::optional<HeaderValue>* slot = key == "descr"           ? &descr
                                       : key == "fortran_order" ? &fortran
                                       : key == "shape"         ? &shape
                                                                : nullptr;
    if (slot == nullptr) {
      return npy_error(ErrorCode::kParseError, name, fmt::format("unexpected header key '{}'", key));
    }
    if (slot->has_value()) {
      return npy_error(ErrorCode::kParseError, name, fmt::format("header key '{}' repeats", key));
    }
    *slot = std::move(value);
  }
  if (!descr || !fortran || !shape) {
    return npy_error(ErrorCode::kParseError, name,
                     fmt::format("header lacks '{}'", !descr ? "descr" : !fortran ? "fortran_order" : "shape"));
  }
  if (descr->kind == HeaderValue::kList) {
    return npy_error(ErrorCode::kUnsupported, name, "structured dtypes are not supported");
  }
  if (descr->kind != HeaderValue::kString) {
    return npy_error(ErrorCode::kParseError, name, "'descr' must be a string");
  }
  if (fortran->kind != HeaderValue::kBool) {
    return npy_error(ErrorCode::kParseError, name, "'fortran_order' must be True or False");
  }
  if (shape->kind != HeaderValue::kTuple) {
    return npy_error(ErrorCode::kParseError, name, "'shape' must be a tuple");
  }
  CARVE_ASSIGN_OR_RETURN(h.dtype, dtype_from_descr(descr->text, name));
  if (shape->ints.size() > static_cast<size_t>(ir::kMaxRank)) {
    return npy_error(ErrorCode::kUnsupported, name,
                     fmt::format("rank {} is above carve's maximum {}", shape->ints.size(), ir::kMaxRank));
  }
  h.shape = ir::Shape(shape->ints);
  if (fortran->flag && h.shape.rank() >= 2) {
    return npy_error(ErrorCode::kUnsupported, name,
                     "Fortran-order arrays are not supported (save a C-order array, e.g. "
                     "np.ascontiguousarray)");
  }
  Result<int64_t> size = ir::byte_size(h.dtype, h.shape);
  if (!size.ok()) {
    return npy_error(ErrorCode::kParseError, name,
                     fmt::format("shape {} is too large: {}", h.shape.to_string(), size.status().message()));
  }
  h.data_bytes = static_cast<size_t>(*size);
  return h;
}

Result<Buffer> read_npy_bytes(std::span<const std::byte> bytes, std::string_view name) {
  CARVE_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(bytes, name));
  CARVE_RETURN_IF_ERROR(check_data_size(h, bytes.size(), name));
  std::span<const std::byte> data = bytes.subspan(h.data_offset, h.data_bytes);
  if (h.dtype == ir::DType::kBool) CARVE_RETURN_IF_ERROR(check_bools(data, name));
  CARVE_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(cpu_allocator(), h.dtype, h.shape));
  CARVE_RETURN_IF_ERROR(buffer.copy_in(data));
  return buffer;
}

Result<Buffer> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return npy_error(ErrorCode::kIoError, path, fmt::format("cannot open: {}", std::strerror(errno)));
  }
  CARVE_ASSIGN_OR_RETURN(NpyHeader h, read_header(in, path));
  // Exactly the payload the header announces goes into the buffer (its size was
  // overflow-checked by parse_npy_header), then one byte more tells trailing data apart.
  CARVE_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(cpu_allocator(), h.dtype, h.shape));
  CARVE_ASSIGN_OR_RETURN(std::span<std::byte> data, buffer.mutable_bytes());
  const size_t got = read_some(in, data.data(), h.data_bytes);
  if (in.bad()) return npy_error(ErrorCode::kIoError, path, fmt::format("read failed: {}", std::strerror(errno)));
  if (got < h.data_bytes) CARVE_RETURN_IF_ERROR(check_data_size(h, h.data_offset + got, path));
  std::byte extra{};
  if (read_some(in, &extra, 1) != 0) {
    return npy_error(ErrorCode::kParseError, path,
                     fmt::format("trailing bytes after the {} data bytes of {} {}", h.data_bytes,
                                 ir::dtype_name(h.dtype), h.shape.to_string()));
  }
  if (h.dtype == ir::DType::kBool) CARVE_RETURN_IF_ERROR(check_bools(data, path));
  return buffer;
}

Result<Buffer> map_npy(const std::string& path) {
  // Read just enough of the file for the header.
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return npy_error(ErrorCode::kIoError, path, fmt::format("cannot open: {}", std::strerror(errno)));
  }
  std::error_code ec;
  const uint64_t total = std::filesystem::file_size(path, ec);
  if (ec) return npy_error(ErrorCode::kIoError, path, fmt::format("cannot stat: {}", ec.message()));
  std::vector<std::byte> prefix(kPrefixV2);
  in.read(reinterpret_cast<char*>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
  prefix.resize(static_cast<size_t>(in.gcount()));
  size_t want = prefix.size();
  if (prefix.size() >= kMagicSize + 2) {
    const bool v1 = static_cast<int>(prefix[kMagicSize]) == 1;
    const size_t len_bytes = v1 ? 2 : 4;
    if (prefix.size() >= kMagicSize + 2 + len_bytes) {
      want = (v1 ? kPrefixV1 : kPrefixV2) + read_le(prefix.data() + kMagicSize + 2, len_bytes);
    }
  }
  std::vector<std::byte> head(std::min<uint64_t>({want, total, kPrefixV2 + kMaxHeaderBytes + 1}));
  in.clear();
  in.seekg(0);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  if (static_cast<size_t>(in.gcount()) != head.size()) {
    return npy_error(ErrorCode::kIoError, path, "short read of the header");
  }
  CARVE_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(head, path));
  CARVE_RETURN_IF_ERROR(check_data_size(h, total, path));
  CARVE_ASSIGN_OR_RETURN(Buffer raw, Buffer::map_file(path, h.data_offset, h.data_bytes));
  if (h.dtype == ir::DType::kBool) {
    CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> data, raw.bytes());
    CARVE_RETURN_IF_ERROR(check_bools(data, path));
  }
  return Buffer::over(raw.storage(), h.dtype, h.shape);
}

Result<std::vector<std::byte>> write_npy_bytes(const Buffer& buffer, NpyWriteOptions options) {
  const bool bits = options.bf16_as_u2 && buffer.dtype() == ir::DType::kBf16;
  const std::string_view descr = descr_of(bits ? ir::DType::kU16 : buffer.dtype());
  if (descr.empty()) {
    return Status(ErrorCode::kUnsupported,
                  fmt::format("npy: cannot write {}: numpy has no {} dtype (cast to f32 first, or write "
                              "the bit patterns as <u2)",
                              buffer.describe(), ir::dtype_name(buffer.dtype())));
  }
  CARVE_ASSIGN_OR_RETURN(std::span<const std::byte> data, buffer.bytes());
  const auto& dims = buffer.shape().dims();
  std::string shape = "(";
  for (size_t i = 0; i < dims.size(); ++i) shape += fmt::format("{}{}", i ? ", " : "", dims[i]);
  if (dims.size() == 1) shape += ",";
  shape += ")";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // Pad with spaces so the data starts on a 64-byte boundary, ending in '\n'.
  auto padding = [&](size_t prefix_size) {
    return (kAlignment - (prefix_size + header.size() + 1) % kAlignment) % kAlignment;
  };
  // Version 1.0 unless the padded header does not fit its 2-byte length.
  const size_t prefix =
      header.size() + 1 + padding(kPrefixV1) <= 0xffff ? kPrefixV1 : kPrefixV2;
  header.append(padding(prefix), ' ');
  header.push_back('\n');

  std::vector<std::byte> out;
  out.reserve(prefix + header.size() + data.size());
  for (size_t i = 0; i < kMagicSize; ++i) out.push_back(static_cast<std::byte>(kMagic[i]));
  out.push_back(std::byte{prefix == kPrefixV1 ? uint8_t{1} : uint8_t{2}});
  out.push_back(std::byte{0});
  const auto len = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < prefix - kMagicSize - 2; ++i) {
    out.push_back(static_cast<std::byte>((len >> (8 * i)) & 0xff));
  }
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status write_npy(const std::string& path, const Buffer& buffer, NpyWriteOptions options) {
  Result<std::vector<std::byte>> bytes = write_npy_bytes(buffer, options);
  if (!bytes.ok()) {
    return Status(bytes.status().code(), fmt::format("npy '{}': {}", path, bytes.status().message()));
  }
  return write_file(path, *bytes);
}

Result<Buffer> bf16_from_u2(const Buffer& bits, std::string_view name) {
  if (bits.dtype() != ir::DType::kU16) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("npy '{}': bf16 bit patterns must be <u2 (uint16), not {}", name,
                              ir::dtype_name(bits.dtype())));
  }
  return bits.view(0, ir::DType::kBf16, bits.shape());
}

}  // namespace carve::runtime
