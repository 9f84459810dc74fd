// The library <-> supervisor control channel: one SOCK_SEQPACKET socketpair, one message per
// packet, each a few "key=value" lines. The supervisor never sees the caller's memory; it gets
// only what is written here.
#ifndef CODEBOX_JAIL_CONTROL_H_
#define CODEBOX_JAIL_CONTROL_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "jail/jail.h"

namespace codebox::jail {

// Fixed fds of the codebox-jail process (set up by Jail::Start through posix_spawn).
inline constexpr int kSupervisorAgentFd = 3;
inline constexpr int kSupervisorControlFd = 4;
// The sealed memfd the box's PID 1 execs (agent_image.h).
inline constexpr int kSupervisorAgentImageFd = 5;
// The agent's end of its socket inside the box.
inline constexpr int kAgentFd = 3;
// Largest control packet.
inline constexpr size_t kMaxControlMessage = 64 * 1024;

// What the library tells the supervisor: the JailConfig plus paths the library chose (so it
// can clean them up itself if the supervisor dies).
struct SupervisorConfig {
  JailConfig jail;
  std::string id;           // unique name of this jail (cgroup and staging dir names)
  std::string staging_dir;  // empty host directory; the box's tmpfs is mounted on it privately
  // cgroups the supervisor should create and join the box to (filled by the library from
  // cgroups::Plan so both sides agree on the paths).
  std::vector<std::string> cgroup_dirs;
  int cgroup_version = 0;  // 0 none, 1, 2
};

// What the supervisor answers once the agent is running, or with the failing step.
struct ReadyMessage {
  bool ok = false;
  std::string error;  // "mount image: EINVAL" when !ok
  int box_pid = 0;    // host pid of the agent (PID 1 in the box)
  std::vector<std::string> limits;
  std::vector<std::string> limits_not_enforced;
};

std::string EncodeConfig(const SupervisorConfig& config);
StatusOr<SupervisorConfig> DecodeConfig(const std::string& text);
std::string EncodeReady(const ReadyMessage& ready);
StatusOr<ReadyMessage> DecodeReady(const std::string& text);

// One packet; RecvPacket waits up to `timeout` (negative: forever). An orderly close of the
// peer is kUnavailable("closed").
Status SendPacket(int fd, const std::string& data);
StatusOr<std::string> RecvPacket(int fd, std::chrono::milliseconds timeout);

StatusOr<std::pair<base::UniqueFd, base::UniqueFd>> SeqPacketPair();

}  // namespace codebox::jail

#endif  // CODEBOX_JAIL_CONTROL_H_
