// The jail supervisor: the body of the codebox-jail process. Single-threaded, empty
// environment, fds 0-2 plus the agent socket (3) and the control socket (4). It builds the
// box, reports "ready" or the failing step, then watches: the box ending, a "destroy" from
// the library, or the library process dying all end with everything in the box killed and
// its cgroups removed.
#ifndef CODEBOX_JAIL_SUPERVISOR_H_
#define CODEBOX_JAIL_SUPERVISOR_H_

#include <sys/types.h>

namespace codebox::jail::supervisor {

// codebox-jail --parent PID : run one box for the library process PID.
int RunBox(pid_t parent);
// codebox-jail --probe : tries the namespaces and mounts a box needs; prints "ok" or the
// reason to stdout, exits 0 / 1.
int Probe();

}  // namespace codebox::jail::supervisor

#endif  // CODEBOX_JAIL_SUPERVISOR_H_
