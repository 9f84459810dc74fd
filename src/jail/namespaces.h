// Namespaces of a box: the clone, the uid/gid maps, hostname and loopback. Called only from
// the single-threaded supervisor (codebox-jail), never from the library.
#ifndef CODEBOX_JAIL_NAMESPACES_H_
#define CODEBOX_JAIL_NAMESPACES_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "codebox/status.h"
#include "jail/jail.h"

namespace codebox::jail::ns {

// Every namespace a box gets at clone time. The cgroup namespace is unshared later by the
// child, once it has been moved into its own cgroups (so its cgroup root is the box's).
int CloneFlags();

// The host ids box ids map to. Box root (uid/gid 0): with host root, a per-box id
// kBoxIdBase + supervisor pid, owned by nobody and unique among live boxes; otherwise the
// caller's own euid/egid (the only ids an unprivileged user may map). The box's user (host
// root only, JailConfig::user): its uid and gid, where not 0, both map to a second per-box id,
// kBoxUserIdBase + supervisor pid.
struct HostIds {
  uid_t uid;
  gid_t gid;
  std::optional<BoxUser> user = std::nullopt;  // the box's ids of the user, when mapped
  uid_t user_host = 0;                         // the host id they map to
};
inline constexpr uid_t kBoxIdBase = 0x70000000;  // 1879048192, above any subuid range
// A pid is at most PID_MAX_LIMIT (2^22 = 0x400000), so box root's ids lie in
// [0x70000000, 0x70400000] and users' in [0x78000000, 0x78400000]: the ranges never meet, a
// live supervisor's pid is unique, so no two live boxes (nor a box's root and its user) share
// a host id, and both stay below 2^32 - 1.
inline constexpr uid_t kBoxUserIdBase = kBoxIdBase + 0x08000000;
// `user` is mapped only when we are host root (CanMapUser); the caller checked that.
HostIds ChooseHostIds(const std::optional<BoxUser>& user = std::nullopt);

// fork()-like clone into new namespaces (no new stack: the child continues here). Only safe
// in a single-threaded process.
StatusOr<pid_t> CloneChild(int flags);

// Writes setgroups=deny, uid_map and gid_map of the child: "0 <host> 1", and for the box's
// user "<uid> <user host> 1" (and "<gid> <user host> 1"), each where not 0.
Status WriteIdMaps(pid_t child, HostIds ids);

Status SetHostname(const std::string& name);
// Sets IFF_UP on "lo" in the (new, empty) network namespace: the box can talk to itself only.
Status BringUpLoopback();

}  // namespace codebox::jail::ns

#endif  // CODEBOX_JAIL_NAMESPACES_H_
