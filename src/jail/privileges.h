// Privileges of everything in the box: no capabilities (not even over its own user
// namespace), root's special treatment on execve switched off and locked, no_new_privs.
#ifndef CODEBOX_JAIL_PRIVILEGES_H_
#define CODEBOX_JAIL_PRIVILEGES_H_

#include <optional>

#include "codebox/status.h"
#include "jail/jail.h"

namespace codebox::jail::privileges {

// Becomes box root (uid/gid 0 inside, the mapped id outside). Needs the id maps written. With
// the box's user, its ids become the saved ones (root's the real and effective ones), for
// HandUserToAgent.
Status BecomeBoxRoot(const std::optional<BoxUser>& user = std::nullopt);
// Just before the agent's execve, with every capability gone: makes the box user's ids the
// effective ones (allowed without a capability: they are the saved ones). execve copies the
// effective ids into the saved ones, and nothing in a box holds a capability to set ids, so
// this is the one way the agent keeps the user's ids to run its execs as them: it makes root's
// its effective ids again at once and keeps the user's saved (src/agent/main.cc).
Status HandUserToAgent(const BoxUser& user);
// Drops every capability (bounding, ambient, inheritable, permitted, effective), locks the
// securebits so execve as uid 0 grants none back, and sets no_new_privs.
Status DropAll();

}  // namespace codebox::jail::privileges

#endif  // CODEBOX_JAIL_PRIVILEGES_H_
