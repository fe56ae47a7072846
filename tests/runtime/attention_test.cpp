// Fused attention through a Session (jit/fusion.h): the program runs
// softmax(Q x K / s + mask) x V as one kernel even when V is computed after the first
// matmul (the group runs at the second matmul's step), writes the same bytes on 1 and 4
// threads, and stays within the reference's tolerance.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "carve/ir/builder.h"
#include "carve/jit/tiles.h"
#include "carve/reference/reference.h"
#include "runtime_test_util.h"

using namespace carve;
using ir::DType;

namespace {

constexpr int64_t kHeads = 2, kRows = 37, kKeys = 48, kDepth = 16;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> as_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// q [1, h, rows, d], k [1, h, d, keys], x [1, h, keys, d]; v = x * 0.5 is computed after
// the first matmul.
ir::Graph attention_graph() {
  ir::GraphBuilder b("attention");
  auto q = b.input("q", DType::kF32, {1, kHeads, kRows, kDepth});
  auto k = b.input("k", DType::kF32, {1, kHeads, kDepth, kKeys});
  auto x = b.input("x", DType::kF32, {1, kHeads, kKeys, kDepth});
  auto scores = b.matmul(q, k);
  auto half = b.constant("half", DType::kF32, {}, as_bytes({0.5f}));
  auto scale = b.constant("scale", DType::kF32, {}, as_bytes({4.0f}));
  std::vector<float> mask(static_cast<size_t>(kKeys), 0.0f);
  for (size_t j = 40; j < mask.size(); ++j) mask[j] = -10000.0f;  // padding keys
  auto masked = b.add(b.div(scores, scale), b.constant("mask", DType::kF32, {1, 1, 1, kKeys}, as_bytes(mask)));
  auto p = b.softmax(masked, -1);
  auto v = b.mul(x, half);
  b.output(b.rename(b.matmul(p, v), "o"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

}  // namespace

TEST_CASE("runtime/attention/one kernel, the same bytes on 1 and 4 threads, within the reference") {
  auto session = runtime::testing::cpu_session_or_skip(4);
  if (!session) return;
  const ir::Graph g = attention_graph();
  std::vector<std::vector<float>> data = {random_floats(kHeads * kRows * kDepth, 1),
                                          random_floats(kHeads * kDepth * kKeys, 2),
                                          random_floats(kHeads * kKeys * kDepth, 3)};
  std::vector<reference::HostTensor> host;
  std::vector<runtime::Buffer> inputs;
  for (const char* name : {"q", "k", "x"}) {
    const ir::Value* v = g.find_value(name);
    REQUIRE(v != nullptr);
    const std::vector<float>& d = data[host.size()];
    host.push_back(reference::HostTensor{v->type, as_bytes(d)});
    inputs.push_back(*runtime::Buffer::borrow(std::as_bytes(std::span(d)), DType::kF32, v->type.shape));
  }
  auto expected = reference::run_reference(g, host);
  REQUIRE_MESSAGE(expected.ok(), expected.status().to_string());
  const std::vector<double> want = expected->front().to_doubles();

  std::vector<std::vector<uint8_t>> outputs;
  for (bool sequential : {true, false}) {
    runtime::CompileOptions options;
    options.schedule.sequential = sequential;
    options.schedule.threads = 4;
    auto program = session->compile(g, options);
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    int attention_kernels = 0;
    for (const auto& kernel : (*program)->program().kernels)
      attention_kernels += jit::tiling::attention_shape((*program)->program().graph, kernel.group.nodes).valid;
    CHECK(attention_kernels == 1);
    auto out = (*program)->run(inputs);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    auto bytes = out->at(0).bytes();
    REQUIRE(bytes.ok());
    const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
    outputs.emplace_back(p, p + bytes->size());
  }
  CHECK(outputs[0] == outputs[1]);
  std::vector<float> got(want.size());
  REQUIRE(outputs[0].size() == got.size() * sizeof(float));
  std::memcpy(got.data(), outputs[0].data(), outputs[0].size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / (1e-6 + std::abs(want[i])));
  CHECK(worst < 1e-4);
}
