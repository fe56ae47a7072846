// One node case through carve: import, compile, run, compare with ONNX's expected outputs.
#include "run_case.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "carve/onnx/model.h"
#include "carve/runtime/dynamic_program.h"
#include "carve/reference/reference.h"
#include "carve/runtime/npy.h"

namespace carve::conformance {
namespace {

// ONNX's backend tests compare with numpy.testing.assert_allclose (equal_nan on).
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

std::vector<double> doubles(const runtime::Buffer& b) {
  reference::HostTensor t;
  t.type = ir::TensorType{b.dtype(), b.shape()};
  auto bytes = b.bytes();
  if (bytes.ok()) {
    const auto* first = reinterpret_cast<const uint8_t*>(bytes->data());
    t.bytes.assign(first, first + bytes->size());
  }
  return t.to_doubles();
}

// "" when `actual` matches `expected`, else what differs.
std::string compare(const runtime::Buffer& actual, const runtime::Buffer& expected, bool random) {
  if (actual.dtype() != expected.dtype())
    return fmt::format("dtype {}, expected {}", ir::dtype_name(actual.dtype()), ir::dtype_name(expected.dtype()));
  if (actual.shape() != expected.shape())
    return fmt::format("shape {}, expected {}", actual.shape().to_string(), expected.shape().to_string());
  auto a_bytes = actual.bytes();
  auto e_bytes = expected.bytes();
  if (!a_bytes.ok() || !e_bytes.ok()) return "output not readable";
  if (random) {
    // A random op's values come from another generator: only their range is checked.
    if (!ir::is_float(actual.dtype()) && !ir::is_integer(actual.dtype())) return "";
    const std::vector<double> a = doubles(actual), e = doubles(expected);
    if (e.empty()) return "";
    const auto [lo, hi] = std::minmax_element(e.begin(), e.end());
    for (size_t i = 0; i < a.size(); ++i)
      if (!(a[i] >= *lo && a[i] <= *hi))
        return fmt::format("element {} is {}, outside the expected range [{}, {}]", i, a[i], *lo, *hi);
    return "";
  }
  if (!ir::is_float(actual.dtype())) {  // integers and bools: exactly
    if (std::memcmp(a_bytes->data(), e_bytes->data(), a_bytes->size()) == 0) return "";
    const std::vector<double> a = doubles(actual), e = doubles(expected);
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != e[i] && bad++ == 0) first = static_cast<int64_t>(i);
    if (first < 0) return "bytes differ";  // i64 beyond 2^53, equal as doubles
    return fmt::format("{} of {} elements differ; element {} is {}, expected {}", bad, a.size(), first,
                       a[first], e[first]);
  }
  const std::vector<double> a = doubles(actual), e = doubles(expected);
  int64_t bad = 0, first = -1;
  double max_err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]))) continue;
    const double err = std::abs(a[i] - e[i]);
    if (err <= kAtol + kRtol * std::abs(e[i])) continue;
    max_err = std::max(max_err, std::isnan(err) ? INFINITY : err);
    if (bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ (max abs error {:.3g}); element {} is {}, expected {}", bad,
                     a.size(), max_err, first, a[first], e[first]);
}

// DIR/<base>.npy, or DIR/<base>.bf16.npy: bfloat16 as <u2 bit patterns (generate.py's save()).
Result<runtime::Buffer> read_data(const std::string& base) {
  if (!std::filesystem::exists(base + ".bf16.npy")) return runtime::read_npy(base + ".npy");
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer bits, runtime::read_npy(base + ".bf16.npy"));
  return runtime::bf16_from_u2(bits, base + ".bf16.npy");
}

Status run_checked(const Case& c, const std::string& dir, runtime::Session& session, double seconds,
                   std::string& mismatch) {
  const std::string case_dir = dir + "/" + c.name;
  // The data fixes the inputs' shapes, and the values of those the import needs (a shape
  // or axes fed as a graph input): onnx::Model learns which.
  onnx::NamedBuffers inputs;
  Status unreadable;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Result<runtime::Buffer> input = read_data(fmt::format("{}/in{}", case_dir, i));
    if (input.ok()) inputs.insert_or_assign(c.inputs[i], *input);
    else if (unreadable.ok()) unreadable = input.status();
  }
  CARVE_ASSIGN_OR_RETURN(std::shared_ptr<onnx::Model> model, onnx::Model::load_file(case_dir + "/model.onnx"));
  if (!unreadable.ok()) {  // a dtype carve lacks: the import's message names the model's own type
    CARVE_RETURN_IF_ERROR(model->import_for(inputs).status());
    return unreadable;
  }
  runtime::RunOptions run;
  run.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(seconds));
  std::vector<runtime::Buffer> ordered;
  for (const std::string& name : model->input_names()) {
    auto it = inputs.find(name);
    if (it == inputs.end())
      return Status(ErrorCode::kInvalidArgument, fmt::format("onnx model '{}': input '{}' is missing", model->name(), name));
    ordered.push_back(it->second);
  }
  CARVE_ASSIGN_OR_RETURN(auto program, session.compile(model, {.max_specialisations = 1}));
  CARVE_ASSIGN_OR_RETURN(std::vector<runtime::Buffer> outputs, program->run(ordered, run));
  const std::vector<std::string>& names = model->output_names();
  for (size_t i = 0; i < c.outputs.size() && mismatch.empty(); ++i) {
    const auto it = std::find(names.begin(), names.end(), c.outputs[i]);
    if (it == names.end()) {
      mismatch = fmt::format("output '{}' is missing", c.outputs[i]);
      break;
    }
    CARVE_ASSIGN_OR_RETURN(runtime::Buffer expected, read_data(fmt::format("{}/out{}", case_dir, i)));
    const std::string diff = compare(outputs[static_cast<size_t>(it - names.begin())], expected, c.compare == "random");
    if (!diff.empty()) mismatch = fmt::format("output '{}': {}", c.outputs[i], diff);
  }
  return Status();
}

}  // namespace

Outcome run_case(const Case& c, const std::string& dir, runtime::Session& session, double seconds) {
  if (c.kind != "tensor") return {Verdict::kNotRun, c.kind};
  std::string mismatch;
  Status status;
  try {
    status = run_checked(c, dir, session, seconds, mismatch);
  } catch (const std::exception& e) {  // carve's functions return Status: an escape is a bug
    return {Verdict::kWrong, fmt::format("exception escaped: {}", e.what())};
  } catch (...) {
    return {Verdict::kWrong, "unknown exception escaped"};
  }
  if (!status.ok()) return {Verdict::kError, status.to_string()};
  if (!mismatch.empty()) return {Verdict::kWrong, mismatch};
  return {Verdict::kPass, ""};
}

}  // namespace carve::conformance
