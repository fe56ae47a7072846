// Mixed CPU/GPU placement checked on the CPU (no GPU needed): the device program built with
// some nodes placed on cpu (build_device_program) has host kernels on host regions only,
// device kernels on device regions only, a download/upload exactly where a value crosses,
// and every kernel reads the same values as in the all-device program (byte tokens
// simulated through the copies); the hazard DAG orders every conflicting pair, including
// each cross-device edge, and every stream plan over it is verified.
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "carve/ir/builder.h"
#include "carve/runtime/cuda/device_program.h"
#include "carve/runtime/session.h"
#include "carve/runtime/stream_plan.h"
#include "fake_device.h"
#include "test_support.h"

using namespace carve;
using ir::DType;
namespace rt = carve::runtime;

namespace {

bool host_region(rt::Region r) {
  return r == rt::Region::kHostArena || r == rt::Region::kHostInput || r == rt::Region::kHostOutput ||
         r == rt::Region::kHostConstant || r == rt::Region::kHostHandle;
}

// x -> relu -> neg -> exp -> y, plus a constant and a branch (two outputs).
ir::Graph diamond() {
  ir::GraphBuilder b("diamond");
  auto x = b.input("x", DType::kF32, {16});
  auto w = b.constant("w", DType::kF32, {16}, std::vector<uint8_t>(64, 0));
  auto a = b.rename(b.relu(x), "a");
  auto n = b.rename(b.neg(a), "n");
  auto m = b.rename(b.mul(a, w), "m");
  auto e = b.rename(b.exp(n), "e");
  auto s = b.rename(b.add(e, m), "s");
  b.output(b.rename(b.tanh(s), "y"));
  b.output(b.rename(b.sigmoid(m), "z"));
  return *b.build();
}

std::string producer_name(const ir::Graph& g, const std::string& value) {
  for (const ir::Value& v : g.values)
    if (v.name == value) return g.node(v.producer).name;
  return "";
}

rt::CompileOptions placed(const ir::Graph& g, std::initializer_list<const char*> cpu_values) {
  rt::CompileOptions o;
  o.fuse = false;
  for (const char* v : cpu_values) o.placement[producer_name(g, v)] = rt::DeviceType::kCpu;
  return o;
}

// Replays a program's data movement on byte tokens: a kernel writes its own token (by launch
// name), copies move tokens. Returns, per kernel name, the tokens of the bytes it read, and
// the final host output tokens under "host_output".
std::map<std::string, std::vector<int>> simulate(const rt::Program& p) {
  std::map<std::pair<int, int32_t>, std::vector<int>> mem;
  std::map<std::string, int> ids;
  auto bytes = [&](const rt::MemoryRef& r) -> std::vector<int>& {
    auto& m = mem[{static_cast<int>(r.region), r.slot}];
    if (m.size() < static_cast<size_t>(r.offset + r.bytes)) m.resize(static_cast<size_t>(r.offset + r.bytes), 0);
    return m;
  };
  for (size_t i = 0; i < p.inputs.size(); ++i)
    for (rt::Region r : {rt::Region::kInput, rt::Region::kHostInput})
      bytes({r, static_cast<int32_t>(i), 0, 4096}).assign(4096, 1000 + static_cast<int>(i));
  for (size_t c = 0; c < p.constants.size(); ++c)
    for (rt::Region r : {rt::Region::kConstant, rt::Region::kHostConstant})
      bytes({r, static_cast<int32_t>(c), 0, 4096}).assign(4096, 2000 + static_cast<int>(c));
  // A handle's value: in its own memory (host: kHostHandle, device: kHandle); a device
  // handle's host staging starts as garbage.
  for (size_t h = 0; h < p.handles.size(); ++h) {
    const bool host = p.handles[h]->memory().is_cpu_accessible();
    bytes({rt::Region::kHandle, static_cast<int32_t>(h), 0, 4096}).assign(4096, 3000 + static_cast<int>(h));
    bytes({rt::Region::kHostHandle, static_cast<int32_t>(h), 0, 4096}).assign(4096, host ? 3000 + static_cast<int>(h) : -7);
  }
  std::map<std::string, std::vector<int>> reads;
  for (const rt::Launch& l : p.launches) {
    if (l.kind == rt::LaunchKind::kKernel) {
      auto& seen = reads[l.name];
      for (const rt::MemoryRef& r : l.reads) {
        auto& m = bytes(r);
        seen.insert(seen.end(), m.begin() + r.offset, m.begin() + r.offset + r.bytes);
      }
      const int token = ids.emplace(l.name, static_cast<int>(ids.size()) + 1).first->second;
      for (const rt::MemoryRef& w : l.writes) std::fill_n(bytes(w).begin() + w.offset, w.bytes, token);
    } else {
      const auto src = bytes(l.operands[0]);
      std::copy_n(src.begin() + l.operands[0].offset, l.operands[0].bytes, bytes(l.operands[1]).begin() + l.operands[1].offset);
    }
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    auto& m = bytes({rt::Region::kHostOutput, static_cast<int32_t>(i), 0, 1});
    auto& seen = reads["host_output"];
    seen.insert(seen.end(), m.begin(), m.end());
  }
  for (size_t h = 0; h < p.handles.size(); ++h) {  // the value each handle keeps after the run
    const bool host = p.handles[h]->memory().is_cpu_accessible();
    reads["handle_" + p.handles[h]->name()] =
        bytes({host ? rt::Region::kHostHandle : rt::Region::kHandle, static_cast<int32_t>(h), 0, 1});
  }
  return reads;
}

// Every pair of launches whose byte ranges conflict is ordered by a DAG path.
void check_dag_orders_conflicts(const rt::Program& p, const rt::Schedule& s) {
  const auto n = static_cast<int32_t>(p.launches.size());
  REQUIRE(s.task_count() == n);
  std::vector<std::vector<bool>> reach(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n), false));
  for (int32_t a = n - 1; a >= 0; --a)
    for (int32_t b : s.successors(a)) {
      reach[a][b] = true;
      for (int32_t c = 0; c < n; ++c) reach[a][c] = reach[a][c] || reach[b][c];
    }
  auto conflict = [](const std::vector<rt::MemoryRef>& x, const std::vector<rt::MemoryRef>& y) {
    for (const auto& r : x)
      for (const auto& q : y)
        if (r.overlaps(q)) return true;
    return false;
  };
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = a + 1; b < n; ++b) {
      const auto& la = p.launches[a];
      const auto& lb = p.launches[b];
      if (conflict(la.writes, lb.reads) || conflict(la.reads, lb.writes) || conflict(la.writes, lb.writes)) {
        CAPTURE(la.name);
        CAPTURE(lb.name);
        CHECK(reach[a][b]);
      }
    }
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (const auto& e : s.edges()) edges.emplace_back(e.from, e.to);
  for (int streams : {1, 2, 4}) {
    auto plan = rt::plan_streams(s, {.streams = streams});
    REQUIRE(plan.ok());
    CHECK(rt::verify_stream_plan(n, edges, *plan).ok());
  }
}

