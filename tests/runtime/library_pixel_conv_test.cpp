// carve's one-pixel 1x1 conv (jit/dnnl/pixel_conv.cpp): squeeze-excite's two small convs
// with their activations. Checked: which groups it takes (named in explain, with its chunks of
// output channels), results within the reference's tolerance, the same bytes sequentially and
// at 1 and 2 threads, and the generated kernels within it too. Without oneDNN (CARVE_WITH_DNNL=OFF) every group is
// generated.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/jit/library_kernel.h"
#include "carve/reference/reference.h"
#include "carve/runtime/session.h"
#include "library_test_util.h"
#include "runtime_test_util.h"
#include "test_support.h"

using namespace carve;
using namespace carve::libtest;
using ir::DType;

namespace {

using Act = std::function<ir::ValueId(ir::GraphBuilder&, ir::ValueId)>;

struct SeCase {
  std::string name;
  Act squeeze_act, excite_act;
  bool bias = true;
  int64_t groups = 1;
  int64_t c = 32, mid = 8;
  bool taken = true;  // both convs, by the one-pixel conv
  int64_t chunks = 1;  // of output channels, in each conv
};

// x f32[1, c, 5, 5]: y = x * excite_act(conv1x1(squeeze_act(conv1x1(gap(x), c->mid)), mid->c)).
ir::Graph make_se(const SeCase& c) {
  ir::GraphBuilder b("se");
  auto x = b.input("x", DType::kF32, {1, c.c, 5, 5});
  uint32_t seed = 90;
  auto conv = [&](ir::ValueId in, int64_t ci, int64_t co, int64_t groups) {
    auto w = b.constant("w" + std::to_string(seed), DType::kF32, {co, ci / groups, 1, 1},
                        test::random_f32_bytes(co * ci / groups, seed));
    std::optional<ir::ValueId> bias;
    if (c.bias) bias = b.constant("b" + std::to_string(seed), DType::kF32, {co}, test::random_f32_bytes(co, seed + 50));
    ++seed;
    return b.conv2d(in, w, bias, {.groups = groups});
  };
  auto s = c.squeeze_act(b, conv(b.op1(ir::OpKind::kGlobalAvgPool, {x}), c.c, c.mid, c.groups));
  b.output(b.rename(b.mul(x, c.excite_act(b, conv(s, c.mid, c.c, 1))), "y"));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  return std::move(*g);
}

std::vector<SeCase> se_cases() {
  using B = ir::GraphBuilder;
  using V = ir::ValueId;
  const Act relu = [](B& b, V v) { return b.relu(v); };
  const Act sigmoid = [](B& b, V v) { return b.sigmoid(v); };
  const Act hard_sigmoid = [](B& b, V v) { return b.hard_sigmoid(v, 1.0 / 6, 0.5); };
  return {
      {"relu, sigmoid (efficientnet, regnet)", relu, sigmoid},
      {"relu, hard sigmoid (mobilenet_v3)", relu, hard_sigmoid},
      {"swish, sigmoid", [](B& b, V v) { return b.mul(v, b.sigmoid(v)); }, sigmoid},
      {"hard-swish the other way round, tanh", [](B& b, V v) { return b.mul(b.hard_sigmoid(v), v); },
       [](B& b, V v) { return b.tanh(v); }},
      {"silu, clip", [](B& b, V v) { return b.silu(v); }, [](B& b, V v) { return b.clip(v, -0.25, 0.5); }},
      {"no activation, no bias", [](B&, V v) { return v; }, sigmoid, false},
      {"wide: 1152 -> 48", relu, sigmoid, true, 1, 1152, 48},
      // Wide enough to stream their weights in chunks: 4 of 60 or 240 channels
      // (mobilenet_v3_large); 2 of 48 + 56 and 496 + 504 (not whole 16-channel lines).
      {"chunked: 960 -> 240 (mobilenet_v3_large)", relu, hard_sigmoid, true, 1, 960, 240, true, 4},
      {"chunked, uneven: 1000 -> 104", relu, sigmoid, true, 1, 1000, 104, true, 2},
      // Left to the others: a grouped squeeze conv (the excite conv is still taken).
      {"grouped squeeze", relu, sigmoid, true, 2, 32, 8, false},
  };
}

}  // namespace

TEST_CASE("runtime/library/squeeze-excite convs of one pixel: taken, within the reference's tolerance") {
  for (const SeCase& c : se_cases()) {
    CAPTURE(c.name);
    const ir::Graph g = make_se(c);
    const int64_t taken =
        check_run(g, tensor({1, c.c, 5, 5}, test::random_f32_bytes(c.c * 25, 3)), {}, /*generated_too=*/true);
    if (taken < 0) return;
    if (jit::library_provider_name().empty()) {
      CHECK(taken == 0);
      continue;
    }
    auto session = runtime::testing::cpu_session_or_skip(1);
    auto program = session->compile(g, {});
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const std::string text = (*program)->explain();
    const std::string chunks = c.chunks > 1 ? " x" + std::to_string(c.chunks) + " channel chunks\n" : "\n";
    const std::string squeeze = "carve one-pixel conv " + std::to_string(c.c) + "->" + std::to_string(c.mid) + chunks;
    const std::string excite = "carve one-pixel conv " + std::to_string(c.mid) + "->" + std::to_string(c.c) + chunks;
    CHECK((text.find(squeeze) != std::string::npos) == c.taken);
    CHECK(text.find(excite) != std::string::npos);
  }
}

TEST_CASE("runtime/library/a one-pixel conv's weight and bias are held once, by the kernel") {
  auto session = runtime::testing::cpu_session_or_skip(1);
  if (!session || jit::library_provider_name().empty()) return;
  const SeCase c = se_cases().front();
  auto program = session->compile(make_se(c), {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  CHECK((*program)->program().released_constant_bytes == 2 * (c.c * c.mid) * 4 + (c.c + c.mid) * 4);
}
