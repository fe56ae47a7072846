// onnx::Model as a graph source: one Session::compile, one program per input shape (and
// per value of the inputs the import needs as values), cached; checked against PyTorch at
// three sequence lengths.
#include "carve/onnx/model.h"
#include "carve/runtime/dynamic_program.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "carve/runtime/npy.h"
#include "cli/cli.h"
#include "onnx_test_util.h"
#include "test_support.h"

namespace onnx = carve::onnx;
namespace ot = carve::onnx_test;
namespace rt = carve::runtime;
using carve::ErrorCode;

namespace {

std::unique_ptr<rt::Session> cpu_session() {
  auto session = rt::Session::create({});
  REQUIRE_MESSAGE(session.ok(), session.status().to_string());
  return std::move(*session);
}

rt::Buffer f32(carve::ir::Shape shape) {
  auto b = rt::Buffer::allocate(rt::cpu_allocator(), carve::ir::DType::kF32, std::move(shape));
  REQUIRE(b.ok());
  auto data = b->mutable_span<float>();
  REQUIRE(data.ok());
  for (size_t i = 0; i < data->size(); ++i) (*data)[i] = static_cast<float>(i);
  return *b;
}

rt::Buffer i64s(const std::vector<int64_t>& values) {
  auto b = rt::Buffer::allocate(rt::cpu_allocator(), carve::ir::DType::kI64,
                                carve::ir::Shape({static_cast<int64_t>(values.size())}));
  REQUIRE(b.ok());
  auto data = b->mutable_span<int64_t>();
  REQUIRE(data.ok());
  std::copy(values.begin(), values.end(), data->begin());
  return *b;
}

bool jit_available(const carve::Status& s) {
  if (s.code() != ErrorCode::kUnavailable) return true;
  carve::test::skip("Session::compile is unavailable (built without the CPU JIT): " + s.message());
  return false;
}

// reshape_by_input.onnx: y = Reshape(x f32[2,3], shape i64[rank]), the shape a graph input.
std::shared_ptr<onnx::Model> reshape_model() {
  auto model = onnx::Model::load_file(ot::model_path("reshape_by_input"));
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  return std::move(*model);
}

std::unique_ptr<rt::DynamicProgram> compile(rt::Session& session, std::shared_ptr<onnx::Model> model,
                                            size_t max_specialisations = 8) {
  auto program = session.compile(std::move(model), {.max_specialisations = max_specialisations});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  return std::move(*program);
}

}  // namespace

TEST_CASE("onnx/model/bert_matches_torch_at_three_lengths") {
  // bert_lengths: symbolic batch and length (Shape -> Range -> ... chains in the file),
  // 512 positions; torch's outputs at 32, 128 and 512 tokens (scripts/make_onnx_models.py).
  auto loaded = onnx::Model::load_file(ot::model_path("bert_lengths"));
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  std::shared_ptr<onnx::Model> model = std::move(*loaded);
  auto session = cpu_session();
  auto program = compile(*session, model);  // once, for every length
  auto inputs_at = [&](int tokens) {
    const std::string base = ot::models_dir() + "/bert_lengths.L" + std::to_string(tokens);
    std::vector<rt::Buffer> inputs;
    for (const std::string& name : program->input_names()) {
      auto b = rt::read_npy(base + ".input." + name + ".npy");
      REQUIRE_MESSAGE(b.ok(), b.status().to_string());
      inputs.push_back(*b);
    }
    return inputs;
  };
  for (int tokens : {32, 128, 512}) {
    const std::string base = ot::models_dir() + "/bert_lengths.L" + std::to_string(tokens);
    auto outputs = program->run(inputs_at(tokens));
    if (!outputs.ok() && !jit_available(outputs.status())) return;
    REQUIRE_MESSAGE(outputs.ok(), outputs.status().to_string());
    const auto& names = program->output_names();
    REQUIRE(outputs->size() == names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      auto expected = rt::read_npy(base + ".output." + names[i] + ".npy");
      REQUIRE(expected.ok());
      CHECK((*outputs)[i].shape() == expected->shape());
      const double error = ot::relative_error(ot::buffer_doubles((*outputs)[i]), ot::buffer_doubles(*expected));
      INFO(tokens << " tokens, output " << names[i]);
      CHECK(error <= 1e-4);
    }
  }
  CHECK(program->stats().specialisations == 3);
  CHECK(program->stats().cached == 3);
  CHECK(model->inputs_needed_at_import().empty());  // the lengths fold from shapes

  // Again at 128 tokens: the cached program, nothing imported or compiled.
  const rt::DynamicProgramStats before = program->stats();
  const int64_t imports = model->stats().imports;
  const int64_t codegen = session->jit_stats().codegen_count, requested = session->jit_stats().kernels_requested;
  REQUIRE(program->run(inputs_at(128)).ok());
  CHECK(program->stats().specialisations == before.specialisations);
  CHECK(model->stats().imports == imports);
  CHECK(program->stats().hits == before.hits + 1);
  CHECK(session->jit_stats().codegen_count == codegen);
  CHECK(session->jit_stats().kernels_requested == requested);
}

