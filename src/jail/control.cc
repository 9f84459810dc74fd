#include "jail/control.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "base/io.h"

namespace codebox::jail {
namespace {

// Values never contain newlines (paths with one are refused before they get here).
void Put(std::ostringstream& os, const char* key, const std::string& value) {
  os << key << '=' << value << '\n';
}

std::vector<std::pair<std::string, std::string>> Lines(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      out.emplace_back(line, "");
    } else {
      out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    }
  }
  return out;
}

bool ParseU64(const std::string& s, uint64_t* out);

// "UID:GID", each 0..2^32 - 2 (2^32 - 1 is the kernel's "unchanged").
bool ParseUser(const std::string& s, BoxUser* out) {
  size_t colon = s.find(':');
  uint64_t uid = 0, gid = 0;
  if (colon == std::string::npos || !ParseU64(s.substr(0, colon), &uid) ||
      !ParseU64(s.substr(colon + 1), &gid) || uid > 0xfffffffe || gid > 0xfffffffe) {
    return false;
  }
  *out = BoxUser{static_cast<uint32_t>(uid), static_cast<uint32_t>(gid)};
  return true;
}

bool ParseU64(const std::string& s, uint64_t* out) {
  // strtoull alone would take " 5", "+5" and "-1" (as 2^64 - 1).
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

std::string EncodeConfig(const SupervisorConfig& c) {
  std::ostringstream os;
  Put(os, "rootfs", c.jail.rootfs);
  Put(os, "agent", c.jail.agent_path);
  Put(os, "workdir", c.jail.workdir);
  Put(os, "hostname", c.jail.hostname);
  Put(os, "memory", std::to_string(c.jail.memory_bytes));
  Put(os, "disk", std::to_string(c.jail.disk_bytes));
  Put(os, "nproc", std::to_string(c.jail.max_processes));
  Put(os, "nofile", std::to_string(c.jail.max_open_files));
  Put(os, "millicpus", std::to_string(static_cast<uint64_t>(c.jail.cpus * 1000.0 + 0.5)));
  Put(os, "id", c.id);
  Put(os, "staging", c.staging_dir);
  Put(os, "cgroup_version", std::to_string(c.cgroup_version));
  if (c.jail.user) {
    Put(os, "user", std::to_string(c.jail.user->uid) + ":" + std::to_string(c.jail.user->gid));
  }
  for (const auto& dir : c.cgroup_dirs) Put(os, "cgroup", dir);
  return os.str();
}

StatusOr<SupervisorConfig> DecodeConfig(const std::string& text) {
  SupervisorConfig c;
  for (const auto& [key, value] : Lines(text)) {
    uint64_t n = 0;
    bool is_number = ParseU64(value, &n);
    if (key == "rootfs")
      c.jail.rootfs = value;
    else if (key == "agent")
      c.jail.agent_path = value;
    else if (key == "workdir")
      c.jail.workdir = value;
    else if (key == "hostname")
      c.jail.hostname = value;
    else if (key == "id")
      c.id = value;
    else if (key == "staging")
      c.staging_dir = value;
    else if (key == "cgroup")
      c.cgroup_dirs.push_back(value);
    else if (key == "user") {
      BoxUser user;
      if (!ParseUser(value, &user))
        return ProtocolError("control config: bad user '" + value + "'");
      c.jail.user = user;
    } else if (!is_number)
      return ProtocolError("control config: bad line '" + key + "'");
    else if (key == "memory")
      c.jail.memory_bytes = n;
    else if (key == "disk")
      c.jail.disk_bytes = n;
    else if (key == "nproc")
      c.jail.max_processes = static_cast<uint32_t>(n);
    else if (key == "nofile")
      c.jail.max_open_files = static_cast<uint32_t>(n);
    else if (key == "millicpus")
      c.jail.cpus = static_cast<double>(n) / 1000.0;
    else if (key == "cgroup_version")
      c.cgroup_version = static_cast<int>(n);
    else
      return ProtocolError("control config: unknown key '" + key + "'");
  }
  if (c.jail.rootfs.empty() || c.jail.agent_path.empty() || c.staging_dir.empty()) {
    return ProtocolError("control config: rootfs, agent and staging are required");
  }
  return c;
}

std::string EncodeReady(const ReadyMessage& r) {
  std::ostringstream os;
  if (!r.ok) {
    Put(os, "error", r.error);
    return os.str();
  }
  Put(os, "ok", "1");
  Put(os, "pid", std::to_string(r.box_pid));
  for (const auto& l : r.limits) Put(os, "limit", l);
  for (const auto& l : r.limits_not_enforced) Put(os, "nolimit", l);
  return os.str();
}

StatusOr<ReadyMessage> DecodeReady(const std::string& text) {
  ReadyMessage r;
  bool seen = false;
  for (const auto& [key, value] : Lines(text)) {
    if (key == "error") {
      r.ok = false;
      r.error = value;
      seen = true;
    } else if (key == "ok") {
      r.ok = true;
      seen = true;
    } else if (key == "pid") {
      uint64_t n = 0;
      if (!ParseU64(value, &n)) return ProtocolError("supervisor: bad pid '" + value + "'");
      r.box_pid = static_cast<int>(n);
    } else if (key == "limit") {
      r.limits.push_back(value);
    } else if (key == "nolimit") {
      r.limits_not_enforced.push_back(value);
    }
  }
  if (!seen) return ProtocolError("supervisor: malformed ready message");
  return r;
}

Status SendPacket(int fd, const std::string& data) {
  for (;;) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) return Status::Ok();
    if (errno == EINTR) continue;
    return base::ErrnoStatus("control send");
  }
}

StatusOr<std::string> RecvPacket(int fd, std::chrono::milliseconds timeout) {
  pollfd pfd{fd, POLLIN, 0};
  for (;;) {
    int r = ::poll(&pfd, 1, timeout.count() < 0 ? -1 : static_cast<int>(timeout.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return base::ErrnoStatus("control poll");
    if (r == 0) return DeadlineExceeded("no answer on the control socket");
    break;
  }
  std::string buf(kMaxControlMessage, '\0');
  for (;;) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return base::ErrnoStatus("control recv");
    if (n == 0) return Unavailable("closed");
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
}

StatusOr<std::pair<base::UniqueFd, base::UniqueFd>> SeqPacketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return base::ErrnoStatus("socketpair(SOCK_SEQPACKET)");
  }
  return std::make_pair(base::UniqueFd(fds[0]), base::UniqueFd(fds[1]));
}

}  // namespace codebox::jail
