// The box's filesystem view, built by the child inside its new user + mount namespaces:
//
//   /            the image: a read-only overlay of lower layers only (a skeleton of mount
//                points above the image), nosuid, nodev; it names no host path
//   /tmp /var/tmp /root /data <workdir> /dev/shm
//                directories of ONE size-limited tmpfs (the disk limit), read-write
//   /proc        a fresh procfs of the box's pid namespace, host-describing entries masked
//                (/dev/null or an empty tmpfs), /proc/sys and friends read-only
//   /dev         tmpfs with null zero full random urandom tty bound from the host, devpts
//
// The agent is not in this tree at all: the supervisor execs it from a sealed memfd.
// then pivot_root into it, with the old root detached. No mount is visible on the host: the
// whole tree lives (and dies) with the box's mount namespace.
#ifndef CODEBOX_JAIL_MOUNTS_H_
#define CODEBOX_JAIL_MOUNTS_H_

#include <string>

#include "codebox/status.h"
#include "jail/control.h"

namespace codebox::jail::mounts {

// Builds the tree on config.staging_dir and pivots into it. Runs in the child, as box root
// with capabilities over its own user namespace only. Errors name the step ("mount image
// /usr: EACCES").
Status BuildRootAndPivot(const SupervisorConfig& config);

// Rejects workdirs that are not absolute normalised paths, or that would hide the image.
Status ValidateWorkdir(const std::string& workdir);

}  // namespace codebox::jail::mounts

#endif  // CODEBOX_JAIL_MOUNTS_H_
