// `codebox-agent --mount TYPE:TARGET[:OPTIONS]`: what to mount, and with which flags.
#ifndef CODEBOX_AGENT_MOUNT_SPEC_H_
#define CODEBOX_AGENT_MOUNT_SPEC_H_

#include <string>

#include "codebox/status.h"

namespace codebox::agent {

struct MountSpec {
  std::string type;         // also the source, as for proc, tmpfs, devtmpfs
  std::string target;       // absolute
  std::string options;      // the data argument of mount(2); empty: none
  unsigned long flags = 0;  // always nosuid; nodev except on device filesystems; noexec on
                            // proc and sysfs
};

// e.g. proc:/proc, tmpfs:/tmp:size=64m, devtmpfs:/dev.
StatusOr<MountSpec> ParseMountSpec(const std::string& spec);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_MOUNT_SPEC_H_
