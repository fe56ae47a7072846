#include "wire.h"

#include <onnx/onnx_pb.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

namespace carve::onnx::detail {

namespace {

// Field numbers in onnx.proto.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorRawData = 9;

enum WireType : uint64_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One field of a serialized message: `whole` is all of it, key included; `payload` is
// a length-delimited field's contents.
struct Field {
  uint64_t number = 0;
  uint64_t wire_type = 0;
  std::span<const uint8_t> whole;
  std::span<const uint8_t> payload;
};

// The fields of one serialized message, in order, checked against its bounds only.
class FieldReader {
 public:
  explicit FieldReader(std::span<const uint8_t> message) : rest_(message) {}

  bool done() const { return rest_.empty(); }

  // The next field; false for a malformed one or a group (which onnx.proto never uses).
  bool next(Field& f) {
    const uint8_t* start = rest_.data();
    uint64_t key = 0;
    if (!varint(key)) return false;
    f.number = key >> 3;
    f.wire_type = key & 7;
    f.payload = {};
    if (f.number == 0) return false;
    uint64_t ignored = 0;
    switch (f.wire_type) {
      case kVarint:
        if (!varint(ignored)) return false;
        break;
      case kFixed64:
        if (!skip(8)) return false;
        break;
      case kFixed32:
        if (!skip(4)) return false;
        break;
      case kLengthDelimited: {
        uint64_t size = 0;
        if (!varint(size) || size > rest_.size()) return false;
        f.payload = rest_.first(static_cast<size_t>(size));
        rest_ = rest_.subspan(static_cast<size_t>(size));
        break;
      }
      default: return false;
    }
    f.whole = std::span<const uint8_t>(start, rest_.data());
    return true;
  }

 private:
  bool varint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64 && !rest_.empty(); shift += 7) {
      const uint8_t byte = rest_.front();
      rest_ = rest_.subspan(1);
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80u) == 0) return true;
    }
    return false;
  }

  bool skip(size_t bytes) {
    if (bytes > rest_.size()) return false;
    rest_ = rest_.subspan(bytes);
    return true;
  }

  std::span<const uint8_t> rest_;
};

// Splits `message` into the payloads of its length-delimited fields numbered `number`,
// in order, and every other field, serialized as it was, in `rest`. False for a
// malformed message.
bool take_fields(std::span<const uint8_t> message, uint64_t number, std::vector<std::span<const uint8_t>>& taken,
                 std::string& rest) {
  FieldReader fields(message);
  Field f;
  while (!fields.done()) {
    if (!fields.next(f)) return false;
    if (f.number == number && f.wire_type == kLengthDelimited)
      taken.push_back(f.payload);
    else
      rest.append(reinterpret_cast<const char*>(f.whole.data()), f.whole.size());
  }
  return true;
}

// A TensorProto without its raw_data, whose last occurrence (protobuf keeps the last of
// a repeated singular field) goes to `raw`.
bool parse_initializer(std::span<const uint8_t> bytes, ::onnx::TensorProto& tensor, RawData& raw) {
  std::vector<std::span<const uint8_t>> raw_data;
  std::string rest;
  if (!take_fields(bytes, kTensorRawData, raw_data, rest)) return false;
  if (!raw_data.empty()) raw = RawData{true, raw_data.back()};
  return tensor.ParseFromString(rest);
}

// Merges one occurrence of the model's graph field, its initializers appended in order.
bool merge_graph(std::span<const uint8_t> bytes, ::onnx::GraphProto& graph, std::vector<RawData>& raw) {
  std::vector<std::span<const uint8_t>> initializers;
  std::string rest;
  if (!take_fields(bytes, kGraphInitializer, initializers, rest) || !graph.MergeFromString(rest)) return false;
  for (std::span<const uint8_t> initializer : initializers) {
    RawData r;
    if (!parse_initializer(initializer, *graph.add_initializer(), r)) return false;
    raw.push_back(r);
  }
  return true;
}

}  // namespace

bool parse_leaving_raw_data(std::span<const uint8_t> bytes, ::onnx::ModelProto& model, std::vector<RawData>& raw) {
  raw.clear();
  std::vector<std::span<const uint8_t>> graphs;
  std::string rest;
  if (!take_fields(bytes, kModelGraph, graphs, rest) || !model.ParseFromString(rest)) return false;
  for (std::span<const uint8_t> graph : graphs)
    if (!merge_graph(graph, *model.mutable_graph(), raw)) return false;
  return true;
}

void drop_mapped_pages(std::span<const uint8_t> bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace carve::onnx::detail
