// The CUDA device path checked on the CPU: Session(cuda) without a device is a clear error;
// the device program (one arena, transfers as launches, same kernel groups) is well formed,
// its hazard DAG maps onto streams with every edge ordered, CUDA C is generated for every
// kernel; CUDA-graph parameter updates touch exactly the launches whose pointers change;
// a CPU session placing nodes on cuda is unsupported (mixed programs: device_placement_test).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "carve/ir/builder.h"
#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/jit/host_target.h"
#include "carve/runtime/cuda/device_program.h"
#include "carve/runtime/session.h"
#include "carve/runtime/stream_plan.h"
#include "fake_device.h"
#include "test_support.h"

using namespace carve;
using ir::DType;
namespace rt = carve::runtime;

namespace {

// Two branches from x (parallel on streams), a constant, a handle read-modify-write.
ir::Graph branchy() {
  ir::GraphBuilder b("branchy");
  b.handle("acc", DType::kF32, {8});
  auto x = b.input("x", DType::kF32, {8});
  auto w = b.constant("w", DType::kF32, {8}, std::vector<uint8_t>(32, 0));
  auto left = b.exp(b.add(x, w));
  auto right = b.tanh(b.mul(x, x));
  auto sum = b.add(b.read_handle("acc"), b.add(left, right));
  b.write_handle("acc", sum);
  b.output(b.rename(b.relu(sum), "y"));
  b.output(b.rename(b.sigmoid(right), "z"));
  return *b.build();
}

rt::CompileOptions with_handle(std::shared_ptr<rt::BufferHandle> h) {
  rt::CompileOptions o;
  o.fuse = false;  // more launches, more parallel branches
  o.handles = {std::move(h)};
  return o;
}

}  // namespace

