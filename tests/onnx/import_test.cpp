// Import behaviour other than numerics: clear errors (unsupported operator or attribute,
// missing file, malformed protobuf), external-data weights mapped in place, --no-weights
// planning, folding of shape arithmetic, and the CLI on .onnx files.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "carve/runtime/npy.h"
#include "carve/runtime/session.h"
#include "cli/cli.h"
#include "onnx_test_util.h"
#include "test_support.h"

namespace fs = std::filesystem;
using carve::ErrorCode;
namespace onnx = carve::onnx;
namespace ot = carve::onnx_test;

namespace {

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("carve_onnx_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream s;
  s << file.rdbuf();
  return s.str();
}

fs::path write_file(const std::string& name, const std::string& bytes) {
  fs::path path = temp_dir() / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

struct CliRun {
  int code;
  std::string out, err;
};

CliRun carve_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = carve::cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace

TEST_CASE("onnx/errors/models_name_node_and_what_is_missing") {
  std::ifstream list(ot::models_dir() + "/errors.txt");
  REQUIRE(list);
  int cases = 0;
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto bar = line.find('|');
    REQUIRE(bar != std::string::npos);
    const std::string name = line.substr(0, bar), expected = line.substr(bar + 1);
    auto model = onnx::import_model_file(ot::model_path(name));
    INFO(name << ": " << model.status().to_string());
    REQUIRE_FALSE(model.ok());
    CHECK(model.status().message().find(expected) != std::string::npos);
    ++cases;
  }
  CHECK(cases == 5);
}

TEST_CASE("onnx/errors/missing_file") {
  auto model = onnx::import_model_file("/nonexistent/carve/model.onnx");
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == ErrorCode::kIoError);
  CHECK(model.status().message().find("/nonexistent/carve/model.onnx") != std::string::npos);
}

TEST_CASE("onnx/errors/malformed_protobuf") {
  for (const std::string& bytes : {std::string("this is not a protobuf \xff\xff\xff\xff", 27), std::string()}) {
    fs::path path = write_file("garbage.onnx", bytes);
    auto model = onnx::import_model_file(path.string());
    REQUIRE_FALSE(model.ok());
    CHECK(model.status().code() == ErrorCode::kParseError);
    CHECK(model.status().message().find("garbage.onnx") != std::string::npos);
  }
  // A truncated real model: protobuf fails to parse or the graph is incomplete, never a crash.
  const std::string whole = read_file(ot::model_path("resnet_tiny"));
  for (size_t cut : {size_t{7}, whole.size() / 3, whole.size() - 5}) {
    fs::path path = write_file("truncated.onnx", whole.substr(0, cut));
    auto model = onnx::import_model_file(path.string());
    INFO(cut << ": " << model.status().to_string());
    CHECK_FALSE(model.ok());
  }
}

TEST_CASE("onnx/errors/missing_external_data_file") {
  const fs::path dir = temp_dir() / "no_bin";
  fs::create_directories(dir);
  fs::copy_file(ot::model_path("external_weights"), dir / "external_weights.onnx", fs::copy_options::overwrite_existing);
  auto model = onnx::import_model_file((dir / "external_weights.onnx").string());
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == ErrorCode::kIoError);
  CHECK(model.status().message().find("external_weights.bin") != std::string::npos);
}

TEST_CASE("onnx/weights/external_data_is_mapped_not_copied") {
  auto model = onnx::import_model_file(ot::model_path("external_weights"));
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  // w and b sit at 64-byte aligned offsets: mapped. `odd` is misaligned for f32: copied.
  REQUIRE(model->mapped_weights.size() == 2);
  for (const char* name : {"w", "b"}) {
    INFO(name);
    REQUIRE(model->mapped_weights.contains(name));
    const auto& buffer = model->mapped_weights.at(name);
    CHECK(buffer.storage()->ownership() == carve::runtime::Ownership::kFileBacked);
    CHECK_FALSE(buffer.is_mutable());
    const carve::ir::Value* v = model->graph.find_value(name);
    REQUIRE(v != nullptr);
    CHECK_FALSE(v->data.has_value());
  }
  const carve::ir::Value* odd = model->graph.find_value("odd");
  REQUIRE(odd != nullptr);
  CHECK(odd->data.has_value());

  // Compiled programs use the mapping itself as the constant's memory.
  auto session = carve::runtime::Session::create();
  REQUIRE(session.ok());
  carve::runtime::CompileOptions options;
  options.constants = model->mapped_weights;
  auto program = (*session)->compile(model->graph, options);
  if (!program.ok() && program.status().code() == ErrorCode::kUnavailable) {
    carve::test::skip("Session::compile is unavailable (built without the CPU JIT)");
    return;
  }
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const auto& p = (*program)->program();
  int mapped = 0;
  for (size_t i = 0; i < p.constants.size(); ++i) {
    const auto& name = p.graph.value(p.constants[i]).name;
    if (!model->mapped_weights.contains(name)) continue;
    REQUIRE(p.constant_buffers[i].has_value());
    CHECK(p.constant_buffers[i]->storage_id() == model->mapped_weights.at(name).storage_id());
    ++mapped;
  }
  CHECK(mapped == 2);
}

