#include "carve/status.h"

#include <fmt/format.h>

namespace carve {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "Ok";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kParseError:
      return "ParseError";
    case ErrorCode::kVerifyError:
      return "VerifyError";
    case ErrorCode::kShapeError:
      return "ShapeError";
    case ErrorCode::kTypeMismatch:
      return "TypeMismatch";
    case ErrorCode::kOutOfBounds:
      return "OutOfBounds";
    case ErrorCode::kNotAllocated:
      return "NotAllocated";
    case ErrorCode::kNotCpuAccessible:
      return "NotCpuAccessible";
    case ErrorCode::kReadOnly:
      return "ReadOnly";
    case ErrorCode::kOutOfMemory:
      return "OutOfMemory";
    case ErrorCode::kIoError:
      return "IoError";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kUnsupported:
      return "Unsupported";
    case ErrorCode::kInfeasible:
      return "Infeasible";
    case ErrorCode::kTimeout:
      return "Timeout";
    case ErrorCode::kCancelled:
      return "Cancelled";
    case ErrorCode::kUnavailable:
      return "Unavailable";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  return fmt::format("{}: {}", error_code_name(code_), message_);
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

}  // namespace carve
