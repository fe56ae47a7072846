// NVRTC compilation with an in-memory and on-disk cache (see nvrtc.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "carve/jit/cuda/cuda_codegen.h"
#include "carve/jit/cuda/nvrtc.h"
#include "nvrtc_api.h"

namespace carve::jit::cuda {

using detail::NvrtcApi;

Status nvrtc_status() { return detail::nvrtc().status(); }

Result<std::string> nvrtc_version() {
  CARVE_ASSIGN_OR_RETURN(const NvrtcApi* api, detail::nvrtc());
  return fmt::format("{}.{}", api->major, api->minor);
}

Result<std::vector<int>> nvrtc_supported_archs() {
  CARVE_ASSIGN_OR_RETURN(const NvrtcApi* api, detail::nvrtc());
  int n = 0;
  if (api->nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) {
    return Status(ErrorCode::kInternal, "nvrtcGetNumSupportedArchs failed");
  }
  std::vector<int> archs(static_cast<size_t>(n));
  if (api->nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) {
    return Status(ErrorCode::kInternal, "nvrtcGetSupportedArchs failed");
  }
  std::sort(archs.begin(), archs.end());
  return archs;
}

Result<std::string> nvrtc_library_dir() {
  CARVE_ASSIGN_OR_RETURN(const NvrtcApi* api, detail::nvrtc());
  return api->library_dir;
}

namespace {

constexpr std::string_view kDiskMagic = "CARVECU1";

struct ParsedArch {
  int cc = 0;
  bool virtual_arch = false;
};

Result<ParsedArch> parse_arch(std::string_view arch) {
  ParsedArch p;
  std::string_view digits = arch;
  if (arch.rfind("sm_", 0) == 0) {
    digits = arch.substr(3);
  } else if (arch.rfind("compute_", 0) == 0) {
    digits = arch.substr(8);
    p.virtual_arch = true;
  }
  if (digits.empty() || digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' is not a CUDA arch (want sm_XY, compute_XY or XY, e.g. sm_90)", arch));
  }
  p.cc = std::stoi(std::string(digits));
  return p;
}

std::string default_cache_dir(const NvrtcOptions& o) {
  if (!o.disk_cache) return {};
  if (!o.cache_dir.empty()) return o.cache_dir;
  if (const char* env = std::getenv("CARVE_CACHE_DIR"); env != nullptr && *env != 0) return env;
  return {};
}

}  // namespace

struct NvrtcCompiler::Impl {
  NvrtcOptions options;
  std::string cache_dir;
  std::string version;
  std::vector<int> archs;
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<const CudaBinary>> memory;
  NvrtcStats stats;
  std::atomic<uint64_t> tmp_counter{0};

  std::string disk_path(const std::string& key) const { return cache_dir + "/cuda-" + key + ".bin"; }

  std::shared_ptr<CudaBinary> read_disk(const std::string& key) const {
    if (cache_dir.empty()) return nullptr;
    std::ifstream in(disk_path(key), std::ios::binary);
    if (!in) return nullptr;
    std::string magic, file_key, kind, target, size_line;
    if (!std::getline(in, magic) || magic != kDiskMagic) return nullptr;
    if (!std::getline(in, file_key) || file_key != key) return nullptr;
    if (!std::getline(in, kind) || (kind != "cubin" && kind != "ptx")) return nullptr;
    if (!std::getline(in, target) || !std::getline(in, size_line)) return nullptr;
    size_t size = 0;
    try {
      size = static_cast<size_t>(std::stoull(size_line));
    } catch (...) {
      return nullptr;
    }
    if (size == 0 || size > (size_t{1} << 30)) return nullptr;
    auto bin = std::make_shared<CudaBinary>();
    bin->bytes.resize(size);
    if (!in.read(reinterpret_cast<char*>(bin->bytes.data()), static_cast<std::streamsize>(size))) return nullptr;
    if (in.peek() != std::char_traits<char>::eof()) return nullptr;  // trailing garbage
    bin->kind = kind == "cubin" ? BinaryKind::kCubin : BinaryKind::kPtx;
    bin->target = target;
    bin->key = key;
    return bin;
  }

  bool write_disk(const CudaBinary& bin) {
    if (cache_dir.empty()) return false;
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    const std::string final_path = disk_path(bin.key);
    const std::string tmp = fmt::format("{}.tmp.{}.{}", final_path, static_cast<long>(::getpid()), tmp_counter.fetch_add(1));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) return false;
      out << kDiskMagic << '\n' << bin.key << '\n' << (bin.kind == BinaryKind::kCubin ? "cubin" : "ptx") << '\n'
          << bin.target << '\n' << bin.bytes.size() << '\n';
      out.write(reinterpret_cast<const char*>(bin.bytes.data()), static_cast<std::streamsize>(bin.bytes.size()));
      out.close();
      if (!out) {
        std::filesystem::remove(tmp, ec);
        return false;
      }
    }
    std::filesystem::rename(tmp, final_path, ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
    return true;
  }
};

NvrtcCompiler::NvrtcCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvrtcCompiler::~NvrtcCompiler() = default;

Result<std::unique_ptr<NvrtcCompiler>> NvrtcCompiler::create(const NvrtcOptions& options) {
  CARVE_ASSIGN_OR_RETURN(std::string version, nvrtc_version());
  CARVE_ASSIGN_OR_RETURN(std::vector<int> archs, nvrtc_supported_archs());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->cache_dir = default_cache_dir(options);
  impl->version = std::move(version);
  impl->archs = std::move(archs);
  return std::unique_ptr<NvrtcCompiler>(new NvrtcCompiler(std::move(impl)));
}