TEST_CASE("onnx/weights/compile_without_bound_weights_fails_clearly") {
  auto model = onnx::import_model_file(ot::model_path("external_weights"));
  REQUIRE(model.ok());
  auto session = carve::runtime::Session::create();
  REQUIRE(session.ok());
  auto program = (*session)->compile(model->graph, {});
  REQUIRE_FALSE(program.ok());
  if (program.status().code() == ErrorCode::kUnavailable) return;
  CHECK(program.status().message().find("'w'") != std::string::npos);
}

TEST_CASE("onnx/weights/no_weights_reads_structure_only") {
  auto with = onnx::import_model_file(ot::model_path("resnet_tiny"));
  auto without = onnx::import_model_file(ot::model_path("resnet_tiny"), {.load_weights = false});
  REQUIRE(with.ok());
  REQUIRE_MESSAGE(without.ok(), without.status().to_string());
  // Only float tensors of at most 64 elements (scalars, tiny BatchNorm vectors) are read.
  int64_t with_bytes = 0, without_bytes = 0, unread = 0;
  for (const auto& v : with->graph.values) with_bytes += v.data ? static_cast<int64_t>(v.data->size()) : 0;
  for (const auto& v : without->graph.values) {
    if (v.kind != carve::ir::ValueKind::kConstant) continue;
    INFO(v.name);
    without_bytes += v.data ? static_cast<int64_t>(v.data->size()) : 0;
    unread += !v.data.has_value();
    if (*v.type.shape.num_elements() > 64) CHECK_FALSE(v.data.has_value());
  }
  CHECK(with_bytes > 10000);
  CHECK(without_bytes * 10 < with_bytes);
  CHECK(unread >= 9);  // the conv weights and the classifier
  CHECK(with->graph.num_nodes() == without->graph.num_nodes());
}

TEST_CASE("onnx/weights/no_weights_imports_every_model") {
  // Every committed model imports without weights too (a regression: unknown float
  // constants were once confused with folded ones freed earlier at the same address).
  std::ifstream manifest(ot::models_dir() + "/manifest.txt");
  REQUIRE(manifest);
  for (std::string name; std::getline(manifest, name);) {
    if (name.empty()) continue;
    auto with = onnx::import_model_file(ot::model_path(name));
    auto without = onnx::import_model_file(ot::model_path(name), {.load_weights = false});
    INFO(name << ": " << without.status().to_string());
    REQUIRE(with.ok());
    REQUIRE(without.ok());
    // Without weights, subexpressions of weights alone (e.g. a position embedding of
    // constant positions) cannot fold, so there may be more nodes; the outputs agree.
    CHECK(without->graph.num_nodes() >= with->graph.num_nodes());
    REQUIRE(with->graph.outputs.size() == without->graph.outputs.size());
    for (size_t k = 0; k < with->graph.outputs.size(); ++k)
      CHECK(with->graph.value(with->graph.outputs[k]).type == without->graph.value(without->graph.outputs[k]).type);
  }
}

TEST_CASE("onnx/fold/shape_arithmetic_leaves_no_nodes") {
  // bert_tiny computes positions with Shape -> Gather -> Unsqueeze -> Expand chains (and
  // bert_dynamic, exported with symbolic dims, with Shape -> Range -> Concat -> Reshape),
  // forms_opset15 has Shape -> Squeeze -> Range -> Cast and ConstantOfShape: all folded,
  // so no node reads only constants and no graph value is a shape.
  for (const char* name : {"bert_tiny", "bert_dynamic", "forms_opset15"}) {
    auto model = onnx::import_model_file(ot::model_path(name));
    REQUIRE_MESSAGE(model.ok(), model.status().to_string());
    CHECK(model->folded_nodes > 0);
    for (const auto& node : model->graph.nodes) {
      INFO(name << ": " << node.name);
      bool all_constant = true;
      for (auto v : node.inputs) all_constant = all_constant && model->graph.value(v).kind == carve::ir::ValueKind::kConstant;
      CHECK_FALSE(all_constant);
    }
  }
}

