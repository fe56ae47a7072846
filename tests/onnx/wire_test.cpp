// parse_leaving_raw_data (onnx/src/wire.h) against protobuf's own parse of the same
// bytes: the message it gives, with the raw_data it left in place put back, is the one
// protobuf gives, on every committed model and on damaged copies of them.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <rapidcheck.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "onnx_test_util.h"
#include "wire.h"

namespace fs = std::filesystem;
namespace ot = carve::onnx_test;
using carve::onnx::detail::parse_leaving_raw_data;
using carve::onnx::detail::RawData;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A length-delimited field: key, length, payload.
std::string length_delimited(uint64_t field, const std::string& payload) {
  std::string out;
  auto varint = [&out](uint64_t v) {
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    out.push_back(static_cast<char>(v));
  };
  varint(field << 3 | 2);
  varint(payload.size());
  return out + payload;
}

// parse_leaving_raw_data's message with the raw_data it left out put back, serialized;
// nullopt when it declines the bytes.
std::optional<std::string> split_and_refilled(const std::string& bytes) {
  ::onnx::ModelProto model;
  std::vector<RawData> raw;
  if (!parse_leaving_raw_data(as_bytes(bytes), model, raw)) return std::nullopt;
  REQUIRE(raw.size() == static_cast<size_t>(model.graph().initializer_size()));
  for (size_t i = 0; i < raw.size(); ++i) {
    ::onnx::TensorProto& t = *model.mutable_graph()->mutable_initializer(static_cast<int>(i));
    CHECK_FALSE(t.has_raw_data());  // left in the bytes, not copied
    if (!raw[i].present) continue;
    CHECK(raw[i].bytes.data() >= as_bytes(bytes).data());
    CHECK(raw[i].bytes.data() + raw[i].bytes.size() <= as_bytes(bytes).data() + bytes.size());
    t.set_raw_data(std::string(reinterpret_cast<const char*>(raw[i].bytes.data()), raw[i].bytes.size()));
  }
  return model.SerializeAsString();
}

std::vector<fs::path> committed_models() {
  std::vector<fs::path> models;
  for (const auto& entry : fs::directory_iterator(ot::models_dir()))
    if (entry.path().extension() == ".onnx") models.push_back(entry.path());
  std::sort(models.begin(), models.end());
  return models;
}

}  // namespace

TEST_CASE("onnx/wire/every committed model splits into protobuf's own message") {
  const std::vector<fs::path> models = committed_models();
  REQUIRE(models.size() > 30);
  int with_raw_data = 0;
  for (const fs::path& path : models) {
    CAPTURE(path.filename().string());
    const std::string bytes = read_file(path);
    ::onnx::ModelProto whole;
    REQUIRE(whole.ParseFromString(bytes));
    for (const auto& t : whole.graph().initializer()) with_raw_data += t.has_raw_data();
    const std::optional<std::string> split = split_and_refilled(bytes);
    REQUIRE(split.has_value());
    CHECK(*split == whole.SerializeAsString());
  }
  CHECK(with_raw_data > 100);  // the case this parse exists for is exercised
}

TEST_CASE("onnx/wire/repeated raw_data and graph fields merge as protobuf merges them") {
  // Concatenated serialized messages merge: a graph field given twice is one graph with
  // the second's initializers after the first's, and of two raw_data fields in one
  // tensor the last wins.
  ::onnx::ModelProto head;
  head.set_ir_version(8);
  head.add_opset_import()->set_version(17);
  ::onnx::GraphProto first;
  first.set_name("g");
  auto add_node = [&first](const char* op, const char* in0, const char* in1, const char* out) {
    ::onnx::NodeProto& node = *first.add_node();
    node.set_op_type(op);
    node.add_input(in0);
    node.add_input(in1);
    node.add_output(out);
  };
  add_node("Add", "x", "a", "s");
  add_node("Mul", "s", "b", "y");
  ::onnx::TensorProto a;
  a.set_name("a");
  a.set_data_type(::onnx::TensorProto::FLOAT);
  a.add_dims(2);
  const float stale[2] = {9, 9}, fresh[2] = {1.5f, -2};
  a.set_raw_data(std::string(reinterpret_cast<const char*>(stale), sizeof(stale)));
  ::onnx::TensorProto a_again;
  a_again.set_raw_data(std::string(reinterpret_cast<const char*>(fresh), sizeof(fresh)));
  ::onnx::GraphProto second;
  ::onnx::TensorProto& b = *second.add_initializer();
  b.set_name("b");
  b.set_data_type(::onnx::TensorProto::FLOAT);
  b.add_dims(2);
  b.add_float_data(10);
  b.add_float_data(20);
  auto declare = [](::onnx::ValueInfoProto& info, const char* name) {
    info.set_name(name);
    info.mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
    info.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  };
  declare(*second.add_input(), "x");
  declare(*second.add_output(), "y");
  const std::string first_graph =
      first.SerializeAsString() + length_delimited(5, a.SerializeAsString() + a_again.SerializeAsString());
  const std::string bytes = length_delimited(7, first_graph) + head.SerializeAsString() +
                            length_delimited(7, second.SerializeAsString());
  ::onnx::ModelProto whole;
  REQUIRE(whole.ParseFromString(bytes));
  REQUIRE(whole.graph().initializer_size() == 2);
  CHECK(whole.graph().initializer(0).raw_data() == std::string(reinterpret_cast<const char*>(fresh), sizeof(fresh)));
  const std::optional<std::string> split = split_and_refilled(bytes);
  REQUIRE(split.has_value());
  CHECK(*split == whole.SerializeAsString());

  auto model = carve::onnx::import_model_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "merged");
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  // The import reads the last raw_data, and float_data where there is none.
  auto constant = [&model](const char* name) {
    const carve::ir::Value* v = model->graph.find_value(name);
    REQUIRE(v != nullptr);
    REQUIRE(v->data.has_value());
    std::vector<float> values(v->data->size() / sizeof(float));
    std::memcpy(values.data(), v->data->data(), v->data->size());
    return values;
  };
  CHECK(constant("a") == std::vector<float>{1.5f, -2});
  CHECK(constant("b") == std::vector<float>{10, 20});
}

TEST_CASE("onnx/wire/damaged bytes split only into protobuf's own message") {
  // Truncated or flipped bytes: whenever parse_leaving_raw_data takes them, protobuf
  // parses them too, to the same message (else the import parses them whole).
  const std::string resnet = read_file(ot::model_path("resnet_tiny"));
  const std::string bert = read_file(ot::model_path("bert_tiny"));
  CHECK(rc::check("split => protobuf's parse", [&] {
    const std::string& original = **rc::gen::element(&resnet, &bert);
    std::string bytes = original;
    const int flips = *rc::gen::inRange(0, 4);
    for (int i = 0; i < flips; ++i) {
      const size_t at = *rc::gen::inRange<size_t>(0, bytes.size());
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << *rc::gen::inRange(0, 8)));
    }
    if (*rc::gen::arbitrary<bool>()) bytes.resize(*rc::gen::inRange<size_t>(0, bytes.size()));
    const std::optional<std::string> split = split_and_refilled(bytes);
    if (!split) return;
    ::onnx::ModelProto whole;
    RC_ASSERT(whole.ParseFromString(bytes));
    RC_ASSERT(*split == whole.SerializeAsString());
  }));
}
