// Small syscall helpers that turn errno into a Status with context.
#ifndef CODEBOX_BASE_IO_H_
#define CODEBOX_BASE_IO_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::base {

// IoError("what: strerror(errno)"), capturing errno at the call.
Status ErrnoStatus(std::string_view what);
Status ErrnoStatus(std::string_view what, int err);

// Writes all of data, retrying on EINTR and short writes. Blocking fds only.
Status WriteAll(int fd, std::string_view data);
// Reads exactly n bytes; kBoxCrashed-free: returns IoError on EOF before n ("unexpected EOF").
Status ReadExact(int fd, char* out, size_t n);
// Reads a whole (small) file.
StatusOr<std::string> ReadFile(const std::string& path);
// Writes a whole file (O_TRUNC), atomically via a temp file and rename when atomic is set.
Status WriteFile(const std::string& path, std::string_view data, bool atomic = false);

// Names in a directory, without "." and ".."; empty if it cannot be opened.
std::vector<std::string> ListDirectory(const std::string& dir);

// socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC), with send buffers as large as allowed.
StatusOr<std::pair<UniqueFd, UniqueFd>> SocketPair();

// Sets or clears O_NONBLOCK / FD_CLOEXEC.
Status SetNonBlocking(int fd, bool on);
Status SetCloseOnExec(int fd, bool on);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_IO_H_