TEST_CASE("cuda/session/no device is a clear error") {
  rt::SessionOptions options;
  options.device = {rt::DeviceType::kCuda, 0};
  auto session = rt::Session::create(options);
  if (runtime::cuda::driver_status().ok()) {
    CHECK(session.ok());
    test::skip("a CUDA device is present: the no-device error cannot be observed here");
    return;
  }
  REQUIRE(!session.ok());
  CHECK(session.status().code() == ErrorCode::kUnavailable);
  CHECK(session.status().message().rfind("no CUDA device: ", 0) == 0);
  MESSAGE(session.status().to_string());
  // Nothing else is affected: the CPU path still answers as before.
  auto cpu = rt::Session::create();
  CHECK(cpu.ok() == jit::cpu_jit_available());
  rt::SessionOptions bad = options;
  bad.streams = 0;
  CHECK(rt::Session::create(bad).status().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("cuda/session/device program layout, streams and kernels") {
  auto graph = branchy();
  auto handle = *rt::BufferHandle::create("acc", DType::kF32, {8});
  auto options = with_handle(handle);
  auto program = rt::build_device_program(graph, options, rt::cpu_allocator());
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  const rt::Program& p = **program;
  CHECK(p.on_device);
  // Transfers: upload x and the (host) handle first; download y, z and the handle last.
  REQUIRE(p.launches.size() >= 5);
  CHECK(p.launches[0].kind == rt::LaunchKind::kUpload);
  CHECK(p.launches[0].operands[0].region == rt::Region::kHostInput);
  CHECK(p.launches[1].kind == rt::LaunchKind::kUpload);
  CHECK(p.launches[1].operands[1].region == rt::Region::kHandle);
  const size_t n = p.launches.size();
  CHECK(p.launches[n - 3].kind == rt::LaunchKind::kDownload);
  CHECK(p.launches[n - 2].kind == rt::LaunchKind::kDownload);
  CHECK(p.launches[n - 1].operands[1].region == rt::Region::kHostHandle);
  for (size_t l = 2; l + 3 < n; ++l) CHECK(!rt::is_transfer(p.launches[l]));
  // Every kernel has CUDA C (the same groups the CPU JIT would get) and no CPU code.
  for (const rt::ProgramKernel& k : p.kernels) {
    CHECK(!k.fn);
    auto src = jit::cuda::generate_kernel(p.graph, k.group);
    CHECK_MESSAGE(src.ok(), src.status().to_string());
  }
  // One task per launch; every edge ordered on 1..6 streams; events <= cross edges.
  auto schedule = rt::build_device_schedule(p, options);
  REQUIRE_MESSAGE(schedule.ok(), schedule.status().to_string());
  CHECK(schedule->task_count() == static_cast<int32_t>(n));
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (const auto& e : schedule->edges()) edges.emplace_back(e.from, e.to);
  for (int streams = 1; streams <= 6; ++streams) {
    auto plan = rt::plan_streams(*schedule, {.streams = streams});
    REQUIRE(plan.ok());
    CHECK(rt::verify_stream_plan(schedule->task_count(), edges, *plan).ok());
    CHECK(plan->events <= plan->cross_stream_edges);
    if (streams == 4) {
      CHECK(plan->streams_used >= 2);  // the two branches overlap
      MESSAGE("branchy on 4 streams: " << plan->to_string());
    }
  }
}

TEST_CASE("cuda/session/device handle is used in place, without transfers") {
  auto graph = branchy();
  // A handle in device memory (a fake device allocator standing in for a CudaAllocator).
  auto handle = rt::BufferHandle::create("acc", DType::kF32, {8}, std::make_shared<test::FakeDevice>());
  REQUIRE_MESSAGE(handle.ok(), handle.status().to_string());
  REQUIRE(!(*handle)->memory().is_cpu_accessible());
  auto program = rt::build_device_program(graph, with_handle(*handle), rt::cpu_allocator());
  REQUIRE(program.ok());
  int uploads = 0;
  for (const auto& l : (*program)->launches) uploads += l.kind == rt::LaunchKind::kUpload;
  CHECK(uploads == 1);  // x only: the handle is used in place
}

TEST_CASE("cuda/session/graph replay updates exactly the launches whose pointers change") {
  auto graph = branchy();
  auto handle = *rt::BufferHandle::create("acc", DType::kF32, {8});
  auto program = rt::build_device_program(graph, with_handle(handle), rt::cpu_allocator());
  REQUIRE(program.ok());
  const rt::Program& p = **program;
  std::vector<std::byte> in0(64), in1(64), out(4 * 64), cst(64), hnd(64);
  rt::RegionBases a;
  a.inputs = {in0.data()};
  a.outputs = {out.data(), out.data() + 64};
  a.constants = {cst.data()};
  a.handles = {hnd.data()};
  a.host_inputs = {nullptr};
  a.host_outputs = {nullptr, nullptr};
  a.host_handles = {nullptr};
  CHECK(rt::changed_launches(p, a, a).empty());
  rt::RegionBases b = a;
  b.inputs = {in1.data()};  // the caller passed another device pointer for x
  const auto changed = rt::changed_launches(p, a, b);
  CHECK(!changed.empty());
  for (size_t l = 0; l < p.launches.size(); ++l) {
    const auto& launch = p.launches[l];
    bool reads_x = false;
    for (const auto& r : launch.operands) reads_x = reads_x || r.region == rt::Region::kInput;
    const bool in_changed = std::find(changed.begin(), changed.end(), static_cast<int32_t>(l)) != changed.end();
    CHECK(in_changed == (reads_x && !rt::is_transfer(launch)));
  }
  rt::RegionBases c = a;
  c.host_inputs = {in1.data()};  // host addresses only matter to transfers (outside the graph)
  CHECK(rt::changed_launches(p, a, c).empty());
}

TEST_CASE("cuda/session/mixed placement is reported as unsupported") {
  if (!jit::cpu_jit_available()) {
    test::skip("carve was built without the LLVM CPU JIT (CARVE_WITH_LLVM=OFF): no CPU session to compile with");
    return;
  }
  auto session = rt::Session::create();
  REQUIRE(session.ok());
  auto graph = branchy();
  auto handle = *rt::BufferHandle::create("acc", DType::kF32, {8});
  auto options = with_handle(handle);
  options.placement[graph.nodes.front().name] = rt::DeviceType::kCuda;
  auto compiled = (*session)->compile(graph, options);
  REQUIRE(!compiled.ok());
  CHECK(compiled.status().code() == ErrorCode::kUnsupported);
  MESSAGE(compiled.status().to_string());
  options.placement.clear();
  options.placement["no_such_node"] = rt::DeviceType::kCpu;
  CHECK((*session)->compile(graph, options).status().code() == ErrorCode::kNotFound);
  options.placement.clear();
  options.placement[graph.nodes.front().name] = rt::DeviceType::kCpu;  // same device: fine
  CHECK((*session)->compile(graph, options).ok());
}
