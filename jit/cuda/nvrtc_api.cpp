// dlopen loader for NVRTC (see nvrtc_api.h, nvrtc.h).
#include "nvrtc_api.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace carve::jit::cuda::detail {
namespace {

#define CARVE_STR_(x) #x
#define CARVE_STR(x) CARVE_STR_(x)

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}

// Opens `path`, returning the handle or appending the error to `tried`.
void* try_open(const std::string& path, std::string& tried) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) tried += fmt::format("{}{}", tried.empty() ? "" : "; ", dl_error());
  return h;
}

Result<NvrtcApi*> load_nvrtc() {
  static NvrtcApi api;
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("CARVE_NVRTC_LIBRARY"); p != nullptr && *p != 0) {
    candidates.emplace_back(p);
  } else {
    candidates.push_back(fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000));
    candidates.push_back("libnvrtc.so");
#ifdef CARVE_NVRTC_LIBRARY_DIR
    candidates.push_back(fmt::format("{}/libnvrtc.so.{}", CARVE_NVRTC_LIBRARY_DIR, CUDA_VERSION / 1000));
    candidates.push_back(std::string(CARVE_NVRTC_LIBRARY_DIR) + "/libnvrtc.so");
#endif
    if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != 0) {
      candidates.push_back(fmt::format("{}/lib64/libnvrtc.so.{}", home, CUDA_VERSION / 1000));
    }
    candidates.push_back(fmt::format("/usr/local/cuda/lib64/libnvrtc.so.{}", CUDA_VERSION / 1000));
  }
  std::string tried;
  void* lib = nullptr;
  for (const auto& c : candidates) {
    lib = try_open(c, tried);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) return Status(ErrorCode::kUnavailable, fmt::format("NVRTC not available: {}", tried));
  api.library = lib;
  std::vector<std::string> missing;
#define CARVE_NVRTC_RESOLVE(fn)                                               \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, CARVE_STR(fn)));    \
  if (api.fn == nullptr) missing.push_back(CARVE_STR(fn));
  CARVE_NVRTC_FNS(CARVE_NVRTC_RESOLVE)
#undef CARVE_NVRTC_RESOLVE
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    return Status(ErrorCode::kUnavailable, fmt::format("NVRTC not available: the library lacks {}", names));
  }
  if (api.nvrtcVersion(&api.major, &api.minor) != NVRTC_SUCCESS) {
    return Status(ErrorCode::kUnavailable, "NVRTC not available: nvrtcVersion failed");
  }
  // NVRTC's directory, then preload its builtins from there (NVRTC dlopens them by bare
  // soname, which fails when that directory is not on the loader's search path).
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(api.nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(info.dli_fname, ec);
    if (ec) p = info.dli_fname;
    api.library_dir = p.parent_path().string();
  }
  if (!api.library_dir.empty()) {
    std::string ignored;
    const std::string exact = fmt::format("{}/libnvrtc-builtins.so.{}.{}", api.library_dir, api.major, api.minor);
    api.builtins = try_open(exact, ignored);
    if (api.builtins == nullptr) {
      // Any libnvrtc-builtins.so.<major>* beside it (minor versions differ across packagings).
      std::error_code ec;
      const std::string prefix = fmt::format("libnvrtc-builtins.so.{}", api.major);
      for (const auto& e : std::filesystem::directory_iterator(api.library_dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) == 0) {
          api.builtins = try_open(e.path().string(), ignored);
          if (api.builtins != nullptr) break;
        }
      }
    }
  }
  return &api;
}

}  // namespace

Result<const NvrtcApi*> nvrtc() {
  static const Result<NvrtcApi*> loaded = load_nvrtc();
  if (!loaded.ok()) return loaded.status();
  return static_cast<const NvrtcApi*>(*loaded);
}

}  // namespace carve::jit::cuda::detail
