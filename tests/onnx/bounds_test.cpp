// Bad input to the ONNX importer: folded tensors are capped before allocation
// (ImportOptions::max_folded_bytes), exceptions never escape, and malformed graphs
// (wrong arity, no outputs, duplicate initializers, external data escaping the model's
// folder) are rejected naming the node or file. Models are built here with the ONNX
// protobuf classes: each reproducer is a few hundred bytes.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <fstream>
#include <string>
#include <vector>

#include <sstream>

#include "carve/onnx/import.h"
#include "cli/cli.h"
#include "test_support.h"

namespace fs = std::filesystem;
using carve::ErrorCode;
namespace co = carve::onnx;

namespace {

::onnx::ModelProto new_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_int64_init(::onnx::GraphProto& g, const std::string& name, std::vector<int64_t> dims,
                    const std::vector<int64_t>& values) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

void add_float_init(::onnx::GraphProto& g, const std::string& name, std::vector<int64_t> dims,
                    const std::vector<float>& values) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

::onnx::NodeProto* add_node(::onnx::GraphProto& g, const std::string& name, const std::string& op,
                            const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  auto* n = g.add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void add_input(::onnx::GraphProto& g, const std::string& name, std::vector<int64_t> dims) {
  auto* v = g.add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_output(::onnx::GraphProto& g, const std::string& name) { g.add_output()->set_name(name); }

carve::Result<co::ImportedModel> import(const ::onnx::ModelProto& m, const co::ImportOptions& options = {}) {
  const std::string bytes = m.SerializeAsString();
  return co::import_model_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "bounds.onnx", options);
}

// The status names `node` with its op type and has `code`.
void check_fails(const carve::Result<co::ImportedModel>& r, ErrorCode code, const std::string& node,
                 const std::string& op) {
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == code);
  CHECK(r.status().message().find("onnx node '" + node + "' (" + op + ")") != std::string::npos);
}

}  // namespace

TEST_CASE("onnx/bounds/constant_of_shape_over_the_cap_fails_fast") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_int64_init(g, "shape", {2}, {int64_t{1} << 30, int64_t{1} << 30});
  add_node(g, "fill", "ConstantOfShape", {"shape"}, {"y"});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kOutOfMemory, "fill", "ConstantOfShape");
  // Past int64 element counts: a shape error, not a wrapped size.
  g.mutable_initializer(0)->set_int64_data(0, int64_t{1} << 40);
  g.mutable_initializer(0)->set_int64_data(1, int64_t{1} << 40);
  auto overflow = import(m);
  REQUIRE_FALSE(overflow.ok());
  CHECK(overflow.status().message().find("onnx node 'fill' (ConstantOfShape)") != std::string::npos);
}

TEST_CASE("onnx/bounds/range_over_the_cap_fails_fast") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_int64_init(g, "start", {}, {0});
  add_int64_init(g, "limit", {}, {int64_t{1} << 40});
  add_int64_init(g, "delta", {}, {1});
  add_node(g, "r", "Range", {"start", "limit", "delta"}, {"y"});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kOutOfMemory, "r", "Range");
  // A small cap applies too (the option is honoured, not just the default).
  g.mutable_initializer(1)->set_int64_data(0, 1000);
  co::ImportOptions small;
  small.max_folded_bytes = 100;
  check_fails(import(m, small), ErrorCode::kOutOfMemory, "r", "Range");
  CHECK(import(m).ok());
}

TEST_CASE("onnx/bounds/expand_over_the_cap_fails_fast") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_float_init(g, "x", {1}, {1.0f});
  add_int64_init(g, "shape", {3}, {int64_t{1} << 20, int64_t{1} << 20, 1024});
  add_node(g, "e", "Expand", {"x", "shape"}, {"y"});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kOutOfMemory, "e", "Expand");
  // The same on a graph input: the mask alone would be exabytes.
  auto m2 = new_model();
  auto& g2 = *m2.mutable_graph();
  add_input(g2, "x", {1});
  add_int64_init(g2, "shape", {3}, {int64_t{1} << 20, int64_t{1} << 20, 1024});
  add_node(g2, "e", "Expand", {"x", "shape"}, {"y"});
  add_output(g2, "y");
  check_fails(import(m2), ErrorCode::kOutOfMemory, "e", "Expand");
}

TEST_CASE("onnx/bounds/tile_over_the_cap_fails_fast") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_float_init(g, "x", {4, 4}, std::vector<float>(16, 1.0f));
  add_int64_init(g, "repeats", {2}, {int64_t{1} << 14, int64_t{1} << 14});
  add_node(g, "t", "Tile", {"x", "repeats"}, {"y"});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kOutOfMemory, "t", "Tile");
  // Repeats that would make the concat list itself huge are refused before it is built.
  g.mutable_initializer(1)->set_int64_data(0, int64_t{1} << 40);
  g.mutable_initializer(1)->set_int64_data(1, 1);
  auto many = import(m);
  REQUIRE_FALSE(many.ok());
  CHECK(many.status().message().find("onnx node 't' (Tile)") != std::string::npos);
}

