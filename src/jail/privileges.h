// Privileges of everything in the box: no capabilities (not even over its own user
// namespace), root's special treatment on execve switched off and locked, no_new_privs.
#ifndef CODEBOX_JAIL_PRIVILEGES_H_
#define CODEBOX_JAIL_PRIVILEGES_H_

#include "codebox/status.h"

namespace codebox::jail::privileges {

// Becomes box root (uid/gid 0 inside, the mapped id outside). Needs the id maps written.
Status BecomeBoxRoot();
// Drops every capability (bounding, ambient, inheritable, permitted, effective), locks the
// securebits so execve as uid 0 grants none back, and sets no_new_privs.
Status DropAll();

}  // namespace codebox::jail::privileges

#endif  // CODEBOX_JAIL_PRIVILEGES_H_
