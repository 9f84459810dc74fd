// Namespaces of a box: the clone, the uid/gid maps, hostname and loopback. Called only from
// the single-threaded supervisor (codebox-jail), never from the library.
#ifndef CODEBOX_JAIL_NAMESPACES_H_
#define CODEBOX_JAIL_NAMESPACES_H_

#include <sys/types.h>

#include <string>

#include "codebox/status.h"

namespace codebox::jail::ns {

// Every namespace a box gets at clone time. The cgroup namespace is unshared later by the
// child, once it has been moved into its own cgroups (so its cgroup root is the box's).
int CloneFlags();

// The host ids box root (uid/gid 0) maps to. Host root: a per-box id kBoxIdBase + supervisor
// pid, owned by nobody and unique among live boxes. Otherwise: the caller's own euid/egid
// (the only ids an unprivileged user may map).
struct HostIds {
  uid_t uid;
  gid_t gid;
};
inline constexpr uid_t kBoxIdBase = 0x70000000;  // 1879048192, above any subuid range
HostIds ChooseHostIds();

// fork()-like clone into new namespaces (no new stack: the child continues here). Only safe
// in a single-threaded process.
StatusOr<pid_t> CloneChild(int flags);

// Writes setgroups=deny, uid_map and gid_map ("0 <host> 1") of the child.
Status WriteIdMaps(pid_t child, HostIds ids);

Status SetHostname(const std::string& name);
// Sets IFF_UP on "lo" in the (new, empty) network namespace: the box can talk to itself only.
Status BringUpLoopback();

}  // namespace codebox::jail::ns

#endif  // CODEBOX_JAIL_NAMESPACES_H_