Result<std::string> NvrtcCompiler::resolve_target(std::string_view arch) const {
  CARVE_ASSIGN_OR_RETURN(ParsedArch p, parse_arch(arch));
  const std::vector<int>& archs = impl_->archs;
  if (archs.empty() || p.cc < archs.front()) {
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("arch {} is older than this NVRTC ({}) supports (oldest: sm_{})", arch, impl_->version,
                              archs.empty() ? 0 : archs.front()));
  }
  const bool known = std::find(archs.begin(), archs.end(), p.cc) != archs.end();
  if (known && !p.virtual_arch) return fmt::format("sm_{}", p.cc);
  // PTX for the newest virtual arch not above the request; the driver JITs it.
  int best = archs.front();
  for (int a : archs) {
    if (a <= p.cc) best = a;
  }
  return fmt::format("compute_{}", best);
}

std::vector<std::string> NvrtcCompiler::options_for(std::string_view target) const {
  std::vector<std::string> o;
  o.push_back(fmt::format("--gpu-architecture={}", target));
  o.push_back("-default-device");
  o.push_back("--std=c++17");
  if (impl_->options.fast_math) o.push_back("--use_fast_math");
  for (const auto& e : impl_->options.extra) o.push_back(e);
  return o;
}

Result<std::shared_ptr<const CudaBinary>> NvrtcCompiler::compile(std::string_view source, std::string_view arch) {
  CARVE_ASSIGN_OR_RETURN(const NvrtcApi* api, detail::nvrtc());
  CARVE_ASSIGN_OR_RETURN(std::string target, resolve_target(arch));
  const std::vector<std::string> opts = options_for(target);
  const std::string key = compile_cache_key(source, target, opts, impl_->version);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->stats.requests;
    if (impl_->options.memory_cache) {
      auto it = impl_->memory.find(key);
      if (it != impl_->memory.end()) {
        ++impl_->stats.memory_hits;
        auto hit = std::make_shared<CudaBinary>(*it->second);
        hit->from_memory_cache = true;
        return std::shared_ptr<const CudaBinary>(std::move(hit));
      }
    }
  }
  if (auto disk = impl_->read_disk(key)) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->stats.disk_hits;
    disk->from_disk_cache = true;
    if (impl_->options.memory_cache) impl_->memory.emplace(key, disk);
    return std::shared_ptr<const CudaBinary>(disk);
  }

  const auto t0 = std::chrono::steady_clock::now();
  const std::string src(source);
  nvrtcProgram prog = nullptr;
  nvrtcResult r = api->nvrtcCreateProgram(&prog, src.c_str(), "carve_kernel.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return Status(ErrorCode::kInternal, fmt::format("nvrtcCreateProgram failed: {}", api->nvrtcGetErrorString(r)));
  }
  struct Destroy {
    const NvrtcApi* api;
    nvrtcProgram* prog;
    ~Destroy() { api->nvrtcDestroyProgram(prog); }
  } destroy{api, &prog};
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  r = api->nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::string log;
  size_t log_size = 0;
  if (api->nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (api->nvrtcGetProgramLog(prog, log.data()) == NVRTC_SUCCESS) {
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    } else {
      log.clear();
    }
  }
  if (r != NVRTC_SUCCESS) {
    return Status(ErrorCode::kInternal, fmt::format("NVRTC compilation failed for {} ({}):\n{}", target,
                                                    api->nvrtcGetErrorString(r), log));
  }
  auto bin = std::make_shared<CudaBinary>();
  bin->target = target;
  bin->key = key;
  bin->log = std::move(log);
  if (target.rfind("sm_", 0) == 0) {
    bin->kind = BinaryKind::kCubin;
    size_t size = 0;
    if (api->nvrtcGetCUBINSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
      return Status(ErrorCode::kInternal, "nvrtcGetCUBINSize failed");
    }
    bin->bytes.resize(size);
    if (api->nvrtcGetCUBIN(prog, reinterpret_cast<char*>(bin->bytes.data())) != NVRTC_SUCCESS) {
      return Status(ErrorCode::kInternal, "nvrtcGetCUBIN failed");
    }
  } else {
    bin->kind = BinaryKind::kPtx;
    size_t size = 0;
    if (api->nvrtcGetPTXSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
      return Status(ErrorCode::kInternal, "nvrtcGetPTXSize failed");
    }
    bin->bytes.resize(size);  // includes the trailing NUL
    if (api->nvrtcGetPTX(prog, reinterpret_cast<char*>(bin->bytes.data())) != NVRTC_SUCCESS) {
      return Status(ErrorCode::kInternal, "nvrtcGetPTX failed");
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool wrote = impl_->write_disk(*bin);
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++impl_->stats.compiles;
  impl_->stats.compile_seconds += seconds;
  if (wrote) ++impl_->stats.disk_writes;
  if (impl_->options.memory_cache) impl_->memory.emplace(key, bin);
  return std::shared_ptr<const CudaBinary>(bin);
}

NvrtcStats NvrtcCompiler::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

const std::string& NvrtcCompiler::cache_dir() const { return impl_->cache_dir; }

void NvrtcCompiler::clear_memory_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->memory.clear();
}

}  // namespace carve::jit::cuda
