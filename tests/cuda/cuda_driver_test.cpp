// CUDA backend: the dlopen loaders (driver, NVRTC), NVRTC targets, cache keys and the disk
// cache. Runs without a GPU: NVRTC compiles for any arch on the host. Tests that need a
// device call carve::test::skip("no CUDA device: ...").
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "carve/ir/builder.h"
#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/runtime/cuda/cuda_device.h"
#include "carve/runtime/cuda/cuda_runner.h"
#include "carve/jit/cuda/nvrtc.h"
#include "test_support.h"

namespace carve::jit::cuda {

using namespace carve::runtime::cuda;
using namespace carve::reference;
namespace {

constexpr std::string_view kTinyKernel = R"(extern "C" __global__ void carve_kernel(float* p0) { p0[threadIdx.x] = 2.0f * threadIdx.x; }
)";

// Skips (returns false) when NVRTC cannot be loaded here.
bool have_nvrtc() {
  Status s = nvrtc_status();
  if (!s.ok()) {
    carve::test::skip("no NVRTC: " + s.message());
    return false;
  }
  return true;
}

std::string temp_dir(const std::string& tag) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() / ("carve-cuda-" + tag + "-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("cuda/driver/no device is kUnavailable with a reason") {
  Status s = driver_status();
  if (s.ok()) {
    // A GPU machine: the same entry points must work instead.
    auto info = device_info(0);
    REQUIRE_MESSAGE(info.ok(), info.status().to_string());
    CHECK(!info->name.empty());
    CHECK(info->cc_major >= 3);
    CHECK(info->total_memory > 0);
    MESSAGE("device: " << info->to_string());
    return;
  }
  CHECK(s.code() == ErrorCode::kUnavailable);
  CHECK(s.message().rfind("no CUDA device: ", 0) == 0);
  CHECK(s.message().size() > std::string_view("no CUDA device: ").size());
  MESSAGE(s.message());
  // Every device entry point reports the same, and nothing crashes.
  auto count = device_count();
  REQUIRE(!count.ok());
  CHECK(count.status().code() == ErrorCode::kUnavailable);
  CHECK(count.status().message() == s.message());
  auto info = device_info(0);
  REQUIRE(!info.ok());
  CHECK(info.status().code() == ErrorCode::kUnavailable);
}

TEST_CASE("cuda/driver/context without a device is kUnavailable") {
  if (driver_status().ok()) {
    auto ctx = CudaContext::create(0);
    REQUIRE_MESSAGE(ctx.ok(), ctx.status().to_string());
    auto p = (*ctx)->allocate(1024);
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    std::vector<uint8_t> host(1024, 7), back(1024, 0);
    CHECK((*ctx)->copy_to_device(*p, host.data(), host.size()).ok());
    CHECK((*ctx)->copy_from_device(back.data(), *p, back.size()).ok());
    CHECK(back == host);
    CHECK((*ctx)->free(*p).ok());
    auto bad = CudaContext::create(1 << 20);
    CHECK(bad.status().code() == ErrorCode::kUnavailable);
    return;
  }
  auto ctx = CudaContext::create(0);
  REQUIRE(!ctx.ok());
  CHECK(ctx.status().code() == ErrorCode::kUnavailable);
  CHECK(ctx.status().message().rfind("no CUDA device: ", 0) == 0);
  // The whole-graph runner reports the same and leaves handles alone.
  ir::GraphBuilder b;
  auto x = b.input("x", ir::DType::kF32, {4});
  b.output(b.relu(x));
  auto g = b.build();
  REQUIRE(g.ok());
  HostTensor in = HostTensor::from<float>({4}, {1, -1, 2, -2});
  auto out = run_graph(*g, std::span<const HostTensor>(&in, 1));
  REQUIRE(!out.ok());
  CHECK(out.status().code() == ErrorCode::kUnavailable);
  CHECK(out.status().message().rfind("no CUDA device: ", 0) == 0);
}

TEST_CASE("cuda/gpu/device memory streams and events") {
  Status s = driver_status();
  if (!s.ok()) {
    carve::test::skip(s.message());
    return;
  }
  auto ctx = CudaContext::create(0);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().to_string());
  auto stream = CudaStream::create(*ctx);
  REQUIRE_MESSAGE(stream.ok(), stream.status().to_string());
  auto e0 = CudaEvent::create(*ctx);
  auto e1 = CudaEvent::create(*ctx);
  REQUIRE(e0.ok());
  REQUIRE(e1.ok());
  auto nv = NvrtcCompiler::create({});
  REQUIRE_MESSAGE(nv.ok(), nv.status().to_string());
  auto bin = (*nv)->compile(kTinyKernel, (*ctx)->info().arch());
  REQUIRE_MESSAGE(bin.ok(), bin.status().to_string());
  auto mod = CudaModule::load(*ctx, **bin);
  REQUIRE_MESSAGE(mod.ok(), mod.status().to_string());
  auto p = (*ctx)->allocate(32 * sizeof(float));
  REQUIRE(p.ok());
  LaunchConfig c;
  c.block[0] = 32;
  CHECK((*e0)->record(stream->get()).ok());
  DevicePtr params[] = {*p};
  REQUIRE((*mod)->launch(c, params, stream->get()).ok());
  CHECK((*e1)->record(stream->get()).ok());
  CHECK((*stream)->synchronize().ok());
  auto ms = CudaEvent::elapsed_ms(**e0, **e1);
  CHECK(ms.ok());
  std::vector<float> host(32);
  REQUIRE((*ctx)->copy_from_device(host.data(), *p, host.size() * sizeof(float)).ok());
  for (int i = 0; i < 32; ++i) CHECK(host[static_cast<size_t>(i)] == 2.0f * i);
  CHECK((*ctx)->free(*p).ok());
}