TEST_CASE("onnx/validate/fixed_arity_op_with_wrong_input_count") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_input(g, "x", {2});
  add_node(g, "r", "Relu", {"x", "x", "x"}, {"y"});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kInvalidArgument, "r", "Relu");
  g.mutable_node(0)->set_op_type("Add");
  check_fails(import(m), ErrorCode::kInvalidArgument, "r", "Add");
  g.mutable_node(0)->clear_input();
  g.mutable_node(0)->add_input("x");
  g.mutable_node(0)->add_input("x");
  CHECK(import(m).ok());
}

TEST_CASE("onnx/validate/node_without_outputs") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_input(g, "x", {2});
  add_node(g, "r", "Relu", {"x"}, {"y"});
  add_node(g, "sink", "Relu", {"x"}, {});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kInvalidArgument, "sink", "Relu");
}

TEST_CASE("onnx/validate/duplicate_initializers") {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_float_init(g, "w", {1}, {1.0f});
  add_float_init(g, "w", {1}, {2.0f});
  add_input(g, "x", {1});
  add_node(g, "a", "Add", {"x", "w"}, {"y"});
  add_output(g, "y");
  auto r = import(m);
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kInvalidArgument);
  CHECK(r.status().message().find("'w'") != std::string::npos);
}

namespace {

// A model in `dir` adding the external tensor at `location` (4 floats) to its input.
fs::path write_external_model(const fs::path& dir, const std::string& location) {
  auto m = new_model();
  auto& g = *m.mutable_graph();
  auto* t = g.add_initializer();
  t->set_name("w");
  t->set_data_type(::onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
  add_input(g, "x", {4});
  add_node(g, "a", "Add", {"x", "w"}, {"y"});
  add_output(g, "y");
  const fs::path path = dir / "m.onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

void write_floats(const fs::path& path) {
  const float w[4] = {1, 2, 3, 4};
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(w), sizeof(w));
}

}  // namespace

TEST_CASE("onnx/validate/external_data_stays_in_the_model_folder") {
  const fs::path root = fs::temp_directory_path() / ("carve_onnx_ext_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path dir = root / "model";
  fs::create_directories(dir / "sub");
  write_floats(root / "secret.bin");
  write_floats(dir / "w..bin");
  write_floats(dir / "sub" / "w.bin");
  fs::create_symlink(root / "secret.bin", dir / "link.bin");
  fs::create_symlink(root, dir / "up");

  // Legitimate names: two dots inside a file name, a subfolder.
  for (const std::string& location : std::vector<std::string>{"w..bin", "sub/w.bin", "./sub/../w..bin"}) {
    auto r = co::import_model_file(write_external_model(dir, location).string());
    INFO(location << ": " << r.status().to_string());
    CHECK(r.ok());
  }
  // Escapes: '..', an absolute path, a symlinked file or folder pointing out.
  for (const std::string& location :
       std::vector<std::string>{"../secret.bin", (root / "secret.bin").string(), "link.bin", "up/secret.bin",
                                "sub/../../secret.bin"}) {
    auto r = co::import_model_file(write_external_model(dir, location).string());
    INFO(location << ": " << r.status().to_string());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().message().find(location) != std::string::npos);
  }
  fs::remove_all(root);
}

TEST_CASE("onnx/bounds/allocation_failure_is_a_status_not_an_exception") {
  // With the cap lifted, a 2^46-element fill asks the allocator for 2^49 bytes (more than
  // a 47-bit address space): std::bad_alloc, caught at import_model_bytes.
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's operator new reports out-of-memory and exits instead of throwing
  // std::bad_alloc (whatever allocator_may_return_null says), so there is nothing to catch.
  carve::test::skip("AddressSanitizer's operator new aborts on allocation failure instead of throwing");
  return;
#endif
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_int64_init(g, "shape", {1}, {int64_t{1} << 46});
  add_node(g, "fill", "ConstantOfShape", {"shape"}, {"y"});
  add_output(g, "y");
  co::ImportOptions unbounded;
  unbounded.max_folded_bytes = std::numeric_limits<int64_t>::max();
  auto r = import(m, unbounded);
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kOutOfMemory);
  CHECK(r.status().message().find("bounds.onnx") != std::string::npos);
}

