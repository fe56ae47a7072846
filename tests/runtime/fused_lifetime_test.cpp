// A fused group spans several nodes: its operands must stay live (and unshared) for the
// whole group. Regression: attention scores as matmul -> div -> where fused into one
// tiled kernel whose output the planner placed over the matmul's inputs, which the
// first node of the group read last (found through the ONNX GPT model).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "carve/ir/builder.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "test_support.h"

using namespace carve;
using ir::DType;

namespace {

reference::HostTensor random_tensor(ir::Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(*shape.num_elements()));
  for (float& v : values) v = dist(rng);
  return reference::HostTensor::from<float>(std::move(shape), values);
}

std::vector<uint8_t> bytes_of(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// x [1,12,48] -> split q,k,v -> heads -> q @ k^T / s, causal where -> softmax -> @ v.
ir::Graph attention_graph() {
  ir::GraphBuilder b("attention");
  const ir::ValueId x = b.input("x", DType::kF32, {1, 12, 48});
  std::vector<uint8_t> mask(144);
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 12; ++j) mask[static_cast<size_t>(i * 12 + j)] = j > i;
  const ir::ValueId causal = b.constant("causal", DType::kBool, {12, 12}, mask);
  const ir::ValueId scale = b.constant("scale", DType::kF32, {}, bytes_of({2.8284271f}));
  const ir::ValueId neg_inf = b.constant("neg_inf", DType::kF32, {}, bytes_of({-INFINITY}));
  const auto parts = b.split(b.relu(x), 2, {16, 16, 16});
  auto heads = [&](ir::ValueId t, std::vector<int64_t> perm) {
    return b.transpose(b.reshape(t, {1, 12, 2, 8}), std::move(perm));
  };
  const ir::ValueId q = heads(parts[0], {0, 2, 1, 3}), k = heads(parts[1], {0, 2, 3, 1});
  const ir::ValueId v = heads(parts[2], {0, 2, 1, 3});
  const ir::ValueId scores = b.where(causal, neg_inf, b.div(b.matmul(q, k), scale));
  b.output(b.matmul(b.softmax(scores, -1), v));
  return *b.build();
}

}  // namespace

TEST_CASE("runtime/fusion/group_operands_live_across_the_group") {
  const ir::Graph graph = attention_graph();
  const reference::HostTensor x = random_tensor({1, 12, 48}, 7);
  auto expected = reference::run_reference(graph, {x});
  REQUIRE(expected.ok());
  auto session = runtime::Session::create();
  if (!session.ok() && session.status().code() == ErrorCode::kUnavailable) {
    carve::test::skip("no CPU JIT in this build: " + session.status().to_string());
    return;
  }
  REQUIRE(session.ok());
  auto program = (*session)->compile(graph, {});
  if (!program.ok() && program.status().code() == ErrorCode::kUnavailable) {
    carve::test::skip("Session::compile is unavailable (built without the CPU JIT)");
    return;
  }
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(x.bytes.data()), x.bytes.size());
  std::vector<runtime::Buffer> inputs{*runtime::Buffer::borrow(bytes, DType::kF32, x.type.shape)};
  auto outputs = (*program)->run(inputs);
  REQUIRE(outputs.ok());
  auto actual = (*outputs)[0].span<float>();
  REQUIRE(actual.ok());
  const std::vector<float> want = (*expected)[0].as<float>();
  REQUIRE(actual->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK((*actual)[i] == doctest::Approx(want[i]).epsilon(1e-5));
}
