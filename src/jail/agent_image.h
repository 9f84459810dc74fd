// The agent binary as a box runs it: a sealed, execute-only memfd copy, made once per process
// and shared by every jail it starts (the pages are shared too, so a box costs no extra
// memory for its agent, and no copy at start).
#ifndef CODEBOX_JAIL_AGENT_IMAGE_H_
#define CODEBOX_JAIL_AGENT_IMAGE_H_

#include <string>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::jail {

// A new sealed (no write, grow, shrink or further seals) memfd holding the file at `path`,
// mode 0111. Exec'd with execveat(fd, "", AT_EMPTY_PATH): no mount in the box then names the
// agent's host path, and nothing can change the bytes PID 1 runs.
StatusOr<base::UniqueFd> SealedCopy(const std::string& path);

// The process-wide sealed copy of `path`, made on first use (thread-safe). The fd stays open
// for the life of the process; callers dup it, never close it.
StatusOr<int> SharedAgentImage(const std::string& path);

}  // namespace codebox::jail

#endif  // CODEBOX_JAIL_AGENT_IMAGE_H_
