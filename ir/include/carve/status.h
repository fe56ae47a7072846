// carve's one error type: Status (code + message) and Result<T> (value or Status).
//
// Contract: every fallible function in carve returns Status or Result<T>; both are
// [[nodiscard]], so an error cannot be dropped silently. Messages name the thing
// that is wrong (node, value, line:column, buffer id) and why. Neither type throws.
// Thread-safety: plain values; safe to copy and move across threads.
#pragma once

#include <cassert>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace carve {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,   // caller passed something malformed
  kParseError,        // text/CSV/file syntax; message carries line:column
  kVerifyError,       // graph failed the verifier
  kShapeError,        // shape inference failed (rank, broadcast, dims)
  kTypeMismatch,      // dtype does not match
  kOutOfBounds,       // offset/size/index outside a buffer or range
  kNotAllocated,      // buffer has no memory yet
  kNotCpuAccessible,  // memory lives on a device
  kReadOnly,          // write through a read-only buffer
  kOutOfMemory,       // an allocator failed
  kIoError,           // file system
  kNotFound,          // unknown name/id
  kUnsupported,       // valid request carve does not do
  kInfeasible,        // e.g. no plan fits the capacity
  kTimeout,           // a time limit was reached
  kCancelled,         // the caller cancelled (a stop request or deadline, RunOptions)
  kUnavailable,       // missing device/driver
  kInternal,          // a carve bug
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: <message>"
  std::string to_string() const;

  // Prefix context to the message ("while parsing x: ...").
  Status with_context(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) = default;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(data_).ok() && "Result from an ok Status has no value");
    if (std::get<Status>(data_).ok()) data_ = Status(ErrorCode::kInternal, "Result built from ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }

  // Precondition: ok(). Checked with assert in debug builds.
  T& value() & { assert(ok()); return std::get<T>(data_); }
  const T& value() const& { assert(ok()); return std::get<T>(data_); }
  // By value, so `for (x : *make_result())` cannot dangle into a destroyed temporary.
  T value() && { assert(ok()); return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; an ok Status when ok().
  Status status() const { return ok() ? Status() : std::get<Status>(data_); }

 private:
  std::variant<T, Status> data_;
};

// Runs `body` (returning Status or Result<T>) so that no exception leaves it: std::bad_alloc
// becomes kOutOfMemory and any other exception kInternal, the message led by `what`. Public
// entry points whose work allocates by the size of their input wrap their body in it.
template <typename Body>
auto no_exceptions(std::string_view what, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::kOutOfMemory, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return Status(ErrorCode::kInternal, std::string(what) + ": unexpected exception: " + e.what());
  } catch (...) {
    return Status(ErrorCode::kInternal, std::string(what) + ": unexpected exception");
  }
}

}  // namespace carve

#define CARVE_CONCAT_INNER_(a, b) a##b
#define CARVE_CONCAT_(a, b) CARVE_CONCAT_INNER_(a, b)

// Return the Status from the enclosing function if `expr` is an error.
#define CARVE_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::carve::Status carve_status_ = (expr);         \
    if (!carve_status_.ok()) return carve_status_;  \
  } while (0)

// `CARVE_ASSIGN_OR_RETURN(auto x, f());` — unwrap a Result or return its error.
#define CARVE_ASSIGN_OR_RETURN(lhs, expr) \
  CARVE_ASSIGN_OR_RETURN_IMPL_(CARVE_CONCAT_(carve_result_, __LINE__), lhs, expr)
#define CARVE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
