// DynamicProgram: one Session::compile over a GraphSource runs at every input shape it is
// given, one specialisation per key, cached (LRU), kernels shared through the JIT.
#include "carve/runtime/dynamic_program.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "carve/ir/builder.h"
#include "runtime_test_util.h"

using namespace carve;
using namespace carve::runtime;
using carve::runtime::testing::cpu_session_or_skip;

namespace {

std::vector<uint8_t> bytes_of(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// y = relu(x + bias) over x f32[rows, 8], rows from the input; bias a constant. When
// `learn_scale` is set, the source "learns" on its first specialisation that it needs the
// second input's value (a scale folded into the graph as a constant), as onnx::Model
// learns a shape input: its keys change then.
class ScaledRelu final : public GraphSource {
 public:
  explicit ScaledRelu(bool learn_scale) : learn_scale_(learn_scale) {}
  const std::string& source_name() const override { return name_; }
  const std::vector<std::string>& input_names() const override { return inputs_; }
  const std::vector<std::string>& output_names() const override { return outputs_; }

  Result<std::string> key(std::span<const Buffer> inputs) const override {
    std::string key = inputs[0].shape().to_string();
    if (needs_value_) key += "=" + std::to_string(value_of(inputs[1]));
    return key;
  }

  Result<GraphSpecialisation> specialise(std::span<const Buffer> inputs) override {
    ++specialised;
    if (inputs[0].dtype() != ir::DType::kF32 || inputs[0].shape().rank() != 2 || inputs[0].shape()[1] != 8)
      return Status(ErrorCode::kShapeError, "scaled_relu: x must be f32[rows, 8], got " + inputs[0].shape().to_string());
    if (learn_scale_) needs_value_ = true;
    ir::GraphBuilder b("scaled_relu");
    ir::ValueId x = b.input("x", ir::DType::kF32, inputs[0].shape());
    std::vector<float> bias(8, 1.0f);
    ir::ValueId sum = b.add(x, b.constant("bias", ir::DType::kF32, {8}, bytes_of(bias)));
    if (needs_value_) {
      std::vector<float> scale{value_of(inputs[1])};
      sum = b.mul(sum, b.constant("scale", ir::DType::kF32, {1}, bytes_of(scale)));
    } else {
      sum = b.mul(sum, b.input("s", ir::DType::kF32, {1}));
    }
    b.output(b.rename(b.relu(sum), "y"));
    CARVE_ASSIGN_OR_RETURN(ir::Graph graph, b.build());
    CARVE_ASSIGN_OR_RETURN(std::string k, key(inputs));
    return GraphSpecialisation{std::move(k), std::move(graph), {}};
  }

  std::atomic<int> specialised{0};

 private:
  static float value_of(const Buffer& b) { return (*b.span<float>())[0]; }
  bool learn_scale_;
  bool needs_value_ = false;
  std::string name_ = "scaled_relu";
  std::vector<std::string> inputs_{"x", "s"}, outputs_{"y"};
};

Buffer filled(ir::Shape shape, float first) {
  auto b = Buffer::allocate(cpu_allocator(), ir::DType::kF32, std::move(shape));
  REQUIRE(b.ok());
  auto data = *b->mutable_span<float>();
  for (size_t i = 0; i < data.size(); ++i) data[i] = first + static_cast<float>(i);
  return *b;
}

// relu((x + 1) * s) at element i of x = first + i.
void check_output(const Buffer& y, ir::Shape shape, float first, float s) {
  CHECK(y.shape() == shape);
  auto data = *y.span<float>();
  for (size_t i = 0; i < data.size(); ++i) {
    const float expected = std::max(0.0f, (first + static_cast<float>(i) + 1.0f) * s);
    REQUIRE(data[i] == expected);
  }
}

}  // namespace

TEST_CASE("runtime/dynamic_program/one_compile_runs_every_shape") {
  auto session = cpu_session_or_skip();
  if (!session) return;
  auto source = std::make_shared<ScaledRelu>(false);
  auto program = session->compile(source, {.max_specialisations = 2});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK(source->specialised == 0);  // compile() compiles nothing
  CHECK((*program)->input_names() == std::vector<std::string>{"x", "s"});
  for (int64_t rows : {1, 4, 1, 16}) {
    auto y = (*program)->run({{filled({rows, 8}, -3.0f), filled({1}, 2.0f)}});
    REQUIRE_MESSAGE(y.ok(), y.status().to_string());
    REQUIRE(y->size() == 1);
    check_output((*y)[0], {rows, 8}, -3.0f, 2.0f);
  }
  DynamicProgramStats stats = (*program)->stats();
  CHECK(stats.runs == 4);
  CHECK(stats.hits == 1);  // the second run at 1 row
  CHECK(stats.specialisations == 3);
  CHECK(stats.cached == 2);      // max_specialisations
  CHECK(stats.evictions == 1);   // 16 rows evicted 4, the least recently used
  CHECK(source->specialised == 3);

  // A kernel another specialisation compiled is not compiled again: 4 rows once more
  // (evicted) asks the JIT for kernels it already has.
  const jit::JitStats before = session->jit_stats();
  auto again = (*program)->specialise({{filled({4, 8}, 0.0f), filled({1}, 1.0f)}});
  REQUIRE(again.ok());
  CHECK(session->jit_stats().codegen_count == before.codegen_count);
  CHECK((*again)->input_types()[0].shape == ir::Shape({4, 8}));
}

TEST_CASE("runtime/dynamic_program/a_source_that_learns_drops_its_old_keys") {
  auto session = cpu_session_or_skip();
  if (!session) return;
  auto source = std::make_shared<ScaledRelu>(true);
  auto program = session->compile(source);
  REQUIRE(program.ok());
  // The first specialisation learns the scale: the program takes only x, s is a constant.
  auto y = (*program)->run({{filled({2, 8}, -1.0f), filled({1}, 3.0f)}});
  REQUIRE_MESSAGE(y.ok(), y.status().to_string());
  check_output((*y)[0], {2, 8}, -1.0f, 3.0f);
  auto specialised = (*program)->specialise({{filled({2, 8}, 0.0f), filled({1}, 3.0f)}});
  REQUIRE(specialised.ok());
  CHECK((*specialised)->input_names() == std::vector<std::string>{"x"});
  // Another scale is another key (its value is in it now).
  y = (*program)->run({{filled({2, 8}, -1.0f), filled({1}, 0.5f)}});
  REQUIRE(y.ok());
  check_output((*y)[0], {2, 8}, -1.0f, 0.5f);
  CHECK((*program)->stats().specialisations == 2);
  CHECK((*program)->stats().hits == 1);
  CHECK((*program)->stats().evictions == 0);
}

TEST_CASE("runtime/dynamic_program/errors_and_lifetime") {
  auto session = cpu_session_or_skip();
  if (!session) return;
  CHECK(session->compile(std::shared_ptr<GraphSource>()).status().code() == ErrorCode::kInvalidArgument);
  auto source = std::make_shared<ScaledRelu>(false);
  auto zero = session->compile(source, {.max_specialisations = 0});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().message().find("max_specialisations") != std::string::npos);

