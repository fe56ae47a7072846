// plan_library_gemm (cuda_codegen.h): which matmul/gemm/conv2d groups map onto one
// strided-batched cuBLASLt GEMM, with what layout, and that the generated im2col and
// epilogue kernels around it compile (NVRTC, no GPU needed). The GPU runs of the same
// graphs are in cuda_session_gpu_test.cpp.
#include "cuda_cases.h"

namespace carve::jit::cuda {
namespace {

struct Planned {
  ir::Graph graph;
  std::vector<KernelGroup> groups;
};

Planned plan_groups(const std::function<void(GraphBuilder&)>& build_fn) {
  GraphBuilder b;
  build_fn(b);
  auto g = b.build();
  REQUIRE_MESSAGE(g.ok(), g.status().to_string());
  auto order = ir::execution_order(*g);
  REQUIRE(order.ok());
  auto groups = form_kernel_groups(*g, *order);
  REQUIRE_MESSAGE(groups.ok(), groups.status().to_string());
  return {std::move(*g), std::move(*groups)};
}

LibraryGemm plan_ok(const Planned& p, size_t group) {
  auto lib = plan_library_gemm(p.graph, p.groups.at(group));
  REQUIRE_MESSAGE(lib.ok(), lib.status().to_string());
  return *lib;
}

void compile_around(const LibraryGemm& lib) {
  NvrtcCompiler* nv = shared_nvrtc();
  for (const auto* src : {&lib.im2col, &lib.epilogue}) {
    if (!*src) continue;
    CHECK((*src)->source.find("extern \"C\" __global__") != std::string::npos);
    if (nv == nullptr) continue;
    auto bin = nv->compile((*src)->source, "sm_90");
    CHECK_MESSAGE(bin.ok(), bin.status().to_string() << "\n--- source ---\n" << (*src)->source);
  }
}

}  // namespace

TEST_CASE("cuda/codegen/library gemm: matmul with a fused epilogue, batch strides and vectors") {
  auto p = plan_groups([](GraphBuilder& b) {
    auto y = b.matmul(b.input("a", DType::kF32, {70, 33}), b.input("w", DType::kF32, {33, 65}));
    b.output(b.relu(b.add(y, b.input("bias", DType::kF32, {65}))));
  });
  LibraryGemm lib = plan_ok(p, 0);
  CHECK(lib.m == 70);
  CHECK(lib.n == 65);
  CHECK(lib.k == 33);
  CHECK(lib.batch == 1);
  CHECK(lib.a.ld == 33);
  CHECK(lib.b.ld == 65);
  REQUIRE(lib.epilogue);  // bias + relu run after the library's product
  CHECK(lib.epilogue->num_params == static_cast<int>(p.groups[0].operands.size()) + 1);
  CHECK(lib.epilogue->source.find("carve_product") != std::string::npos);
  CHECK(!lib.im2col);
  CHECK(lib.workspace_elements() == 70 * 65);
  compile_around(lib);

  auto batched = plan_groups([](GraphBuilder& b) {
    b.output(b.matmul(b.input("a", DType::kF32, {3, 5, 7}), b.input("b", DType::kF32, {7, 4})));
    b.output(b.matmul(b.input("v", DType::kF32, {7}), b.input("m", DType::kF32, {2, 7, 3})));
    b.output(b.matmul(b.input("p", DType::kF32, {2, 1, 5, 7}), b.input("q", DType::kF32, {3, 7, 4})));
  });
  LibraryGemm shared_b = plan_ok(batched, 0);
  // One B for every batch: the batch folds into M, one GEMM of 15 rows.
  CHECK(shared_b.batch == 1);
  CHECK(shared_b.m == 15);
  CHECK(shared_b.a.ld == 7);
  CHECK(shared_b.b.batch_stride == 0);
  CHECK(!shared_b.epilogue);            // bare product: the library writes the output
  CHECK(shared_b.product_operand >= 0);
  LibraryGemm vector = plan_ok(batched, 1);
  CHECK(vector.m == 1);
  CHECK(vector.batch == 2);
  CHECK(vector.a.batch_stride == 0);
  CHECK(vector.b.batch_stride == 21);
  // [2,1] against [3] broadcasts partially: no single stride, so the generated kernel runs.
  auto partial = plan_library_gemm(batched.graph, batched.groups.at(2));
  CHECK(partial.status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("cuda/codegen/library gemm: gemm transposes and alpha, beta, C in the epilogue") {
  auto p = plan_groups([](GraphBuilder& b) {
    b.output(b.gemm(b.input("a", DType::kF32, {9, 5}), b.input("b", DType::kF32, {6, 9}), b.input("c", DType::kF32, {6}),
                    true, true, 0.5, 2.0));
    b.output(b.gemm(b.input("a2", DType::kF32, {4, 3}), b.input("b2", DType::kF32, {3, 2})));
  });
  LibraryGemm t = plan_ok(p, 0);
  CHECK(t.a.transposed);
  CHECK(t.b.transposed);
  CHECK(t.m == 5);
  CHECK(t.n == 6);
  CHECK(t.k == 9);
  CHECK(t.a.ld == 5);
  CHECK(t.b.ld == 9);
  REQUIRE(t.epilogue);
  compile_around(t);
  LibraryGemm plain = plan_ok(p, 1);
  CHECK(!plain.epilogue);
  CHECK(!plain.a.transposed);
}

TEST_CASE("cuda/codegen/library gemm: conv2d through im2col, pointwise directly, depthwise not") {
  auto p = plan_groups([](GraphBuilder& b) {
    ir::Conv2dOptions o;
    o.strides = {2, 1};
    o.pads = {1, 2, 0, 1};
    o.dilations = {1, 2};
    auto y = b.conv2d(b.input("x", DType::kF32, {2, 4, 9, 10}), b.input("w", DType::kF32, {6, 4, 3, 3}),
                      b.input("b", DType::kF32, {6}), o);
    b.output(b.relu(y));
  });
  LibraryGemm conv = plan_ok(p, 0);
  CHECK(conv.batch == 2);
  CHECK(conv.m == 6);
  CHECK(conv.k == 36);
  CHECK(conv.a.batch_stride == 0);  // one weight matrix for both images
  CHECK(conv.b.operand == -1);      // the columns in the workspace
  REQUIRE(conv.im2col);
  CHECK(conv.column_source >= 0);
  CHECK(conv.column_elements == conv.batch * conv.k * conv.n);
  REQUIRE(conv.epilogue);
  CHECK(conv.workspace_elements() == conv.column_elements + conv.product_elements);
  compile_around(conv);

  auto pw = plan_groups([](GraphBuilder& b) {
    b.output(b.conv2d(b.input("x", DType::kF32, {2, 16, 5, 5}), b.input("w", DType::kF32, {8, 16, 1, 1})));
    ir::Conv2dOptions g;
    g.groups = 2;
    g.pads = {1, 1, 1, 1};
    b.output(b.conv2d(b.input("x2", DType::kF32, {1, 4, 6, 6}), b.input("w2", DType::kF32, {6, 2, 3, 3}), std::nullopt, g));
    ir::Conv2dOptions dw;
    dw.groups = 4;
    b.output(b.conv2d(b.input("x3", DType::kF32, {1, 4, 7, 7}), b.input("w3", DType::kF32, {4, 1, 3, 3}), std::nullopt, dw));
  });
  LibraryGemm pointwise = plan_ok(pw, 0);
  CHECK(!pointwise.im2col);
  CHECK(pointwise.b.operand >= 0);
  CHECK(pointwise.b.batch_stride == 16 * 25);
  CHECK(!pointwise.epilogue);
  LibraryGemm grouped = plan_ok(pw, 1);
  CHECK(grouped.batch == 2);
  CHECK(grouped.a.batch_stride == 3 * 18);  // group z's weights
  compile_around(grouped);
  auto depthwise = plan_library_gemm(pw.graph, pw.groups.at(2));
  CHECK(depthwise.status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("cuda/codegen/library gemm: other dtypes and aliased outputs keep the generated kernel") {
  auto p = plan_groups([](GraphBuilder& b) {
    b.output(b.matmul(b.input("a", DType::kF16, {8, 8}), b.input("b", DType::kF16, {8, 8})));
    b.output(b.matmul(b.input("c", DType::kI32, {8, 8}), b.input("d", DType::kI32, {8, 8})));
    b.output(b.matmul(b.input("e", DType::kF32, {8, 8}), b.input("f", DType::kF32, {8, 8})));
  });
  for (size_t i : {0, 1}) {
    auto lib = plan_library_gemm(p.graph, p.groups.at(i));
    CHECK(lib.status().code() == ErrorCode::kUnsupported);
    CHECK(lib.status().message().find("f32 only") != std::string::npos);
  }
  KernelGroup in_place = p.groups.at(2);
  in_place.may_alias = {{0, 2}};  // the output over its A
  auto lib = plan_library_gemm(p.graph, in_place);
  CHECK(lib.status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("cuda/codegen/the generated gemm takes 128x128 tiles once there are enough of them") {
  auto p = plan_groups([](GraphBuilder& b) {
    b.output(b.matmul(b.input("a", DType::kF32, {2100, 64}), b.input("b", DType::kF32, {64, 2000})));
    b.output(b.matmul(b.input("c", DType::kF32, {1024, 64}), b.input("d", DType::kF32, {64, 1024})));
    b.output(b.matmul(b.input("e", DType::kF64, {2100, 64}), b.input("f", DType::kF64, {64, 2000})));
  });
  auto big = generate_kernel(p.graph, p.groups.at(0));
  REQUIRE(big.ok());
  CHECK(big->launch.grid[0] == 16);  // ceil(2000 / 128)
  CHECK(big->launch.grid[1] == 17);  // ceil(2100 / 128)
  CHECK(big->source.find("acc[8][8]") != std::string::npos);
  auto small = generate_kernel(p.graph, p.groups.at(1));  // 64 tiles of 128: too few to fill a GPU
  REQUIRE(small.ok());
  CHECK(small->launch.grid[0] == 16);
  CHECK(small->source.find("acc[4][4]") != std::string::npos);
  auto wide = generate_kernel(p.graph, p.groups.at(2));  // double accumulators stay on 64-tiles
  REQUIRE(wide.ok());
  CHECK(wide->source.find("acc[4][4]") != std::string::npos);
  NvrtcCompiler* nv = shared_nvrtc();
  if (nv != nullptr) {
    auto bin = nv->compile(big->source, "sm_90");
    CHECK_MESSAGE(bin.ok(), bin.status().to_string());
  }
}

}  // namespace carve::jit::cuda
