// The box's seccomp filter (libseccomp): everything is allowed except the syscalls model code
// never needs and kernel exploits keep coming through. Reasons per syscall: docs/security.md.
#ifndef CODEBOX_JAIL_SECCOMP_FILTER_H_
#define CODEBOX_JAIL_SECCOMP_FILTER_H_

#include "codebox/status.h"

namespace codebox::jail::seccomp {

// Loads the filter into the calling thread (and all its future children). Needs
// no_new_privs. The last step before execve of the agent.
Status Install();

}  // namespace codebox::jail::seccomp

#endif  // CODEBOX_JAIL_SECCOMP_FILTER_H_