TEST_CASE("onnx/import/pow_by_constant_two_is_a_multiply") {
  // bert_tiny's decomposed LayerNorms square with Pow(x, 2.0) (7 Pow nodes in the file):
  // imported as x * x (bit-identical, no libm pow per element) when not fused into
  // layer_norm; its models_test cases still match torch.
  auto model = onnx::import_model_file(ot::model_path("bert_tiny"), {.fuse_patterns = false});
  REQUIRE_MESSAGE(model.ok(), model.status().to_string());
  int pows = 0, squares = 0;
  for (const auto& node : model->graph.nodes) {
    if (node.op == carve::ir::OpKind::kPow) ++pows;
    if (node.op == carve::ir::OpKind::kMul && node.inputs.size() == 2 && node.inputs[0] == node.inputs[1]) ++squares;
  }
  CHECK(pows == 0);
  CHECK(squares > 0);
}

TEST_CASE("onnx/import/decomposed_layer_norm_is_one_op") {
  // PyTorch's opset < 17 exports write nn.LayerNorm as ReduceMean, Sub, Pow, ReduceMean,
  // Add, Sqrt, Div, Mul, Add (5 in each of bert_tiny, gpt_tiny_14 and bert_dynamic, which
  // has symbolic dims): each is imported as one layer_norm. models_test checks they
  // still match torch.
  auto count = [](const carve::ir::Graph& g, carve::ir::OpKind op) {
    return std::count_if(g.nodes.begin(), g.nodes.end(), [&](const auto& n) { return n.op == op; });
  };
  for (auto [name, expected] : {std::pair{"bert_tiny", 5}, std::pair{"gpt_tiny_14", 5}, std::pair{"bert_dynamic", 5}}) {
    INFO(name);
    auto fused = ot::import_for_inputs(name);
    REQUIRE_MESSAGE(fused.ok(), fused.status().to_string());
    CHECK(fused->fused_patterns == expected);
    CHECK(count(fused->graph, carve::ir::OpKind::kLayerNorm) == expected);
    CHECK(count(fused->graph, carve::ir::OpKind::kSqrt) == 0);
    CHECK(count(fused->graph, carve::ir::OpKind::kReduceMean) == 0);
    auto plain = onnx::import_model_file(ot::model_path(name), {.fuse_patterns = false});
    REQUIRE_MESSAGE(plain.ok(), plain.status().to_string());
    CHECK(plain->fused_patterns == 0);
    CHECK(count(plain->graph, carve::ir::OpKind::kLayerNorm) == 0);
    CHECK(count(plain->graph, carve::ir::OpKind::kReduceMean) == 2 * expected);
  }
  // forms_layernorm: `a` (Mul(d, d), eps an initializer, gamma/beta first) is fused; `b`,
  // whose mean is also a graph output, is not.
  auto forms = onnx::import_model_file(ot::model_path("forms_layernorm"));
  REQUIRE_MESSAGE(forms.ok(), forms.status().to_string());
  CHECK(forms->fused_patterns == 1);
  CHECK(count(forms->graph, carve::ir::OpKind::kLayerNorm) == 1);
  CHECK(count(forms->graph, carve::ir::OpKind::kReduceMean) == 2);
}

TEST_CASE("onnx/import/zero_pad_before_avg_pool_is_one_op") {
  // forms_pad_pool: `a` and `b` are fused into avg_pool with pads and count_include_pad;
  // `c` (pad value 0.5) and `d` (its padded tensor is a graph output) keep their Pad.
  // models_test checks the outputs against numpy.
  auto count = [](const carve::ir::Graph& g, carve::ir::OpKind op) {
    return std::count_if(g.nodes.begin(), g.nodes.end(), [&](const auto& n) { return n.op == op; });
  };
  auto fused = onnx::import_model_file(ot::model_path("forms_pad_pool"));
  REQUIRE_MESSAGE(fused.ok(), fused.status().to_string());
  CHECK(fused->fused_patterns == 2);
  CHECK(count(fused->graph, carve::ir::OpKind::kPad) == 2);
  CHECK(count(fused->graph, carve::ir::OpKind::kAvgPool) == 4);
  const carve::ir::Node& b = fused->graph.node(fused->graph.find_value("b")->producer);
  CHECK(b.op == carve::ir::OpKind::kAvgPool);
  CHECK(b.attrs.at("pads").as_ints() == std::vector<int64_t>{1, 2, 2, 1});
  CHECK(b.attrs.at("count_include_pad").as_int() == 1);
  auto plain = onnx::import_model_file(ot::model_path("forms_pad_pool"), {.fuse_patterns = false});
  REQUIRE_MESSAGE(plain.ok(), plain.status().to_string());
  CHECK(count(plain->graph, carve::ir::OpKind::kPad) == 4);
}

