// write_file (carve/file.h): POSIX calls, so errno is always the reason reported.
#include "carve/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace carve {

namespace {

Status io_error(std::string_view what, const std::string& path, int err) {
  return Status(ErrorCode::kIoError, fmt::format("{} '{}': {}", what, path, std::strerror(err)));
}

}  // namespace

Status write_file(const std::string& path, std::span<const std::byte> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status(ErrorCode::kIoError, fmt::format("cannot open '{}' for writing: {}", path, std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return io_error("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return io_error("cannot write", path, errno);
  return Status();
}

Status write_file(const std::string& path, std::string_view text) {
  return write_file(path, std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()));
}

}  // namespace carve
