// Reference interpreter: whole graphs, state ops on handles, reference_node on raw
// memory, and the error paths.
#include <doctest/doctest.h>

#include <cstring>

#include "reference_test_util.h"

namespace {

using namespace carve;
using namespace carve::reference;
using namespace carve::reference::testing;

std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

ir::Graph mlp_graph(bool with_data = true) {
  ir::GraphBuilder b("mlp");
  ir::ValueId x = b.input("x", DType::kF32, {2, 3});
  ir::ValueId w = b.constant("w", DType::kF32, {3, 2},
                             with_data ? std::optional(float_bytes({1, 0, 0, 1, 1, -1})) : std::nullopt);
  ir::ValueId bias = b.constant("b", DType::kF32, {2}, float_bytes({0, 1}));
  ir::ValueId y = b.relu(b.add(b.matmul(x, w), bias));
  ir::ValueId p = b.softmax(y);
  b.output(y);
  b.output(b.reduce_sum(p, {1}, false));
  b.output(p);
  Result<ir::Graph> g = b.build();
  REQUIRE(g.ok());
  return std::move(g).value();
}

TEST_CASE("reference/run_reference on a multi-node graph") {
  const ir::Graph g = mlp_graph();
  const std::vector<HostTensor> inputs = {f32({2, 3}, {1, 2, 3, 4, 5, 6})};
  Result<std::vector<HostTensor>> out = run_reference(g, inputs);
  INFO(out.status().to_string());
  REQUIRE(out.ok());
  REQUIRE(out->size() == 3);
  // x.w = [[4,-1],[10,-1]], + b = [[4,0],[10,0]], relu keeps it.
  CHECK((*out)[0].as<float>() == std::vector<float>{4, 0, 10, 0});
  check_close((*out)[1], {1, 1});
  check_close((*out)[2], {0.9820137900379085, 0.01798620996209156, 0.9999546021312976, 4.5397868702434395e-05});
  // The same by name.
  Result<std::vector<HostTensor>> by_name = run_reference(g, std::map<std::string, HostTensor>{{"x", inputs[0]}});
  REQUIRE(by_name.ok());
  CHECK(*by_name == *out);
}

TEST_CASE("reference/run_reference returns inputs and constants marked as outputs") {
  ir::GraphBuilder b;
  ir::ValueId x = b.input("x", DType::kI32, {2});
  ir::ValueId c = b.constant("c", DType::kU8, {1}, std::vector<uint8_t>{7});
  b.output(x);
  b.output(c);
  ir::Graph g = b.build().value();
  Result<std::vector<HostTensor>> out = run_reference(g, std::vector<HostTensor>{i32({2}, {5, 6})});
  REQUIRE(out.ok());
  CHECK((*out)[0].as<int32_t>() == std::vector<int32_t>{5, 6});
  CHECK((*out)[1].as<uint8_t>() == std::vector<uint8_t>{7});
}

TEST_CASE("reference/constant without data is kInvalidArgument naming it") {
  Result<std::vector<HostTensor>> out =
      run_reference(mlp_graph(false), std::vector<HostTensor>{f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  REQUIRE(!out.ok());
  CHECK(out.status().code() == ErrorCode::kInvalidArgument);
  CHECK(out.status().message().find("'w'") != std::string::npos);
}

TEST_CASE("reference/run_reference rejects mismatched inputs") {
  const ir::Graph g = mlp_graph();
  auto code = [&](std::vector<HostTensor> in) { return run_reference(g, in).status().code(); };
  CHECK(code({}) == ErrorCode::kInvalidArgument);
  CHECK(code({f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({1}, {1})}) == ErrorCode::kInvalidArgument);
  CHECK(code({f32({3, 2}, {1, 2, 3, 4, 5, 6})}) == ErrorCode::kInvalidArgument);
  CHECK(code({HostTensor::from<double>({2, 3}, {1, 2, 3, 4, 5, 6})}) == ErrorCode::kInvalidArgument);
  HostTensor short_bytes = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  short_bytes.bytes.pop_back();
  Result<std::vector<HostTensor>> r = run_reference(g, std::vector<HostTensor>{short_bytes});
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message().find("'x'") != std::string::npos);
  using Named = std::map<std::string, HostTensor>;
  CHECK(run_reference(g, Named{}).status().code() == ErrorCode::kInvalidArgument);
  Result<std::vector<HostTensor>> extra =
      run_reference(g, Named{{"x", f32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"nope", f32({1}, {1})}});
  CHECK(extra.status().code() == ErrorCode::kInvalidArgument);
  CHECK(extra.status().message().find("'nope'") != std::string::npos);
  // A graph that fails verification is reported as such.
  ir::Graph broken = g;
  broken.values[static_cast<size_t>(broken.outputs[0])].type.shape = Shape{9};
  CHECK(!run_reference(broken, std::vector<HostTensor>{f32({2, 3}, {1, 2, 3, 4, 5, 6})}).ok());
}

// A KV-cache style graph: out = read_handle(kv) (before the write), then
// write_handle_at(kv, x, pos, axis 0).
ir::Graph cache_graph() {
  ir::GraphBuilder b("cache");
  b.handle("kv", DType::kF32, {4, 2});
  ir::ValueId x = b.input("x", DType::kF32, {1, 2});
  ir::ValueId pos = b.input("pos", DType::kI64, {});
  b.output(b.read_handle("kv"));
  b.write_handle_at("kv", x, pos, 0);
  Result<ir::Graph> g = b.build();
  REQUIRE(g.ok());
  return std::move(g).value();
}

TEST_CASE("reference/handles persist across runs and write_handle_at writes in place") {
  const ir::Graph g = cache_graph();
  ReferenceHandles handles;
  auto run = [&](float v, int64_t pos) {
    return run_reference(g, std::vector<HostTensor>{f32({1, 2}, {v, v + 1}), i64({}, {pos})}, &handles);
  };
  Result<std::vector<HostTensor>> first = run(10, 1);
  REQUIRE(first.ok());
  CHECK((*first)[0].as<float>() == std::vector<float>(8, 0.0f));  // a new handle starts at zero
  REQUIRE(handles.count("kv") == 1);
  CHECK(handles["kv"].as<float>() == std::vector<float>{0, 0, 10, 11, 0, 0, 0, 0});
  Result<std::vector<HostTensor>> second = run(20, 3);
  REQUIRE(second.ok());
  CHECK((*second)[0].as<float>() == std::vector<float>{0, 0, 10, 11, 0, 0, 0, 0});
  CHECK(handles["kv"].as<float>() == std::vector<float>{0, 0, 10, 11, 0, 0, 20, 21});
}

TEST_CASE("reference/write_handle_at position out of range leaves the handle unchanged") {
  const ir::Graph g = cache_graph();
  ReferenceHandles handles;
  handles["kv"] = f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  handles["unrelated"] = i32({1}, {5});
  const ReferenceHandles before = handles;
  for (int64_t pos : std::vector<int64_t>{4, -1, INT64_MAX, INT64_MIN}) {
    Result<std::vector<HostTensor>> r =
        run_reference(g, std::vector<HostTensor>{f32({1, 2}, {9, 9}), i64({}, {pos})}, &handles);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == ErrorCode::kOutOfBounds);
    CHECK(r.status().message().find("write_handle_at") != std::string::npos);
    CHECK(r.status().message().find("'kv'") != std::string::npos);
    CHECK(handles == before);
  }
  // The last row is in range.
  REQUIRE(run_reference(g, std::vector<HostTensor>{f32({1, 2}, {9, 9}), i64({}, {3})}, &handles).ok());
  CHECK(handles["kv"].as<float>() == std::vector<float>{1, 2, 3, 4, 5, 6, 9, 9});
  CHECK(handles["unrelated"] == before.at("unrelated"));
}

TEST_CASE("reference/write_handle_at on a middle axis via reference_node") {
  ir::GraphBuilder b;
  b.handle("h", DType::kI32, {2, 3, 2});
  ir::ValueId v = b.input("v", DType::kI32, {2, 2, 2});
  ir::ValueId pos = b.input("pos", DType::kI64, {});
  b.write_handle_at("h", v, pos, 1);
  ir::Graph g = b.build().value();
  const ir::Node& node = g.nodes.back();
  ReferenceHandles handles;
  handles["h"] = i32({2, 3, 2}, std::vector<int32_t>(12, 0));
  std::vector<int32_t> values = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t p = 1;
  const void* in[] = {values.data(), &p};
  REQUIRE(reference_node(g, node, in, std::span<void* const>(), &handles).ok());
  CHECK(handles["h"].as<int32_t>() == std::vector<int32_t>{0, 0, 1, 2, 3, 4, 0, 0, 5, 6, 7, 8});
  // pos 2 + 2 rows > 3: out of range, unchanged.
  const ReferenceHandles before = handles;
  p = 2;
  Status s = reference_node(g, node, in, std::span<void* const>(), &handles);
  CHECK(s.code() == ErrorCode::kOutOfBounds);
  CHECK(handles == before);
  // No state for the handle / no handle map at all.
  ReferenceHandles empty;
  CHECK(reference_node(g, node, in, std::span<void* const>(), &empty).code() == ErrorCode::kNotFound);
  CHECK(reference_node(g, node, in, std::span<void* const>(), nullptr).code() == ErrorCode::kInvalidArgument);
  // State of the wrong type.
  empty["h"] = f32({1}, {0});
  CHECK(reference_node(g, node, in, std::span<void* const>(), &empty).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("reference/write_handle replaces and read_handle copies") {
  ir::GraphBuilder b;
  b.handle("s", DType::kI64, {2});
  ir::ValueId x = b.input("x", DType::kI64, {2});
  ir::ValueId old = b.read_handle("s");
  b.write_handle("s", b.add(old, x));  // s += x
  b.output(old);
  ir::Graph g = b.build().value();
  ReferenceHandles handles;
  handles["s"] = i64({2}, {1, 2});
  for (int i = 0; i < 3; ++i) {
    REQUIRE(run_reference(g, std::vector<HostTensor>{i64({2}, {10, 20})}, &handles).ok());
  }
  CHECK(handles["s"].as<int64_t>() == std::vector<int64_t>{31, 62});
  // A handle state of the wrong type is rejected before anything runs.
  handles["s"] = i32({2}, {0, 0});
  Result<std::vector<HostTensor>> r = run_reference(g, std::vector<HostTensor>{i64({2}, {1, 1})}, &handles);
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message().find("'s'") != std::string::npos);
  // Without a handle map the state starts at zero and is dropped.
  Result<std::vector<HostTensor>> fresh = run_reference(g, std::vector<HostTensor>{i64({2}, {1, 1})});
  REQUIRE(fresh.ok());
  CHECK((*fresh)[0].as<int64_t>() == std::vector<int64_t>{0, 0});
}

TEST_CASE("reference/reference_node works on raw memory and checks its arguments") {
  ir::GraphBuilder b;
  ir::ValueId a = b.input("a", DType::kF32, {2, 2});
  ir::ValueId c = b.input("c", DType::kF32, {2});
  b.output(b.mul(a, c));
  ir::Graph g = b.build().value();
  const ir::Node& node = g.nodes[0];
  const float av[] = {1, 2, 3, 4};
  const float cv[] = {10, 100};
  float out[4] = {};
  const void* in[] = {av, cv};
  void* outs[] = {out};
  REQUIRE(reference_node(g, node, in, outs, nullptr).ok());
  CHECK(std::vector<float>(out, out + 4) == std::vector<float>{10, 200, 30, 400});
  // Wrong pointer counts, null pointers.
  CHECK(reference_node(g, node, std::span<const void* const>(in, 1), outs, nullptr).code() ==
        ErrorCode::kInvalidArgument);
  void* null_out[] = {nullptr};
  CHECK(reference_node(g, node, in, null_out, nullptr).code() == ErrorCode::kInvalidArgument);
  // A node whose stored output type disagrees with inference.
  ir::Graph bad = g;
  bad.values[static_cast<size_t>(bad.nodes[0].outputs[0])].type.dtype = DType::kF64;
  Status s = reference_node(bad, bad.nodes[0], in, outs, nullptr);
  CHECK(s.code() == ErrorCode::kVerifyError);
  CHECK(s.message().find("mul") != std::string::npos);
  // A node that is not in the graph.
  ir::Node stranger = node;
  stranger.id = 7;
  CHECK(reference_node(g, stranger, in, outs, nullptr).code() == ErrorCode::kInvalidArgument);
  // A view may run in place.
  ir::GraphBuilder vb;
  vb.output(vb.reshape(vb.input("x", DType::kF32, {4}), {2, 2}));
  ir::Graph vg = vb.build().value();
  float buf[4] = {1, 2, 3, 4};
  const void* vin[] = {buf};
  void* vout[] = {buf};
  REQUIRE(reference_node(vg, vg.nodes[0], vin, vout, nullptr).ok());
  CHECK(buf[3] == 4);
}

TEST_CASE("reference/f16 graph end to end") {
  ir::GraphBuilder b;
  ir::ValueId x = b.input("x", DType::kF16, {2, 2});
  ir::ValueId y = b.matmul(x, x);
  b.output(b.cast(b.gelu(y), DType::kF32));
  ir::Graph g = b.build().value();
  Result<std::vector<HostTensor>> out =
      run_reference(g, std::vector<HostTensor>{HostTensor::from_doubles(DType::kF16, {2, 2}, {1, 0, 0, -1})});
  REQUIRE(out.ok());
  // x.x = identity; gelu(1) = 0.8413447 rounded to f16 = 0.84130859375, gelu(0) = 0.
  CHECK((*out)[0].as<float>() == std::vector<float>{0.84130859375f, 0, 0, 0.84130859375f});
}

}  // namespace
