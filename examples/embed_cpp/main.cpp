// Embedding carve from C++: import model.onnx (a tiny ResNet shipped beside this file;
// run from this folder), compile it, run it on input.npy without copying the input, and
// compare with expected.npy (PyTorch's output) within 1e-4. Exit 0 on success.
#include <cmath>
#include <cstdio>

#include "carve/onnx/import.h"
#include "carve/runtime/npy.h"
#include "carve/runtime/session.h"

using namespace carve;

namespace {

Status run() {
  CARVE_ASSIGN_OR_RETURN(onnx::ImportedModel model, onnx::import_model_file("model.onnx"));
  CARVE_ASSIGN_OR_RETURN(auto session, runtime::Session::create());
  runtime::CompileOptions options{.strategy = "best"};
  options.constants = model.mapped_weights;  // external weights, mapped (none here)
  CARVE_ASSIGN_OR_RETURN(auto program, session->compile(model.graph, options));
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer input, runtime::map_npy("input.npy"));  // mmapped, used in place
  CARVE_ASSIGN_OR_RETURN(runtime::Buffer expected, runtime::read_npy("expected.npy"));
  CARVE_ASSIGN_OR_RETURN(auto outputs, program->run({&input, 1}));

  CARVE_ASSIGN_OR_RETURN(auto got, outputs[0].span<float>());
  CARVE_ASSIGN_OR_RETURN(auto want, expected.span<float>());
  if (got.size() != want.size()) return Status(ErrorCode::kShapeError, "output and expected.npy differ in size");
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  const runtime::PlanSummary& plan = program->plan_summary();
  std::printf("%s: %zu kernels; arena %lld bytes (lower bound %lld, no reuse %lld)\n", model.graph.name.c_str(),
              program->program().kernels.size(), static_cast<long long>(plan.arena_bytes),
              static_cast<long long>(plan.lower_bound_bytes), static_cast<long long>(plan.no_reuse_bytes));
  std::printf("%s: max |carve - pytorch| = %.2e over %zu logits\n", program->output_names()[0].c_str(), worst,
              got.size());
  if (worst > 1e-4) return Status(ErrorCode::kInternal, "output differs from expected.npy by more than 1e-4");
  return Status();
}

}  // namespace

int main() {
  Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "embed_cpp: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
