// Helpers for the JIT engine / elementwise / layout / fusion tests: run a graph through
// form_kernel_groups + JitCompiler with a tiny in-test "runtime" (one buffer per value,
// views alias their input, handles by name), and compare with the reference interpreter.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "carve/ir/builder.h"
#include "carve/ir/order.h"
#include "carve/jit/fusion.h"
#include "carve/ir/half.h"
#include "carve/jit/host_target.h"
#include "carve/jit/jit.h"
#include "carve/reference/reference.h"
#include "test_support.h"

namespace carve::jit::jittest {

using reference::HostTensor;
using reference::ReferenceHandles;
using reference::run_reference;

using ir::DType;
using ir::OpKind;
using ir::Shape;

// One JitCompiler (no disk cache) shared by the tests of a process, so identical kernels
// compile once. nullptr (and the test is skipped) when the JIT is not built.
inline JitCompiler* shared_jit() {
  static std::unique_ptr<JitCompiler> jit = [] {
    JitOptions o;
    o.disk_cache = false;
    auto r = JitCompiler::create(o);
    return r.ok() ? std::move(r).value() : nullptr;
  }();
  return jit.get();
}

// Skips the calling test case when there is no CPU JIT; returns true when it did.
inline bool skip_without_jit() {
  if (shared_jit() == nullptr) {
    carve::test::skip("carve was built without the LLVM CPU JIT");
    return true;
  }
  return false;
}

// How run_jit runs a graph (test helper; not runtime::RunOptions).
struct JitRunOptions {
  FusionOptions fusion;
  bool tile_by_tile = false;  // run every tile separately, last tile first
};

// Runs `graph` with the JIT. `inputs` are the graph's input values in id order.
inline Result<std::vector<HostTensor>> run_jit(JitCompiler& jit, const ir::Graph& graph,
                                               const std::vector<HostTensor>& inputs,
                                               ReferenceHandles* handles = nullptr,
                                               const JitRunOptions& options = {},
                                               std::vector<CompiledKernel>* kernels_out = nullptr) {
  CARVE_ASSIGN_OR_RETURN(std::vector<ir::NodeId> order, ir::execution_order(graph));
  CARVE_ASSIGN_OR_RETURN(std::vector<KernelGroup> groups, form_kernel_groups(graph, order, options.fusion));
  CARVE_ASSIGN_OR_RETURN(std::vector<CompiledKernel> kernels, jit.compile(graph, groups));
  std::vector<std::vector<uint8_t>> storage(graph.values.size());
  std::vector<uint8_t*> ptr(graph.values.size(), nullptr);
  size_t next_input = 0;
  for (const ir::Value& v : graph.values) {
    auto size = v.type.byte_size();
    if (!size.ok()) return size.status();
    auto& buf = storage[static_cast<size_t>(v.id)];
    buf.assign(static_cast<size_t>(*size) + 8, 0xCD);  // poison pattern + guard bytes
    if (v.kind == ir::ValueKind::kInput) {
      if (next_input >= inputs.size()) return Status(ErrorCode::kInvalidArgument, "too few inputs");
      const HostTensor& t = inputs[next_input++];
      if (t.bytes.size() != static_cast<size_t>(*size)) return Status(ErrorCode::kInvalidArgument, "input size");
      if (!t.bytes.empty()) std::memcpy(buf.data(), t.bytes.data(), t.bytes.size());
    } else if (v.kind == ir::ValueKind::kConstant && v.data && !v.data->empty()) {
      std::memcpy(buf.data(), v.data->data(), v.data->size());
    }
    ptr[static_cast<size_t>(v.id)] = buf.data();
  }
  for (ir::NodeId id : order) {  // views alias their input
    const ir::Node& n = graph.node(id);
    if (ir::is_view(n.op)) ptr[static_cast<size_t>(n.outputs[0])] = ptr[static_cast<size_t>(n.inputs[0])];
  }
  std::map<std::string, std::vector<uint8_t>> handle_mem;
  for (const ir::Handle& h : graph.handles) {
    auto size = h.type.byte_size();
    std::vector<uint8_t> bytes(static_cast<size_t>(*size), 0);
    if (handles && handles->count(h.name)) bytes = handles->at(h.name).bytes;
    handle_mem[h.name] = std::move(bytes);
  }
  for (const CompiledKernel& k : kernels) {
    std::vector<void*> ops;
    std::vector<uint8_t> scratch(static_cast<size_t>(k.group.scratch_bytes) + 64);
    const ir::Node& anchor = graph.node(k.group.nodes.front());
    for (const KernelOperand& op : k.group.operands) {
      if (op.role == OperandRole::kScratch) {
        ops.push_back(scratch.data());
      } else if (op.value == ir::kNoValue) {
        ops.push_back(handle_mem.at(anchor.attrs.at("handle").as_string()).data());
      } else {
        ops.push_back(ptr[static_cast<size_t>(op.value)]);
      }
    }
    if (options.tile_by_tile) {
      for (int64_t t = k.group.num_tiles; t-- > 0;) k.fn(ops.data(), t, t + 1);
    } else {
      k.fn(ops.data(), 0, k.group.num_tiles);
    }
  }
  if (handles) {
    for (const ir::Handle& h : graph.handles) (*handles)[h.name] = HostTensor{h.type, handle_mem[h.name]};
  }
  std::vector<HostTensor> outs;
  for (ir::ValueId v : graph.outputs) {
    const ir::Value& val = graph.value(v);
    HostTensor t;
    t.type = val.type;
    t.bytes.assign(ptr[static_cast<size_t>(v)], ptr[static_cast<size_t>(v)] + *val.type.byte_size());
    outs.push_back(std::move(t));
  }
  if (kernels_out) *kernels_out = std::move(kernels);
  return outs;
}

// Element i of a tensor as double (f16/bf16 decoded exactly).
inline double element(const HostTensor& t, size_t i) {
  const uint8_t* p = t.bytes.data();
  switch (t.type.dtype) {
    case DType::kF32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::kF64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case DType::kF16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return ir::f16_to_float(v); }
    case DType::kBf16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return ir::bf16_to_float(v); }
    case DType::kI8: return static_cast<int8_t>(p[i]);
    case DType::kU8: return p[i];
    case DType::kBool: return p[i];
    case DType::kI32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::kI64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); return static_cast<double>(v); }
    case DType::kI16: { int16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case DType::kU16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case DType::kU32: { uint32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::kU64: { uint64_t v; std::memcpy(&v, p + 8 * i, 8); return static_cast<double>(v); }
  }
  return 0;
}