TEST_CASE("cuda/nvrtc/loads with its builtins and lists archs") {
  if (!have_nvrtc()) return;
  auto version = nvrtc_version();
  REQUIRE(version.ok());
  CHECK(version->rfind("13.", 0) == 0);
  auto archs = nvrtc_supported_archs();
  REQUIRE(archs.ok());
  CHECK(std::find(archs->begin(), archs->end(), 90) != archs->end());
  auto dir = nvrtc_library_dir();
  REQUIRE(dir.ok());
  CHECK(!dir->empty());
  bool builtins = false;
  for (const auto& e : std::filesystem::directory_iterator(*dir)) {
    if (e.path().filename().string().rfind("libnvrtc-builtins.so.", 0) == 0) builtins = true;
  }
  CHECK_MESSAGE(builtins, "no libnvrtc-builtins beside libnvrtc in " << *dir);
  MESSAGE("NVRTC " << *version << " from " << *dir);
}

TEST_CASE("cuda/nvrtc/targets cubin for known archs and ptx otherwise") {
  if (!have_nvrtc()) return;
  auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.disk_cache = false; return o; }());
  REQUIRE(nv.ok());
  NvrtcCompiler& c = **nv;
  CHECK(*c.resolve_target("sm_90") == "sm_90");
  CHECK(*c.resolve_target("90") == "sm_90");
  CHECK(*c.resolve_target("compute_80") == "compute_80");
  auto archs = nvrtc_supported_archs();
  REQUIRE(archs.ok());
  CHECK(*c.resolve_target("sm_999") == "compute_" + std::to_string(archs->back()));
  CHECK(c.resolve_target("sm_20").status().code() == ErrorCode::kInvalidArgument);
  CHECK(c.resolve_target("gpu").status().code() == ErrorCode::kInvalidArgument);
  CHECK(c.resolve_target("sm_").status().code() == ErrorCode::kInvalidArgument);

  auto cubin = c.compile(kTinyKernel, "sm_90");
  REQUIRE_MESSAGE(cubin.ok(), cubin.status().to_string());
  CHECK((*cubin)->kind == BinaryKind::kCubin);
  CHECK((*cubin)->target == "sm_90");
  REQUIRE((*cubin)->bytes.size() > 4);
  CHECK((*cubin)->bytes[0] == 0x7f);  // ELF
  CHECK((*cubin)->bytes[1] == 'E');

  auto ptx = c.compile(kTinyKernel, "sm_999");
  REQUIRE_MESSAGE(ptx.ok(), ptx.status().to_string());
  CHECK((*ptx)->kind == BinaryKind::kPtx);
  const std::string text(reinterpret_cast<const char*>((*ptx)->bytes.data()));
  CHECK(text.find(".target") != std::string::npos);
  CHECK(text.find("carve_kernel") != std::string::npos);
  CHECK((*ptx)->bytes.back() == 0);

  const auto opts = c.options_for("sm_90");
  CHECK(std::find(opts.begin(), opts.end(), "--gpu-architecture=sm_90") != opts.end());
  CHECK(std::find(opts.begin(), opts.end(), "-default-device") != opts.end());
  CHECK(std::find(opts.begin(), opts.end(), "--use_fast_math") == opts.end());
}

TEST_CASE("cuda/nvrtc/compile errors carry the log") {
  if (!have_nvrtc()) return;
  auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.disk_cache = false; return o; }());
  REQUIRE(nv.ok());
  auto r = (*nv)->compile("extern \"C\" __global__ void carve_kernel() { undefined_thing(); }\n", "sm_90");
  REQUIRE(!r.ok());
  CHECK(r.status().code() == ErrorCode::kInternal);
  CHECK(r.status().message().find("NVRTC compilation failed") != std::string::npos);
  CHECK(r.status().message().find("undefined_thing") != std::string::npos);
}