void check_placed(const ir::Graph& g, const rt::CompileOptions& options) {
  rt::CompileOptions all_device = options;
  all_device.placement.clear();
  auto reference = rt::build_device_program(g, all_device, rt::cpu_allocator());
  REQUIRE_MESSAGE(reference.ok(), reference.status().to_string());
  auto mixed = rt::build_device_program(g, options, rt::cpu_allocator());
  REQUIRE_MESSAGE(mixed.ok(), mixed.status().to_string());
  const rt::Program& p = **mixed;
  for (const rt::Launch& l : p.launches) {
    CAPTURE(l.name);
    if (l.kind == rt::LaunchKind::kKernel) {
      for (const auto& r : l.operands) CHECK(host_region(r.region) == l.on_host);
    } else if (l.kind == rt::LaunchKind::kDownload) {
      CHECK((!host_region(l.operands[0].region) && host_region(l.operands[1].region)));
    } else if (l.kind == rt::LaunchKind::kUpload) {
      CHECK((host_region(l.operands[0].region) && !host_region(l.operands[1].region)));
    }
  }
  CHECK(simulate(p) == simulate(**reference));
  auto schedule = rt::build_device_schedule(p, options);
  REQUIRE_MESSAGE(schedule.ok(), schedule.status().to_string());
  check_dag_orders_conflicts(p, *schedule);
}

