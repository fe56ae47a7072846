#include "carve/jit/host_target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <vector>

namespace carve::jit {

bool cpu_jit_available() { return true; }

namespace {

HostTarget detect() {
  HostTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  // Sorted so the string (and every cache key built from it) is deterministic.
  std::vector<std::string> features;
  for (const auto& entry : llvm::sys::getHostCPUFeatures())
    features.push_back((entry.getValue() ? "+" : "-") + entry.getKey().str());
  std::sort(features.begin(), features.end());
  for (const auto& f : features) {
    if (!t.features.empty()) t.features += ',';
    t.features += f;
  }
  t.llvm_version = LLVM_VERSION_STRING;
  return t;
}

}  // namespace

Result<HostTarget> host_target() {
  static const HostTarget target = detect();
  return target;
}

}  // namespace carve::jit