  auto program = session->compile(source);
  REQUIRE(program.ok());
  auto one = (*program)->run({{filled({2, 8}, 0.0f)}});
  REQUIRE_FALSE(one.ok());
  CHECK(one.status().code() == ErrorCode::kInvalidArgument);
  CHECK(one.status().message().find("'scaled_relu' takes 2 inputs, got 1") != std::string::npos);
  // The source's own error, as it words it; nothing cached.
  auto wrong = (*program)->run({{filled({2, 3}, 0.0f), filled({1}, 1.0f)}});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().code() == ErrorCode::kShapeError);
  CHECK(wrong.status().message().find("x must be f32[rows, 8]") != std::string::npos);
  CHECK((*program)->stats().cached == 0);

  // The program outlives its Session: it shares the JIT and still specialises.
  session.reset();
  auto y = (*program)->run({{filled({3, 8}, -2.0f), filled({1}, 1.0f)}});
  REQUIRE_MESSAGE(y.ok(), y.status().to_string());
  check_output((*y)[0], {3, 8}, -2.0f, 1.0f);
}

TEST_CASE("runtime/dynamic_program/concurrent_runs_at_several_shapes") {
  auto session = cpu_session_or_skip();
  if (!session) return;
  auto source = std::make_shared<ScaledRelu>(false);
  auto program = session->compile(source, {.max_specialisations = 3});
  REQUIRE(program.ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const int64_t rows = 1 + (t + i) % 3;
        auto y = (*program)->run({{filled({rows, 8}, -1.0f), filled({1}, 2.0f)}});
        if (!y.ok() || (*y)[0].shape() != ir::Shape({rows, 8}) || (*(*y)[0].span<float>())[0] != 0.0f) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK((*program)->stats().specialisations == 3);
  CHECK((*program)->stats().runs == 24);
}