TEST_CASE("onnx/import/symbolic_dims_and_input_shapes") {
  // forms_io declares x as [batch, 3]: batch is 1 unless given.
  auto batch1 = onnx::import_model_file(ot::model_path("forms_io"));
  REQUIRE_MESSAGE(batch1.ok(), batch1.status().to_string());
  CHECK(batch1->graph.find_value("x")->type.shape == carve::ir::Shape{1, 3});
  auto batch4 = onnx::import_model_file(ot::model_path("forms_io"), {.input_shapes = {{"x", carve::ir::Shape{4, 3}}}});
  REQUIRE_MESSAGE(batch4.ok(), batch4.status().to_string());
  CHECK(batch4->graph.find_value("x")->type.shape == carve::ir::Shape{4, 3});
  CHECK(batch4->graph.find_value("r")->type.shape == carve::ir::Shape{4, 3});
  // Fixed dims and the rank cannot be changed.
  for (const carve::ir::Shape& bad : {carve::ir::Shape{4}, carve::ir::Shape{4, 5}}) {
    auto model = onnx::import_model_file(ot::model_path("forms_io"), {.input_shapes = {{"x", bad}}});
    REQUIRE_FALSE(model.ok());
    CHECK(model.status().code() == ErrorCode::kShapeError);
    CHECK(model.status().message().find("'x'") != std::string::npos);
  }
}

TEST_CASE("onnx/cli/plan_prints_lower_bound_and_strategies") {
  CliRun r = carve_cli({"plan", ot::model_path("mobilenet_v2_tiny")});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("opset 12") != std::string::npos);
  CHECK(r.out.find("lower bound") != std::string::npos);
  CHECK(r.out.find("greedy-size") != std::string::npos);
}

TEST_CASE("onnx/cli/plan_no_weights") {
  CliRun r = carve_cli({"plan", ot::model_path("vgg_tiny"), "--no-weights", "--strategy", "greedy-size"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("--no-weights") != std::string::npos);
  CliRun csv = carve_cli({"plan", (temp_dir() / "x.csv").string(), "--no-weights"});
  CHECK(csv.code != 0);
}

TEST_CASE("onnx/cli/run_writes_outputs_matching_torch") {
  const std::string name = "squeezenet_tiny";
  const fs::path out_dir = temp_dir() / "run_out";
  CliRun r = carve_cli({"run", ot::model_path(name), "--input", "image=" + ot::models_dir() + "/" + name + ".input.image.npy",
                        "--output-dir", out_dir.string()});
  if (r.code != 0 && r.err.find("Unavailable") != std::string::npos) {
    carve::test::skip("Session::compile is unavailable: " + r.err);
    return;
  }
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto actual = carve::runtime::read_npy((out_dir / "logits.npy").string());
  auto expected = carve::runtime::read_npy(ot::models_dir() + "/" + name + ".output.logits.npy");
  REQUIRE(actual.ok());
  REQUIRE(expected.ok());
  CHECK(ot::relative_error(ot::buffer_doubles(*actual), ot::buffer_doubles(*expected)) <= 1e-4);
}

TEST_CASE("onnx/cli/run_unsupported_op_fails_naming_the_node") {
  CliRun r = carve_cli({"run", ot::model_path("err_unsupported_op"), "--random-inputs", "1"});
  CHECK(r.code != 0);
  CHECK(r.err.find("(StringNormalizer)") != std::string::npos);
}

TEST_CASE("onnx/cli/run_takes_symbolic_dims_from_input_files") {
  // forms_io's x is [batch, 3]: a batch-2 input file sets batch = 2.
  auto x = carve::runtime::Buffer::allocate(carve::runtime::cpu_allocator(), carve::ir::DType::kF32, {2, 3});
  REQUIRE(x.ok());
  auto values = x->mutable_span<float>();
  REQUIRE(values.ok());
  for (size_t i = 0; i < values->size(); ++i) (*values)[i] = static_cast<float>(i) - 2.5f;
  const fs::path input = temp_dir() / "batch2.npy";
  REQUIRE(carve::runtime::write_npy(input.string(), *x).ok());
  const fs::path out_dir = temp_dir() / "batch2_out";
  CliRun r = carve_cli({"run", ot::model_path("forms_io"), "--input", "x=" + input.string(), "--output-dir", out_dir.string()});
  if (r.code != 0 && r.err.find("Unavailable") != std::string::npos) {
    carve::test::skip("Session::compile is unavailable: " + r.err);
    return;
  }
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto relu = carve::runtime::read_npy((out_dir / "r.npy").string());
  REQUIRE(relu.ok());
  CHECK(relu->shape() == carve::ir::Shape{2, 3});
  CHECK(ot::buffer_doubles(*relu) == std::vector<double>{0, 0, 0, 0.5, 1.5, 2.5});
}
