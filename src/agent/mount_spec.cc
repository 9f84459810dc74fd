#include "agent/mount_spec.h"

#include <sys/mount.h>

namespace codebox::agent {

StatusOr<MountSpec> ParseMountSpec(const std::string& spec) {
  size_t first = spec.find(':');
  if (first == std::string::npos || first == 0) {
    return InvalidArgument("--mount " + spec + ": expected TYPE:TARGET[:OPTIONS]");
  }
  size_t second = spec.find(':', first + 1);
  MountSpec m;
  m.type = spec.substr(0, first);
  m.target =
      spec.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
  m.options = second == std::string::npos ? "" : spec.substr(second + 1);
  if (m.target.empty() || m.target[0] != '/') {
    return InvalidArgument("--mount " + spec + ": target must be absolute");
  }
  m.flags = MS_NOSUID;
  if (m.type != "devtmpfs" && m.type != "tmpfs") m.flags |= MS_NODEV;
  if (m.type == "proc" || m.type == "sysfs") m.flags |= MS_NOEXEC;
  return m;
}

}  // namespace codebox::agent
