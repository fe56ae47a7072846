#include <doctest/doctest.h>

#include "carve/jit/host_target.h"

TEST_CASE("jit/host/target is detected when the CPU JIT is built") {
  auto target = carve::jit::host_target();
  if (!carve::jit::cpu_jit_available()) {
    CHECK(target.status().code() == carve::ErrorCode::kUnavailable);
    return;
  }
  REQUIRE(target.ok());
  CHECK(!target->triple.empty());
  CHECK(!target->cpu.empty());
  CHECK(target->llvm_version.rfind("22.", 0) == 0);
  // Deterministic: two calls give the same feature string (cache keys depend on it).
  CHECK(carve::jit::host_target()->features == target->features);
}
