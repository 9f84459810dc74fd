// `codebox-agent --mount TYPE:TARGET[:OPTIONS]`: what to mount, and with which flags.
#ifndef CODEBOX_AGENT_MOUNT_SPEC_H_
#define CODEBOX_AGENT_MOUNT_SPEC_H_

#include <string>

#include "codebox/status.h"

namespace codebox::agent {

struct MountSpec {
  std::string type;     // also the source, as for proc, tmpfs, devtmpfs
  std::string target;   // absolute
  std::string options;  // the data argument of mount(2); empty: none
  // Always nosuid; nodev except on devtmpfs and tmpfs (either may be a /dev); noexec on proc
  // and sysfs.
  unsigned long flags = 0;
};

// e.g. proc:/proc, tmpfs:/tmp:size=64m, devtmpfs:/dev.
StatusOr<MountSpec> ParseMountSpec(const std::string& spec);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_MOUNT_SPEC_H_
