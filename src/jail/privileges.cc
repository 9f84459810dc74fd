#include "jail/privileges.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "base/io.h"

namespace codebox::jail::privileges {
namespace {

int LastCap() {
  auto text = base::ReadFile("/proc/sys/kernel/cap_last_cap");
  if (text.ok()) {
    try {
      return std::stoi(*text);
    } catch (...) {
    }
  }
  return CAP_LAST_CAP;
}

}  // namespace

Status BecomeBoxRoot(const std::optional<BoxUser>& user) {
  const gid_t saved_gid = user ? user->gid : 0;
  const uid_t saved_uid = user ? user->uid : 0;
  if (::setresgid(0, 0, saved_gid) != 0) return base::ErrnoStatus("setresgid 0");
  if (::setresuid(0, 0, saved_uid) != 0) return base::ErrnoStatus("setresuid 0");
  return Status::Ok();
}

Status HandUserToAgent(const BoxUser& user) {
  if (::setresgid(0, user.gid, user.gid) != 0) {
    return base::ErrnoStatus("hand gid " + std::to_string(user.gid) + " to the agent");
  }
  if (::setresuid(0, user.uid, user.uid) != 0) {
    return base::ErrnoStatus("hand uid " + std::to_string(user.uid) + " to the agent");
  }
  return Status::Ok();
}

Status DropAll() {
  // Locked securebits: uid 0 gains no capabilities on execve (NOROOT), setuid() does not
  // adjust them (NO_SETUID_FIXUP), and nothing can raise ambient ones. Needs CAP_SETPCAP,
  // so it comes before the drop.
  unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                       SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                       SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return base::ErrnoStatus("securebits");
  for (int cap = 0; cap <= LastCap(); ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      return base::ErrnoStatus("drop bounding capability " + std::to_string(cap));
    }
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return base::ErrnoStatus("clear ambient capabilities");
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, data) != 0) return base::ErrnoStatus("capset");
  // Also what lets an unprivileged process install a seccomp filter.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return base::ErrnoStatus("no_new_privs");
  return Status::Ok();
}

}  // namespace codebox::jail::privileges