// "" when equal within tolerance: |a - e| <= atol + rtol * |e| per element (NaN == NaN,
// infinities equal), and bit-exact for integer/bool tensors and when rtol == atol == 0
// (except NaN payloads). Else a description of the first mismatches.
inline std::string compare(const HostTensor& actual, const HostTensor& expected, double rtol = 0, double atol = 0) {
  std::ostringstream os;
  if (actual.type != expected.type) {
    os << "type " << actual.type.to_string() << " != " << expected.type.to_string();
    return os.str();
  }
  const int64_t n = expected.num_elements();
  int shown = 0;
  for (int64_t i = 0; i < n && shown < 5; ++i) {
    double a = element(actual, static_cast<size_t>(i)), e = element(expected, static_cast<size_t>(i));
    bool ok = false;
    if (ir::is_float(expected.type.dtype)) {
      if (std::isnan(e)) ok = std::isnan(a);
      else if (std::isinf(e)) ok = a == e;
      else ok = std::fabs(a - e) <= atol + rtol * std::fabs(e);
      if (ok && rtol == 0 && atol == 0 && e == 0) ok = std::signbit(a) == std::signbit(e);
    } else if (ir::is_integer(expected.type.dtype)) {  // bits: i64/u64 are past double's 2^53
      const auto size = static_cast<size_t>(ir::dtype_size(expected.type.dtype));
      ok = std::memcmp(actual.bytes.data() + size * static_cast<size_t>(i),
                       expected.bytes.data() + size * static_cast<size_t>(i), size) == 0;
    } else {
      ok = a == e;
    }
    if (!ok) {
      os << "[" << i << "] got " << a << " expected " << e << "; ";
      ++shown;
    }
  }
  return os.str();
}

// One unit in the last place of `dtype` at the magnitude of `v` (subnormal spacing below
// the smallest normal).
inline double ulp_of(DType dtype, double v) {
  int mant = dtype == DType::kF16 ? 10 : dtype == DType::kBf16 ? 7 : dtype == DType::kF64 ? 52 : 23;
  int emin = dtype == DType::kF16 ? -14 : dtype == DType::kF64 ? -1022 : -126;
  int e = v == 0 || !std::isfinite(v) ? emin : std::max(std::ilogb(v), emin);
  return std::ldexp(1.0, e - mant);
}

