// Helpers for the compute-op JIT tests (tests/jit/compute_*_test.cpp): build a small
// graph, run it through the JIT (engine_test_util.h's run_jit) and the reference
// interpreter, compare with a per-op tolerance; run one node's kernel with a chosen
// num_tiles and tile ranges.
#pragma once

#include <doctest/doctest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "carve/jit/tiles.h"
#include "engine_test_util.h"

namespace carve::jit::computetest {

using namespace carve::jit::jittest;
using ir::GraphBuilder;
using ir::ValueId;

// Random inputs for every graph input, in id order, from jittest::random_tensor (values
// in [lo, hi] with occasional +-0, +-inf and NaN). Inputs named in `finite` get their
// non-finite values replaced by 0.5.
inline std::vector<HostTensor> random_inputs(const ir::Graph& g, uint64_t seed, double lo = -1,
                                             double hi = 1, const std::vector<std::string>& finite = {}) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> in;
  for (const ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::kInput) continue;
    HostTensor t = random_tensor(rng, v.type.dtype, v.type.shape, lo, hi);
    if (ir::is_float(v.type.dtype) && std::find(finite.begin(), finite.end(), v.name) != finite.end()) {
      std::vector<double> d = t.to_doubles();
      for (double& x : d) if (!std::isfinite(x)) x = 0.5;
      t = HostTensor::from_doubles(v.type.dtype, v.type.shape, d);
    }
    in.push_back(std::move(t));
  }
  return in;
}

// JIT vs reference for every graph output: "" when all match within |a-e| <= atol + rtol|e|.
inline std::string jit_vs_reference(const ir::Graph& g, const std::vector<HostTensor>& in,
                                    double rtol, double atol, const JitRunOptions& opt = {}) {
  auto ref = run_reference(g, in);
  if (!ref.ok()) return "reference: " + ref.status().to_string();
  auto got = run_jit(*shared_jit(), g, in, nullptr, opt);
  if (!got.ok()) return "jit: " + got.status().to_string();
  std::string out;
  for (size_t i = 0; i < ref->size(); ++i) {
    std::string d = compare((*got)[i], (*ref)[i], rtol, atol);
    if (!d.empty()) out += "output " + std::to_string(i) + ": " + d;
  }
  return out;
}

// Builds with `make`, runs on random inputs; reports (with the graph) on mismatch.
inline std::string check(const std::function<void(GraphBuilder&)>& make, uint64_t seed, double rtol,
                         double atol, double lo = -1, double hi = 1, const JitRunOptions& opt = {},
                         const std::vector<std::string>& finite = {}) {
  GraphBuilder b;
  make(b);
  auto g = b.build();
  if (!g.ok()) return "build: " + g.status().to_string();
  return jit_vs_reference(*g, random_inputs(*g, seed, lo, hi, finite), rtol, atol, opt);
}

// The single node `node` of `g` compiled as one group with `num_tiles` tiles and run as
// the given consecutive tile ranges (each [from, to)). Inputs are the graph inputs in id
// order; every node input must be a graph input. Returns the node's output.
// drop_scratch: no scratch operand (GEMM kernels pack on the stack instead).
inline Result<HostTensor> run_node_tiles(const ir::Graph& g, ir::NodeId node,
                                         const std::vector<HostTensor>& in, int64_t num_tiles,
                                         const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                         bool drop_scratch = false) {
  CARVE_ASSIGN_OR_RETURN(KernelGroup group, make_single_node_group(g, node));
  group.num_tiles = num_tiles;
  if (drop_scratch) {  // the kernel then packs on its stack
    group.scratch_bytes = 0;
    std::erase_if(group.operands, [](const KernelOperand& op) { return op.role == OperandRole::kScratch; });
  }
  CARVE_ASSIGN_OR_RETURN(CompiledKernel k, shared_jit()->compile_group(g, group));
  std::vector<const HostTensor*> by_value(g.values.size(), nullptr);
  size_t next = 0;
  for (const ir::Value& v : g.values) {
    if (v.kind == ir::ValueKind::kInput) by_value[static_cast<size_t>(v.id)] = &in[next++];
  }
  const ir::Node& n = g.node(node);
  HostTensor out;
  out.type = g.value(n.outputs[0]).type;
  out.bytes.assign(static_cast<size_t>(*out.type.byte_size()), 0xCD);
  std::vector<void*> ops;
  std::vector<uint8_t> scratch(static_cast<size_t>(group.scratch_bytes) + 64);
  for (const KernelOperand& op : group.operands) {
    if (op.role == OperandRole::kScratch) {
      ops.push_back(scratch.data());
    } else if (op.role == OperandRole::kOutput) {
      ops.push_back(out.bytes.data());
    } else {
      ops.push_back(const_cast<uint8_t*>(by_value[static_cast<size_t>(op.value)]->bytes.data()));
    }
  }
  for (auto [from, to] : ranges) k.fn(ops.data(), from, to);
  return out;
}

// Tolerance of an f32 dot product of length k over inputs in [-1, 1].
inline double dot_tol(int64_t k) { return 2e-6 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))) + 1e-6; }

}  // namespace carve::jit::computetest
