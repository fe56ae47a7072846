// The KV-cache decoder: incremental decode == full recompute over the whole sequence.
#include <doctest/doctest.h>

#include <cmath>

#include "carve/jit/host_target.h"
#include "carve/reference/reference.h"
#include "kv_decoder/decoder_runner.h"
#include "test_support.h"

using namespace carve;

namespace {

// max |a - b| / max |b|
double rel_error(const float* a, const float* b, int64_t n) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    ref = std::max(ref, std::fabs(double(b[i])));
  }
  return diff / ref;
}

}  // namespace

TEST_CASE("scheduler/kv decoder/incremental decode matches full recompute") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF)");
    return;
  }
  examples::DecoderModel model({});
  const auto& c = model.config();
  auto session = runtime::Session::create();
  REQUIRE(session.ok());
  std::vector<int64_t> tokens{5, 17, 33, 2};
  auto runner = examples::DecoderRunner::create(**session, model, static_cast<int64_t>(tokens.size()));
  REQUIRE_MESSAGE(runner.ok(), runner.status().to_string());
  auto prefill = (*runner)->prefill(tokens);
  REQUIRE_MESSAGE(prefill.ok(), prefill.status().to_string());
  int64_t next = examples::argmax(prefill->data() + (tokens.size() - 1) * c.vocab, c.vocab);

  const int decode_steps = 8;
  for (int step = 0; step < decode_steps; ++step) {
    const auto pos = static_cast<int64_t>(tokens.size());
    tokens.push_back(next);
    auto incremental = (*runner)->decode(next, pos);
    REQUIRE_MESSAGE(incremental.ok(), incremental.status().to_string());

    // Full recompute of the whole sequence, by the reference interpreter.
    auto full = model.full(static_cast<int64_t>(tokens.size()));
    REQUIRE(full.ok());
    auto want = reference::run_reference(*full, std::vector<reference::HostTensor>{
                                              reference::HostTensor::from<int64_t>({static_cast<int64_t>(tokens.size())}, tokens)});
    REQUIRE_MESSAGE(want.ok(), want.status().to_string());
    const std::vector<float> all = want->at(0).as<float>();
    const float* last = all.data() + (tokens.size() - 1) * c.vocab;
    CAPTURE(step);
    CHECK(rel_error(incremental->data(), last, c.vocab) < 1e-4);
    const int64_t greedy = examples::argmax(incremental->data(), c.vocab);
    CHECK(greedy == examples::argmax(last, c.vocab));
    next = greedy;
  }

  // The whole sequence through carve too: same last-row logits as the reference.
  auto full = model.full(static_cast<int64_t>(tokens.size()));
  auto program = (*session)->compile(*full, {});
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto ids = runtime::Buffer::allocate(runtime::cpu_allocator(), ir::DType::kI64, {static_cast<int64_t>(tokens.size())});
  std::copy(tokens.begin(), tokens.end(), ids->mutable_span<int64_t>()->begin());
  std::vector<runtime::Buffer> inputs{*ids};
  // In parallel with the hazard checker on: no race, and the same logits.
  runtime::RunRecord record;
  auto out = (*program)->run(inputs, {.check_hazards = true}, &record);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK(record.parallel);
  CHECK(record.hazards.empty());
  auto want = reference::run_reference(*full, std::vector<reference::HostTensor>{
                                            reference::HostTensor::from<int64_t>({static_cast<int64_t>(tokens.size())}, tokens)});
  REQUIRE(want.ok());
  const std::vector<float> ref = want->at(0).as<float>();
  CHECK(rel_error(out->at(0).span<float>()->data(), ref.data(), static_cast<int64_t>(ref.size())) < 1e-4);
}
