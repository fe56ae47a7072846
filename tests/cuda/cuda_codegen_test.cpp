// CUDA code generation for every op family and dtype. Here (no GPU needed) every generated
// kernel is compiled by NVRTC for sm_90, which checks the generated CUDA C for real. With a
// device, the cuda/gpu/... cases also run each graph on the GPU and compare with the
// reference interpreter on random inputs (they skip without one).
#include "cuda_cases.h"

namespace carve::jit::cuda {

using namespace carve::runtime::cuda;
using namespace carve::reference;

TEST_CASE("cuda/codegen/kernel signature and launch") {
  GraphBuilder b;
  auto x = b.input("x", DType::kF16, {4, 8});
  auto bias = b.input("bias", DType::kF16, {8});
  b.output(b.gelu(b.add(x, bias)));
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  auto groups = form_kernel_groups(*g, *order);
  REQUIRE(groups.ok());
  REQUIRE(groups->size() == 1);
  auto src = generate_kernel(*g, (*groups)[0]);
  REQUIRE_MESSAGE(src.ok(), src.status().to_string());
  CHECK(src->entry == "carve_kernel");
  CHECK(src->family == "elementwise");
  CHECK(src->num_params == 3);
  CHECK(src->source.find("carve_kernel(const unsigned short* __restrict__ p0, const unsigned short* __restrict__ p1, "
                         "unsigned short* __restrict__ p2)") != std::string::npos);
  CHECK(src->launch.block[0] == 256);
  CHECK(src->launch.grid[0] == 1);
  // No names in the source: identical groups share one compiled kernel.
  CHECK(src->source.find("gelu_1") == std::string::npos);
  auto again = generate_kernel(*g, (*groups)[0]);
  REQUIRE(again.ok());
  CHECK(again->source == src->source);
  // In-place operands lose __restrict__.
  KernelGroup aliased = (*groups)[0];
  aliased.may_alias = {{0, 2}};
  auto a = generate_kernel(*g, aliased);
  REQUIRE(a.ok());
  CHECK(a->source.find("const unsigned short* p0") != std::string::npos);
  CHECK(a->source.find("unsigned short* p2") != std::string::npos);
}

namespace {

// The one kernel of a single-group graph (fails the test otherwise).
std::string only_kernel_source(const ir::Graph& g) {
  auto order = ir::execution_order(g);
  auto groups = form_kernel_groups(g, *order);
  REQUIRE(groups.ok());
  REQUIRE(groups->size() == 1);
  auto src = generate_kernel(g, (*groups)[0]);
  REQUIRE_MESSAGE(src.ok(), src.status().to_string());
  return src->source;
}

}  // namespace

TEST_CASE("cuda/codegen/rounding, fmod and trigonometric ops: exact in float, libm-like in double") {
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {16});
  auto t = b.op1(ir::OpKind::kRound, {b.op1(ir::OpKind::kTrunc, {x})});
  t = b.op1(ir::OpKind::kAcosh, {b.op1(ir::OpKind::kSin, {b.fmod(t, x)})});
  b.output(t);
  auto g = b.build();
  REQUIRE(g.ok());
  const std::string src = only_kernel_source(*g);
  CHECK(src.find("rintf(") != std::string::npos);  // half to even, not roundf (half away)
  CHECK(src.find("roundf(") == std::string::npos);
  CHECK(src.find("truncf(") != std::string::npos);
  CHECK(src.find("fmodf(") != std::string::npos);
  CHECK(src.find("sin((double)") != std::string::npos);
  CHECK(src.find("acosh((double)") != std::string::npos);

  GraphBuilder bi;
  auto i = bi.input("i", DType::kI32, {16});
  bi.output(bi.op1(ir::OpKind::kFloor, {bi.fmod(i, bi.input("j", DType::kI32, {16}))}));
  auto gi = bi.build();
  REQUIRE(gi.ok());
  const std::string isrc = only_kernel_source(*gi);
  CHECK(isrc.find("carve_irem(") != std::string::npos);
  CHECK(isrc.find("floor") == std::string::npos);  // an identity on integers
}