TEST_CASE("onnx/model/shape_input_is_imported_as_a_value") {
  // A plain import names the graph input the Reshape's shape is computed from.
  auto plain = onnx::import_model_file(ot::model_path("reshape_by_input"));
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.status().message().find("input 1 (shape) must be a constant: it is computed from graph input(s) "
                                      "'shape'") != std::string::npos);
  // Given the value, it is a constant and the graph's only input is x.
  onnx::ImportOptions options;
  options.input_values.insert_or_assign("shape", i64s({3, 2}));
  auto imported = onnx::import_model_file(ot::model_path("reshape_by_input"), options);
  REQUIRE_MESSAGE(imported.ok(), imported.status().to_string());
  int graph_inputs = 0;
  for (const auto& v : imported->graph.values) graph_inputs += v.kind == carve::ir::ValueKind::kInput ? 1 : 0;
  CHECK(graph_inputs == 1);

  auto model = reshape_model();
  auto session = cpu_session();
  auto program = compile(*session, model);
  for (auto [shape, expected] : {std::pair{std::vector<int64_t>{3, 2}, carve::ir::Shape({3, 2})},
                                 std::pair{std::vector<int64_t>{-1}, carve::ir::Shape({6})},
                                 std::pair{std::vector<int64_t>{3, 2}, carve::ir::Shape({3, 2})}}) {
    auto out = program->run({{f32({2, 3}), i64s(shape)}});
    if (!out.ok() && !jit_available(out.status())) return;
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].shape() == expected);
    auto values = (*out)[0].span<float>();
    REQUIRE(values.ok());
    CHECK((*values)[5] == 5.0f);
  }
  CHECK(model->inputs_needed_at_import() == std::vector<std::string>{"shape"});
  // [3,2] twice: two programs; the first run learned 'shape' (one retried import).
  CHECK(program->stats().specialisations == 2);
  CHECK(program->stats().hits == 1);
  CHECK(model->stats().imports == 3);
}

