// The objects behind carve.h's opaque handles, and the helpers every entry point uses to
// turn carve::Status into carve_status* and to keep exceptions from crossing the ABI.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "carve/carve.h"
#include "carve/runtime/buffer.h"
#include "carve/runtime/session.h"
#include "carve/status.h"

struct carve_status {
  carve_code code;
  std::string message;
};

struct carve_tensor {
  carve::runtime::Buffer buffer;
  std::vector<int64_t> dims;  // carve_tensor_dims points here
};

struct carve_session {
  std::unique_ptr<carve::runtime::Session> session;
};

struct carve_cancel {
  std::stop_source source;
};

struct carve_program {
  struct Info {
    std::string name;
    carve_dtype dtype = CARVE_F32;
    std::vector<int64_t> dims;
  };
  struct ValuePlan {
    std::string name, kind;
    bool in_arena = false;
    uint64_t buffer_id = 0, storage_id = 0;
    int64_t offset = -1, bytes = 0;
  };
  std::unique_ptr<carve::runtime::CompiledProgram> program;
  std::vector<Info> inputs, outputs, handles;  // handles: graph order
  std::vector<ValuePlan> values;               // graph value-id order
  mutable std::mutex record_mutex;             // guards last_record
  std::optional<carve::runtime::RunRecord> last_record;
};

namespace carve::capi {

// A status the ABI hands out (nullptr for ok). Never throws: when even the status cannot
// be allocated, a static out-of-memory status stands in (carve_status_free skips it).
carve_status* make_status(const Status& status) noexcept;
carve_status* out_of_memory_status() noexcept;

// "FN: 'ARG' is NULL" as kInvalidArgument.
Status null_argument(const char* fn, const char* arg);

// Runs `body` (returning Status) with every exception turned into a status: this is the
// ABI boundary.
template <typename Body>
carve_status* guarded(const char* fn, Body&& body) noexcept {
  try {
    return make_status(body());
  } catch (const std::bad_alloc&) {
    return out_of_memory_status();
  } catch (const std::exception& e) {
    return make_status(Status(ErrorCode::kInternal, std::string(fn) + ": unexpected exception: " + e.what()));
  } catch (...) {
    return make_status(Status(ErrorCode::kInternal, std::string(fn) + ": unexpected exception"));
  }
}

// Options structs grow at the end: read the caller's `size` bytes, defaults (zeros) past
// them. nullptr = all defaults.
template <typename T>
Result<T> read_options(const T* in, const char* fn, const char* what) {
  T options{};
  options.size = sizeof(T);
  if (in == nullptr) return options;
  if (in->size < sizeof(size_t))
    return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": " + what + ".size is " + std::to_string(in->size) +
                                                   "; set it to sizeof(" + what + ")");
  std::memcpy(&options, in, std::min(in->size, sizeof(T)));
  return options;
}

// Writes `value` into the caller's struct, at most the caller's `size` bytes.
template <typename T>
Status write_out(const T& value, T* out, const char* fn, const char* what) {
  if (out->size < sizeof(size_t))
    return Status(ErrorCode::kInvalidArgument, std::string(fn) + ": " + what + ".size is " +
                                                   std::to_string(out->size) + "; set it to sizeof(" + what + ")");
  const size_t size = out->size;
  std::memcpy(out, &value, std::min(size, sizeof(T)));
  out->size = size;
  return Status();
}

Result<ir::DType> to_dtype(carve_dtype dtype);
carve_dtype from_dtype(ir::DType dtype);
carve_tensor* new_tensor(runtime::Buffer buffer);

}  // namespace carve::capi