TEST_CASE("cuda/codegen/write_handle_at checks its position and reports through the error word") {
  GraphBuilder b;
  b.handle("cache", DType::kF32, {4, 2});
  b.write_handle_at("cache", b.input("row", DType::kF32, {1, 2}), b.input("pos", DType::kI64, {}), 0);
  b.output(b.neg(b.input("x", DType::kF32, {2})));
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto order = ir::execution_order(*g);
  auto groups = form_kernel_groups(*g, *order);
  REQUIRE(groups.ok());
  int checked = 0;
  for (const KernelGroup& group : *groups) {
    auto src = generate_kernel(*g, group);
    REQUIRE_MESSAGE(src.ok(), src.status().to_string());
    const bool writes_at = g->node(group.nodes.front()).op == ir::OpKind::kWriteHandleAt;
    CHECK(src->error_word == writes_at);
    CHECK((src->source.find("__device__ long long carve_error[2];") != std::string::npos) == writes_at);
    if (!writes_at) continue;
    ++checked;
    CHECK(src->source.find("if (pos < 0 || pos > 3LL)") != std::string::npos);  // 4 rows, 1 written: max 3
    CHECK(src->num_params == static_cast<int>(group.operands.size()));           // no extra parameter
  }
  CHECK(checked == 1);
}

TEST_CASE("cuda/codegen/malformed groups are rejected") {
  GraphBuilder b;
  auto x = b.input("x", DType::kF32, {4});
  b.output(b.relu(x));
  auto g = b.build();
  REQUIRE(g.ok());
  KernelGroup empty;
  empty.name = "empty";
  CHECK(generate_kernel(*g, empty).status().code() == ErrorCode::kInvalidArgument);
  KernelGroup bad;
  bad.name = "bad";
  bad.nodes = {42};
  CHECK(generate_kernel(*g, bad).status().code() == ErrorCode::kInvalidArgument);
  auto order = ir::execution_order(*g);
  auto groups = form_kernel_groups(*g, *order);
  REQUIRE(groups.ok());
  CodegenOptions o;
  o.block_size = 100;
  CHECK(generate_kernel(*g, (*groups)[0], o).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("cuda/codegen/matmul uses the same fusion groups as the CPU JIT") {
  GraphBuilder b;
  auto y = b.matmul(b.input("a", DType::kF32, {8, 4}), b.input("w", DType::kF32, {4, 16}));
  b.output(b.relu(b.add(y, b.input("bias", DType::kF32, {16}))));
  auto g = b.build();
  REQUIRE(g.ok());
  auto order = ir::execution_order(*g);
  auto groups = form_kernel_groups(*g, *order);
  REQUIRE(groups.ok());
  REQUIRE(groups->size() == 1);
  auto src = generate_kernel(*g, (*groups)[0]);
  REQUIRE_MESSAGE(src.ok(), src.status().to_string());
  CHECK(src->family == "gemm");
  // a, w, bias, the output, and the CPU emitter's scratch (passed, unused on the GPU).
  CHECK(src->num_params == static_cast<int>((*groups)[0].operands.size()));
  CHECK(src->source.find("__shared__") != std::string::npos);
}

TEST_CASE("cuda/nvrtc/elementwise kernels compile") { run_nvrtc_family(elementwise_cases(), "elementwise"); }
TEST_CASE("cuda/nvrtc/layout and state kernels compile") { run_nvrtc_family(layout_cases(), "layout"); }
TEST_CASE("cuda/nvrtc/reduction and norm kernels compile") { run_nvrtc_family(reduction_cases(), "reductions"); }
TEST_CASE("cuda/nvrtc/pool kernels compile") { run_nvrtc_family(pool_cases(), "pools"); }
TEST_CASE("cuda/nvrtc/matmul and gemm kernels compile") { run_nvrtc_family(matmul_cases(), "matmul"); }
TEST_CASE("cuda/nvrtc/conv kernels compile") { run_nvrtc_family(conv_cases(), "conv"); }

TEST_CASE("cuda/nvrtc/generated kernels compile for other archs") {
  if (shared_nvrtc() == nullptr) {
    carve::test::skip("no NVRTC: " + nvrtc_status().message());
    return;
  }
  std::vector<Case> cases = {matmul_cases()[0], elementwise_cases()[2 * 0 + 2], reduction_cases()[1]};
  for (const char* arch : {"sm_75", "sm_80", "sm_89", "sm_120", "sm_999"}) {
    CAPTURE(arch);
    CHECK(compile_cases(cases, arch) >= 3);
  }
}

TEST_CASE("cuda/gpu/elementwise matches the reference") { run_gpu_family(elementwise_cases()); }
TEST_CASE("cuda/gpu/layout and state ops match the reference") { run_gpu_family(layout_cases()); }
TEST_CASE("cuda/gpu/reductions and norms match the reference") { run_gpu_family(reduction_cases()); }
TEST_CASE("cuda/gpu/pools match the reference") { run_gpu_family(pool_cases()); }
TEST_CASE("cuda/gpu/matmul and gemm match the reference") { run_gpu_family(matmul_cases()); }
TEST_CASE("cuda/gpu/conv matches the reference") { run_gpu_family(conv_cases()); }

}  // namespace carve::jit::cuda
