#include "base/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace codebox::base {

Status ErrnoStatus(std::string_view what, int err) {
  return IoError(std::string(what) + ": " + std::strerror(err));
}

Status ErrnoStatus(std::string_view what) { return ErrnoStatus(what, errno); }

Status WriteAll(int fd, std::string_view data) {
  bool is_socket = true;
  while (!data.empty()) {
    // send(MSG_NOSIGNAL) on sockets: a peer that died is an EPIPE error, not a SIGPIPE that
    // kills the caller's process.
    ssize_t n = -1;
    if (is_socket) {
      n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == ENOTSOCK) is_socket = false;
    }
    if (!is_socket) n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status ReadExact(int fd, char* out, size_t n) {
  while (n > 0) {
    ssize_t got = ::read(fd, out, n);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read");
    }
    if (got == 0) return IoError("unexpected end of stream");
    out += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open " + path);
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + path);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

Status WriteFile(const std::string& path, std::string_view data, bool atomic) {
  std::string target = atomic ? path + ".tmp." + std::to_string(::getpid()) : path;
  UniqueFd fd(::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus("open " + target);
  RETURN_IF_ERROR(WriteAll(fd.get(), data).WithContext("write " + target));
  fd.reset();
  if (atomic && ::rename(target.c_str(), path.c_str()) != 0) {
    Status st = ErrnoStatus("rename " + target + " -> " + path);
    ::unlink(target.c_str());
    return st;
  }
  return Status::Ok();
}

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

StatusOr<std::pair<UniqueFd, UniqueFd>> SocketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus("socketpair");
  }
  // Unix stream sockets bound data in flight by the sender's buffer (default ~208 KiB, one
  // 256 KiB data frame does not fit): ask for 4 MiB, which the kernel caps at wmem_max.
  const int kBuffer = 4 << 20;
  for (int fd : fds) (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kBuffer, sizeof kBuffer);
  return std::make_pair(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

static Status SetFdFlag(int fd, int get_cmd, int set_cmd, int flag, bool on) {
  int flags = ::fcntl(fd, get_cmd);
  if (flags < 0) return ErrnoStatus("fcntl get");
  flags = on ? (flags | flag) : (flags & ~flag);
  if (::fcntl(fd, set_cmd, flags) < 0) return ErrnoStatus("fcntl set");
  return Status::Ok();
}

Status SetNonBlocking(int fd, bool on) { return SetFdFlag(fd, F_GETFL, F_SETFL, O_NONBLOCK, on); }
Status SetCloseOnExec(int fd, bool on) { return SetFdFlag(fd, F_GETFD, F_SETFD, FD_CLOEXEC, on); }

}  // namespace codebox::base
