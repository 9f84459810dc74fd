// Recursive file and directory copies between the host and a box, over the agent protocol.
#ifndef CODEBOX_BOX_COPY_H_
#define CODEBOX_BOX_COPY_H_

#include <string>

#include "codebox/box.h"
#include "codebox/status.h"
#include "agent_client/agent_client.h"

namespace codebox::box {

// host_path may be a file or a directory (copied recursively; symlinks are skipped so a
// link cannot pull in host files outside the tree).
Status CopyHostToBox(protocol::AgentClient& agent, const std::string& host_path,
                     const std::string& box_path);
// box_path may be a file or a directory; see Box::CopyOut for what comes out and how.
// options.max_bytes must be set (non-zero).
Status CopyBoxToHost(protocol::AgentClient& agent, const std::string& box_path,
                     const std::string& host_path, const CopyOutOptions& options);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_COPY_H_