// compare() for float tensors in ulps: "" when every element is within `max_ulp` ulps of
// the expected value (its dtype's ulp there) or within `atol` (for references that are
// themselves inexact near zero); NaN == NaN, infinities equal.
inline std::string compare_ulp(const HostTensor& actual, const HostTensor& expected, double max_ulp, double atol = 0) {
  std::ostringstream os;
  if (actual.type != expected.type) return "type " + actual.type.to_string() + " != " + expected.type.to_string();
  const int64_t n = expected.num_elements();
  int shown = 0;
  for (int64_t i = 0; i < n && shown < 5; ++i) {
    double a = element(actual, static_cast<size_t>(i)), e = element(expected, static_cast<size_t>(i));
    bool ok = std::isnan(e) ? std::isnan(a)
              : std::isinf(e) ? a == e
                              : std::fabs(a - e) <= std::max(atol, max_ulp * ulp_of(expected.type.dtype, e));
    if (!ok) {
      os << "[" << i << "] got " << a << " expected " << e << " (" << std::fabs(a - e) / ulp_of(expected.type.dtype, e)
         << " ulp); ";
      ++shown;
    }
  }
  return os.str();
}

// Random tensor data. Floats: mostly in [lo, hi], some small integers (ties for
// comparisons, signed zeros), ~3% specials (+-0, +-inf, NaN), rounded to the dtype; ints: full range for i8/u8, [-1000, 1000] else
// (or `lo..hi` when given as a narrower range).
inline HostTensor random_tensor(std::mt19937_64& rng, DType dtype, Shape shape, double lo = -8, double hi = 8) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int> pick(0, 9);
  for (double& x : v) {
    switch (dtype) {
      case DType::kBool: x = static_cast<double>(rng() & 1); break;
      case DType::kI8: x = static_cast<int8_t>(rng()); break;
      case DType::kU8: x = static_cast<uint8_t>(rng()); break;
      case DType::kI32: x = pick(rng) < 3 ? static_cast<double>(static_cast<int32_t>(rng())) : std::round(real(rng) * 125); break;
      case DType::kI64: x = pick(rng) < 3 ? static_cast<double>(static_cast<int64_t>(rng() >> 11) - (int64_t{1} << 52)) : std::round(real(rng) * 125); break;
      case DType::kI16: x = static_cast<int16_t>(rng()); break;
      case DType::kU16: x = static_cast<uint16_t>(rng()); break;
      // the unsigned 32/64-bit values are past the signed maxima half the time
      case DType::kU32: x = pick(rng) < 5 ? static_cast<double>(static_cast<uint32_t>(rng())) : std::round(std::fabs(real(rng)) * 125); break;
      case DType::kU64: x = std::round(std::fabs(real(rng)) * 125); break;  // big ones below, exactly
      default: {
        int p = pick(rng);
        if (p == 1 && rng() % 3 == 0) {  // signed zeros, infinities, NaN now and then
          const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN};
          x = specials[rng() % 5];
        } else {
          x = p == 0 ? std::round(real(rng)) : real(rng);
        }
        break;
      }
    }
  }
  HostTensor t = HostTensor::from_doubles(dtype, std::move(shape), v);
  if (dtype == DType::kU64) {  // exact 64-bit patterns (doubles stop at 2^53), half past INT64_MAX
    for (size_t i = 0; i < v.size(); ++i) {
      if (pick(rng) >= 5) continue;
      const uint64_t bits = rng() >> (rng() % 4 == 0 ? rng() % 64 : 0);
      std::memcpy(t.bytes.data() + 8 * i, &bits, 8);
    }
  }
  return t;
}

// rc::check with a chosen number of successful runs.
template <typename Testable>
bool rc_check(const std::string& description, int runs, Testable&& testable) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = runs;
  rc::detail::TestMetadata metadata;
  metadata.id = description;
  metadata.description = description;
  auto result = rc::detail::checkProperty(rc::detail::toProperty(std::forward<Testable>(testable)), metadata, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::cerr << "- " << description << "\n";
    rc::detail::printResultMessage(result, std::cerr);
    std::cerr << std::endl;
    return false;
  }
  return true;
}

}  // namespace carve::jit::jittest