TEST_CASE("onnx/model/errors_name_the_input_or_node") {
  auto model = reshape_model();
  auto session = cpu_session();
  auto program = compile(*session, model);
  auto missing = program->run({{f32({2, 3})}});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kInvalidArgument);
  CHECK(missing.status().message().find("takes 2 inputs, got 1") != std::string::npos);
  // import_for names an unknown input.
  auto unknown = model->import_for({{"x", f32({2, 3})}, {"shape", i64s({6})}, {"z", f32({1})}});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("no input 'z'") != std::string::npos);
  // x is declared f32[2,3]: rank 1 does not fit.
  auto rank = program->run({{f32({6}), i64s({6})}});
  REQUIRE_FALSE(rank.ok());
  CHECK(rank.status().code() == ErrorCode::kShapeError);
  CHECK(rank.status().message().find("onnx input 'x'") != std::string::npos);
  // Shape values Reshape rejects: the node is named; nothing is cached.
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{-2, 3}, std::vector<int64_t>{4, 2}}) {
    auto out = program->run({{f32({2, 3}), i64s(bad)}});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("onnx node 'reshape' (Reshape)") != std::string::npos);
  }
  // A value input over ModelOptions::max_value_elements is refused, naming it.
  auto small = onnx::Model::load_file(ot::model_path("reshape_by_input"), {.max_value_elements = 1});
  REQUIRE(small.ok());
  auto small_program = compile(*session, std::move(*small));
  auto big = small_program->run({{f32({2, 3}), i64s({3, 2})}});
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().code() == ErrorCode::kUnsupported);
  CHECK(big.status().message().find("input 'shape i64[2]'") != std::string::npos);
  CHECK(program->stats().specialisations == 0);
  CHECK(program->stats().cached == 0);
  CHECK(onnx::Model::load_file(ot::models_dir() + "/no_such.onnx").status().code() == ErrorCode::kIoError);
}

TEST_CASE("onnx/model/cache_keeps_the_most_recent_programs") {
  auto session = cpu_session();
  auto program = compile(*session, reshape_model(), 2);
  auto run = [&](std::vector<int64_t> shape) {
    auto out = program->run({{f32({2, 3}), i64s(shape)}});
    return out.ok() ? carve::Status() : out.status();
  };
  auto first = run({6});
  if (!first.ok() && !jit_available(first)) return;
  REQUIRE_MESSAGE(first.ok(), first.to_string());
  REQUIRE(run({2, 3}).ok());
  REQUIRE(run({3, 2}).ok());  // evicts [6], the least recently used
  CHECK(program->stats().cached == 2);
  CHECK(program->stats().evictions == 1);
  REQUIRE(run({3, 2}).ok());  // still cached
  CHECK(program->stats().specialisations == 3);
  REQUIRE(run({6}).ok());     // compiled again, evicting [2,3]
  CHECK(program->stats().specialisations == 4);
  REQUIRE(run({3, 2}).ok());
  CHECK(program->stats().specialisations == 4);
  CHECK(program->stats().cached == 2);
}

TEST_CASE("onnx/cli/run_takes_a_shape_input_file") {
  // `carve run` imports through onnx::Model::import_for: the --input files fix the shapes,
  // and the shape file is imported as the Reshape's constant.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("carve_onnx_model_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  REQUIRE(rt::write_npy((dir / "x.npy").string(), f32({2, 3})).ok());
  REQUIRE(rt::write_npy((dir / "shape.npy").string(), i64s({3, 2})).ok());
  REQUIRE(rt::write_npy((dir / "bad.npy").string(), i64s({4, 2})).ok());
  const std::string model = ot::model_path("reshape_by_input");
  std::ostringstream out, err;
  const int rc = carve::cli::run({"run", model, "--input", "x=" + (dir / "x.npy").string(), "--input",
                                  "shape=" + (dir / "shape.npy").string(), "--output-dir", dir.string()},
                                 out, err);
  if (rc != 0 && err.str().find("Unavailable") != std::string::npos) {
    fs::remove_all(dir);
    carve::test::skip("carve run needs the CPU JIT");
    return;
  }
  CHECK_MESSAGE(rc == 0, err.str());
  auto y = rt::read_npy((dir / "y.npy").string());
  REQUIRE(y.ok());
  CHECK(y->shape() == carve::ir::Shape({3, 2}));
  std::ostringstream out2, err2;
  CHECK(carve::cli::run({"run", model, "--input", "x=" + (dir / "x.npy").string(), "--input",
                         "shape=" + (dir / "bad.npy").string()},
                        out2, err2) != 0);
  CHECK(err2.str().find("onnx node 'reshape' (Reshape)") != std::string::npos);
  fs::remove_all(dir);
}