TEST_CASE("cuda/nvrtc/sha256 and cache keys") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000, 'a')) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
  const std::vector<std::string> o1 = {"--gpu-architecture=sm_90", "-default-device"};
  const std::vector<std::string> o2 = {"--gpu-architecture=sm_90", "-default-device", "--use_fast_math"};
  const std::string k = compile_cache_key("src", "sm_90", o1, "13.0");
  CHECK(k.size() == 64);
  CHECK(k == compile_cache_key("src", "sm_90", o1, "13.0"));
  CHECK(k != compile_cache_key("src2", "sm_90", o1, "13.0"));
  CHECK(k != compile_cache_key("src", "sm_80", o1, "13.0"));
  CHECK(k != compile_cache_key("src", "sm_90", o2, "13.0"));
  CHECK(k != compile_cache_key("src", "sm_90", o1, "13.1"));
  // Field boundaries matter: moving bytes between fields changes the key.
  CHECK(compile_cache_key("ab", "c", {}, "v") != compile_cache_key("a", "bc", {}, "v"));
  if (!nvrtc_status().ok()) return;
  // Through the compiler: a different arch or option is a different binary and key.
  auto a = NvrtcCompiler::create([&] { NvrtcOptions o; o.disk_cache = false; return o; }());
  auto f = NvrtcCompiler::create([&] { NvrtcOptions o; o.disk_cache = false; o.fast_math = true; return o; }());
  REQUIRE(a.ok());
  REQUIRE(f.ok());
  auto k90 = (*a)->compile(kTinyKernel, "sm_90");
  auto k80 = (*a)->compile(kTinyKernel, "sm_80");
  auto kf = (*f)->compile(kTinyKernel, "sm_90");
  auto again = (*a)->compile(kTinyKernel, "sm_90");
  REQUIRE(k90.ok());
  REQUIRE(k80.ok());
  REQUIRE(kf.ok());
  REQUIRE(again.ok());
  CHECK((*k90)->key != (*k80)->key);
  CHECK((*k90)->key != (*kf)->key);
  CHECK((*again)->from_memory_cache);
  CHECK((*again)->key == (*k90)->key);
  CHECK((*again)->bytes == (*k90)->bytes);
  CHECK((*a)->stats().compiles == 2);
  CHECK((*a)->stats().memory_hits == 1);
}

TEST_CASE("cuda/nvrtc/disk cache round trip") {
  if (!have_nvrtc()) return;
  const std::string dir = temp_dir("cache");
  std::string key;
  std::vector<uint8_t> bytes;
  {
    auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.cache_dir = dir; return o; }());
    REQUIRE(nv.ok());
    CHECK((*nv)->cache_dir() == dir);
    auto bin = (*nv)->compile(kTinyKernel, "sm_90");
    REQUIRE_MESSAGE(bin.ok(), bin.status().to_string());
    CHECK(!(*bin)->from_disk_cache);
    CHECK((*nv)->stats().disk_writes == 1);
    key = (*bin)->key;
    bytes = (*bin)->bytes;
  }
  const std::string path = dir + "/cuda-" + key + ".bin";
  REQUIRE(std::filesystem::exists(path));
  {
    // A fresh compiler (think: a second process) loads it without compiling.
    auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.cache_dir = dir; return o; }());
    REQUIRE(nv.ok());
    auto bin = (*nv)->compile(kTinyKernel, "sm_90");
    REQUIRE(bin.ok());
    CHECK((*bin)->from_disk_cache);
    CHECK((*bin)->bytes == bytes);
    CHECK((*bin)->kind == BinaryKind::kCubin);
    CHECK((*nv)->stats().compiles == 0);
    CHECK((*nv)->stats().disk_hits == 1);
  }
  {
    // A corrupt (truncated) file is ignored and rewritten.
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
    auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.cache_dir = dir; return o; }());
    REQUIRE(nv.ok());
    auto bin = (*nv)->compile(kTinyKernel, "sm_90");
    REQUIRE(bin.ok());
    CHECK(!(*bin)->from_disk_cache);
    CHECK((*bin)->bytes == bytes);
    CHECK((*nv)->stats().compiles == 1);
  }
  {
    // disk_cache = false never reads it.
    auto nv = NvrtcCompiler::create([&] { NvrtcOptions o; o.cache_dir = dir; o.disk_cache = false; return o; }());
    REQUIRE(nv.ok());
    CHECK((*nv)->cache_dir().empty());
    auto bin = (*nv)->compile(kTinyKernel, "sm_90");
    REQUIRE(bin.ok());
    CHECK(!(*bin)->from_disk_cache);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace carve::jit::cuda