TEST_CASE("onnx/cli/plan_of_a_tiny_model_folding_exabytes_fails_clearly") {
  // The reproducers: a few hundred bytes each, one per folded op.
  const fs::path dir = fs::temp_directory_path() / ("carve_onnx_bounds_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::pair<std::string, ::onnx::ModelProto>> models;
  {
    auto m = new_model();
    add_int64_init(*m.mutable_graph(), "shape", {2}, {int64_t{1} << 30, int64_t{1} << 30});
    add_node(*m.mutable_graph(), "n", "ConstantOfShape", {"shape"}, {"y"});
    models.emplace_back("ConstantOfShape", m);
  }
  {
    auto m = new_model();
    add_int64_init(*m.mutable_graph(), "s", {}, {0});
    add_int64_init(*m.mutable_graph(), "l", {}, {int64_t{1} << 40});
    add_int64_init(*m.mutable_graph(), "d", {}, {1});
    add_node(*m.mutable_graph(), "n", "Range", {"s", "l", "d"}, {"y"});
    models.emplace_back("Range", m);
  }
  {
    auto m = new_model();
    add_float_init(*m.mutable_graph(), "x", {1}, {1.0f});
    add_int64_init(*m.mutable_graph(), "shape", {2}, {int64_t{1} << 30, int64_t{1} << 30});
    add_node(*m.mutable_graph(), "n", "Expand", {"x", "shape"}, {"y"});
    models.emplace_back("Expand", m);
  }
  {
    auto m = new_model();
    add_float_init(*m.mutable_graph(), "x", {1, 1}, {1.0f});
    add_int64_init(*m.mutable_graph(), "r", {2}, {int64_t{1} << 16, int64_t{1} << 16});
    add_node(*m.mutable_graph(), "n", "Tile", {"x", "r"}, {"y"});
    models.emplace_back("Tile", m);
  }
  for (auto& [op, m] : models) {
    add_output(*m.mutable_graph(), "y");
    const fs::path path = dir / (op + ".onnx");
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    std::ostringstream out, err;
    const int code = carve::cli::run({"plan", path.string()}, out, err);
    INFO(op << ": " << out.str() << err.str());
    CHECK(code != 0);
    CHECK(err.str().find("onnx node 'n' (" + op + ")") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("onnx/bounds/trilu_mask_over_the_cap_fails_fast") {
  // The mask is a constant even when x is a graph input: its declared dims size it.
  auto m = new_model();
  m.mutable_opset_import(0)->set_version(14);
  auto& g = *m.mutable_graph();
  add_input(g, "x", {int64_t{1} << 20, int64_t{1} << 20});
  add_node(g, "tri", "Trilu", {"x"}, {"y"});
  add_output(g, "y");
  check_fails(import(m), ErrorCode::kOutOfMemory, "tri", "Trilu");
}

TEST_CASE("onnx/bounds/float integers past int64 are saturated, never undefined") {
  // Found by onnx_import_fuzzer (fuzz/corpus/onnx_import/regression-trilu-k-neg-inf.onnx):
  // Trilu's k given as a float -inf was converted to int64 with a plain cast (UB; UBSan
  // stops here in the ASan build). Now the cast rules apply: -inf -> INT64_MIN, NaN -> 0.
  for (float k : {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 1e30f}) {
    CAPTURE(k);
    auto m = new_model();
    m.mutable_opset_import(0)->set_version(14);
    auto& g = *m.mutable_graph();
    add_input(g, "x", {3, 3});
    add_float_init(g, "k", {}, {k});
    add_node(g, "tri", "Trilu", {"x", "k"}, {"y"});
    add_output(g, "y");
    auto r = import(m);  // either imported (k saturated) or a clear error: no UB either way
    if (!r.ok()) CHECK(r.status().message().find("onnx node 'tri' (Trilu)") != std::string::npos);
  }
}

namespace {

// Runs `carve ARGS` as a child process with its address space limited to 4 GiB; returns
// the wait status.
int run_carve_limited(const std::vector<std::string>& args) {
  std::vector<std::string> all{CARVE_CLI_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, 1);
    rlimit limit{rlim_t{4} << 30, rlim_t{4} << 30};
    ::setrlimit(RLIMIT_AS, &limit);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("onnx/cli/reproducers exit with an error within a 4 GB address space") {
#if defined(__SANITIZE_ADDRESS__)
  // ASan reserves terabytes of shadow address space: it cannot start under RLIMIT_AS.
  carve::test::skip("AddressSanitizer cannot run under an address-space limit (the Release build checks this)");
  return;
#else
  const fs::path dir = fs::temp_directory_path() / ("carve_onnx_limit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::vector<std::string>> runs;
  auto model_file = [&](const std::string& op, ::onnx::ModelProto m) {
    add_output(*m.mutable_graph(), "y");
    const fs::path path = dir / (op + ".onnx");
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    return path.string();
  };
  {
    auto m = new_model();
    add_int64_init(*m.mutable_graph(), "shape", {2}, {int64_t{1} << 30, int64_t{1} << 30});
    add_node(*m.mutable_graph(), "n", "ConstantOfShape", {"shape"}, {"y"});
    runs.push_back({"plan", model_file("ConstantOfShape", m)});
  }
  {
    auto m = new_model();
    add_int64_init(*m.mutable_graph(), "s", {}, {0});
    add_int64_init(*m.mutable_graph(), "l", {}, {int64_t{1} << 40});
    add_int64_init(*m.mutable_graph(), "d", {}, {1});
    add_node(*m.mutable_graph(), "n", "Range", {"s", "l", "d"}, {"y"});
    runs.push_back({"plan", model_file("Range", m)});
  }
  {
    auto m = new_model();
    add_float_init(*m.mutable_graph(), "x", {1}, {1.0f});
    add_int64_init(*m.mutable_graph(), "shape", {2}, {int64_t{1} << 30, int64_t{1} << 30});
    add_node(*m.mutable_graph(), "n", "Expand", {"x", "shape"}, {"y"});
    runs.push_back({"plan", model_file("Expand", m)});
  }
  {
    auto m = new_model();
    add_float_init(*m.mutable_graph(), "x", {1, 1}, {1.0f});
    add_int64_init(*m.mutable_graph(), "r", {2}, {int64_t{1} << 16, int64_t{1} << 16});
    add_node(*m.mutable_graph(), "n", "Tile", {"x", "r"}, {"y"});
    runs.push_back({"plan", model_file("Tile", m)});
  }
  const std::string big = (dir / "big.csv").string();
  std::ofstream(big) << "id,lower,upper,size\nb,0,1,2305843009213693952\n";
  runs.push_back({"plan", big});  // a valid problem: planned exactly (exit 0), no crash
  const std::string small = carve::test::minimalloc_dir() + "/examples__input.12.csv";
  runs.push_back({"plan", small, "--align", "4611686018427387904"});
  const std::string graph = (dir / "g.carve").string();
  std::ofstream(graph) << "graph g {\n  input x: f32[4]\n  n = neg(x) -> y: f32[4]\n  output y\n}\n";
  runs.push_back({"run", graph, "--input", "x=/dev/zero"});
  for (const auto& args : runs) {
    CAPTURE(args.back());
    CAPTURE(args[1]);
    const int status = run_carve_limited(args);
    REQUIRE(WIFEXITED(status));  // no signal: no crash, no kill for memory
    CHECK(WEXITSTATUS(status) < 127);  // carve ran and decided
    if (args[1] != big) CHECK(WEXITSTATUS(status) == 1);  // and failed with its own error
  }
  fs::remove_all(dir);
#endif
}

TEST_CASE("onnx/import/transpose_moving_only_unit_dims_is_a_view") {
  // [1, 4, 3] -> [4, 1, 3] and [2, 1, 3] -> [2, 3, 1] keep the bytes in order: reshapes
  // (views, no launch). [1, 4, 3] -> [3, 4, 1] swaps 4 and 3: a transpose. An invalid perm
  // still fails on the node.
  struct Case {
    std::vector<int64_t> x, perm, y;
    bool view;
  };
  for (const Case& c : {Case{{1, 4, 3}, {1, 0, 2}, {4, 1, 3}, true}, Case{{2, 1, 3}, {0, 2, 1}, {2, 3, 1}, true},
                        Case{{1, 4, 3}, {2, 1, 0}, {3, 4, 1}, false}}) {
    auto m = new_model();
    auto& g = *m.mutable_graph();
    add_input(g, "x", c.x);
    auto* t = add_node(g, "t", "Transpose", {"x"}, {"y"});
    auto* perm = t->add_attribute();
    perm->set_name("perm");
    perm->set_type(::onnx::AttributeProto::INTS);
    for (int64_t p : c.perm) perm->add_ints(p);
    add_output(g, "y");
    auto r = import(m);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    const carve::ir::Node& node = r->graph.node(r->graph.find_value("y")->producer);
    CHECK(node.op == (c.view ? carve::ir::OpKind::kReshape : carve::ir::OpKind::kTranspose));
    CHECK(r->graph.find_value("y")->type.shape == carve::ir::Shape(c.y));
  }
  auto m = new_model();
  auto& g = *m.mutable_graph();
  add_input(g, "x", {1, 4, 3});
  auto* perm = add_node(g, "t", "Transpose", {"x"}, {"y"})->add_attribute();
  perm->set_name("perm");
  perm->set_type(::onnx::AttributeProto::INTS);
  for (int64_t p : {0, 0, 1}) perm->add_ints(p);
  add_output(g, "y");
  auto r = import(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("onnx node 't' (Transpose)") != std::string::npos);
}
