// Writing a whole file, with the operating system's reason on failure.
//
// Every file carve writes (traces, JSON reports, .npy arrays, CSV plans, SVG) goes through
// write_file so that a failure names the path and says why ("No space left on device",
// "Permission denied") instead of only that it failed.
// Thread-safety: distinct paths may be written concurrently. Errors: kIoError
// "cannot open 'PATH' for writing: REASON" / "cannot write 'PATH': REASON" (a failed
// write may leave a partial file; callers that need all-or-nothing write elsewhere and rename).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "carve/status.h"

namespace carve {

// Creates or truncates `path` and writes `bytes`, then closes it (errors of close count:
// delayed write errors such as ENOSPC surface there).
Status write_file(const std::string& path, std::span<const std::byte> bytes);
Status write_file(const std::string& path, std::string_view text);

}  // namespace carve
