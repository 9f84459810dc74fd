#include "jail/namespaces.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "base/io.h"

namespace codebox::jail::ns {

int CloneFlags() {
  return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
}

HostIds ChooseHostIds(const std::optional<BoxUser>& user) {
  if (::geteuid() == 0) {
    uid_t id = kBoxIdBase + static_cast<uid_t>(::getpid());
    HostIds ids{id, static_cast<gid_t>(id)};
    if (user && (user->uid != 0 || user->gid != 0)) {
      ids.user = *user;
      ids.user_host = kBoxUserIdBase + static_cast<uid_t>(::getpid());
    }
    return ids;
  }
  return {::geteuid(), ::getegid()};
}

StatusOr<pid_t> CloneChild(int flags) {
  // The raw syscall with a NULL stack behaves like fork (the child returns here on a copy of
  // our stack). glibc's clone() wrapper needs a separate stack; fork() cannot take flags.
  long pid = ::syscall(SYS_clone, static_cast<unsigned long>(flags) | SIGCHLD, nullptr, nullptr,
                       nullptr, nullptr);
  if (pid < 0) return base::ErrnoStatus("clone namespaces");
  return static_cast<pid_t>(pid);
}

Status WriteIdMaps(pid_t child, HostIds ids) {
  std::string proc = "/proc/" + std::to_string(child);
  // setgroups must be denied before an unprivileged gid_map write; it also keeps box root from
  // dropping supplementary groups to reach files a group-deny ACL protects.
  RETURN_IF_ERROR(base::WriteFile(proc + "/setgroups", "deny").WithContext("setgroups"));
  std::string uid_map = "0 " + std::to_string(ids.uid) + " 1\n";
  std::string gid_map = "0 " + std::to_string(ids.gid) + " 1\n";
  const std::string user_line = " " + std::to_string(ids.user_host) + " 1\n";
  if (ids.user && ids.user->uid != 0) uid_map += std::to_string(ids.user->uid) + user_line;
  if (ids.user && ids.user->gid != 0) gid_map += std::to_string(ids.user->gid) + user_line;
  // Each map in one write: the kernel takes a map only whole, once.
  RETURN_IF_ERROR(base::WriteFile(proc + "/uid_map", uid_map).WithContext("uid_map"));
  RETURN_IF_ERROR(base::WriteFile(proc + "/gid_map", gid_map).WithContext("gid_map"));
  return Status::Ok();
}

Status SetHostname(const std::string& name) {
  if (::sethostname(name.data(), name.size()) != 0) return base::ErrnoStatus("sethostname");
  if (::setdomainname("", 0) != 0) return base::ErrnoStatus("setdomainname");
  return Status::Ok();
}

Status BringUpLoopback() {
  base::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return base::ErrnoStatus("loopback socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) return base::ErrnoStatus("SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) return base::ErrnoStatus("SIOCSIFFLAGS lo");
  return Status::Ok();
}

}  // namespace codebox::jail::ns