std::vector<std::string> kinds(const rt::Program& p) {
  std::vector<std::string> out;
  for (const rt::Launch& l : p.launches)
    out.push_back(l.kind == rt::LaunchKind::kKernel ? (l.on_host ? "cpu" : "gpu")
                                                    : std::string(rt::launch_kind_name(l.kind)));
  return out;
}

}  // namespace

TEST_CASE("cuda/placement/a cpu node in a chain gets a download before and an upload after") {
  auto g = diamond();
  auto options = placed(g, {"n"});
  auto program = rt::build_device_program(g, options, rt::cpu_allocator());
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const rt::Program& p = **program;
  CHECK(p.mixed());
  // upload x; relu; download a; neg on the cpu; mul; upload n; exp; add; tanh; sigmoid;
  // download y, z.
  const std::vector<std::string> expected = {"upload", "gpu", "download", "cpu", "gpu", "upload", "gpu",
                                             "gpu", "gpu", "gpu", "download", "download"};
  CHECK(kinds(p) == expected);
  const rt::Launch& down = p.launches[2];
  const rt::Launch& neg = p.launches[3];
  CHECK(down.operands[0].region == rt::Region::kArena);
  CHECK(down.operands[1].region == rt::Region::kHostArena);
  CHECK(down.operands[1].offset == down.operands[0].offset);
  CHECK(neg.reads[0].overlaps(down.writes[0]));
  CHECK(p.launches[5].reads[0].overlaps(neg.writes[0]));
  check_placed(g, options);
}

TEST_CASE("cuda/placement/an output written on the cpu is not downloaded") {
  auto g = diamond();
  auto options = placed(g, {"y"});
  auto program = rt::build_device_program(g, options, rt::cpu_allocator());
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const rt::Program& p = **program;
  REQUIRE(p.output_on_host.size() == 2);
  CHECK(p.output_on_host[0]);
  CHECK(!p.output_on_host[1]);
  int downloads_of_y = 0;
  for (const rt::Launch& l : p.launches) {
    if (l.kind == rt::LaunchKind::kDownload && l.operands[1].region == rt::Region::kHostOutput &&
        l.operands[1].slot == 0)
      ++downloads_of_y;
    if (l.on_host) CHECK(l.writes[0].region == rt::Region::kHostOutput);
  }
  CHECK(downloads_of_y == 0);
  check_placed(g, options);
}

TEST_CASE("cuda/placement/a cpu node reads inputs and constants in host memory without copies") {
  auto g = diamond();
  auto options = placed(g, {"a", "m"});
  auto program = rt::build_device_program(g, options, rt::cpu_allocator());
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  for (const rt::Launch& l : (*program)->launches) {
    if (!l.on_host) continue;
    for (const auto& r : l.reads)
      CHECK((r.region == rt::Region::kHostInput || r.region == rt::Region::kHostConstant ||
             r.region == rt::Region::kHostArena));
  }
  check_placed(g, options);
}

TEST_CASE("cuda/placement/mixed programs fuse within each side, never across") {
  auto g = diamond();
  const std::vector<const char*> values = {"a", "n", "m", "e", "s", "y", "z"};
  int fused_host = 0, fused_device = 0;
  for (unsigned mask = 0; mask < (1u << values.size()); ++mask) {
    rt::CompileOptions o;  // fuse on
    for (size_t i = 0; i < values.size(); ++i)
      if (mask & (1u << i)) o.placement[producer_name(g, values[i])] = rt::DeviceType::kCpu;
    CAPTURE(mask);
    auto program = rt::build_device_program(g, o, rt::cpu_allocator());
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    const rt::Program& p = **program;
    for (const rt::Launch& l : p.launches) {
      if (l.kind != rt::LaunchKind::kKernel) continue;
      const auto& group = p.kernels[static_cast<size_t>(l.kernel)].group;
      for (ir::NodeId n : group.nodes) CHECK(o.placement.contains(g.node(n).name) == l.on_host);
      if (group.nodes.size() > 1) ++(l.on_host ? fused_host : fused_device);
      for (const auto& r : l.operands) CHECK(host_region(r.region) == l.on_host);
    }
    auto schedule = rt::build_device_schedule(p, o);
    REQUIRE(schedule.ok());
    check_dag_orders_conflicts(p, *schedule);
  }
  CHECK(fused_host > 0);    // e.g. n -> e on the cpu
  CHECK(fused_device > 0);  // and the same chain on the gpu
}

TEST_CASE("cuda/placement/every placement of the diamond moves the same values") {
  auto g = diamond();
  const std::vector<const char*> values = {"a", "n", "m", "e", "s", "y", "z"};
  for (unsigned mask = 0; mask < (1u << values.size()); ++mask) {
    rt::CompileOptions o;
    o.fuse = false;
    for (size_t i = 0; i < values.size(); ++i)
      if (mask & (1u << i)) o.placement[producer_name(g, values[i])] = rt::DeviceType::kCpu;
    CAPTURE(mask);
    check_placed(g, o);
  }
}

TEST_CASE("cuda/placement/handle ops run on either side and the handle keeps the same value") {
  ir::GraphBuilder b("state");
  b.handle("acc", DType::kF32, {8});
  auto x = b.input("x", DType::kF32, {8});
  auto sum = b.rename(b.add(b.read_handle("acc"), x), "sum");
  b.write_handle("acc", sum);
  b.output(b.rename(b.relu(sum), "y"));
  auto g = *b.build();
  for (bool device_handle : {false, true}) {
    CAPTURE(device_handle);
    auto handle = device_handle
                      ? *rt::BufferHandle::create("acc", DType::kF32, {8}, std::make_shared<test::FakeDevice>())
                      : *rt::BufferHandle::create("acc", DType::kF32, {8});
    for (unsigned mask = 0; mask < (1u << g.nodes.size()); ++mask) {
      rt::CompileOptions o;
      o.fuse = false;
      o.handles = {handle};
      for (size_t i = 0; i < g.nodes.size(); ++i)
        if (mask & (1u << i)) o.placement[g.nodes[i].name] = rt::DeviceType::kCpu;
      CAPTURE(mask);
      check_placed(g, o);
      // A cpu kernel reading the handle first: a device handle is downloaded for it, a host
      // handle's own memory is read as it is.
      auto program = rt::build_device_program(g, o, rt::cpu_allocator());
      REQUIRE(program.ok());
      int downloads = 0;
      bool host_reads_first = false, seen_read = false;
      for (const rt::Launch& l : (*program)->launches) {
        downloads += l.kind == rt::LaunchKind::kDownload && l.operands[0].region == rt::Region::kHandle &&
                     l.name.find("_for_") != std::string::npos;
        if (l.kind != rt::LaunchKind::kKernel || seen_read) continue;
        for (const auto& r : l.reads)
          if (r.region == rt::Region::kHandle || r.region == rt::Region::kHostHandle) {
            seen_read = true;
            host_reads_first = l.on_host;
          }
      }
      if (host_reads_first) CHECK(downloads == (device_handle ? 1 : 0));
    }
  }
}
