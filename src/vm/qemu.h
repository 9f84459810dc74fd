// The QEMU microvm command line and its control channel (QMP). Kept apart from machine.cc so
// the command line can be read and tested as one function.
#ifndef CODEBOX_VM_QEMU_H_
#define CODEBOX_VM_QEMU_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "codebox/status.h"
#include "vm/vm.h"

namespace codebox::vm {

// Child fd numbers QEMU finds its two sockets on (socketpair ends we hand it).
inline constexpr int kQemuAgentFd = 3;
inline constexpr int kQemuQmpFd = 4;
// A restore's migration stream (the template's state file), when there is one.
inline constexpr int kQemuStateFd = 6;
// Name of the virtio-serial port; the guest looks it up in /sys/class/virtio-ports/*/name.
inline constexpr const char* kAgentPortName = "codebox.0";

struct QemuLaunch {
  std::string qemu;  // binary
  Accelerator accel = Accelerator::kTcg;
  std::string kernel;       // vmlinuz
  std::string initramfs;    // cpio
  std::string disk;         // erofs image, attached read-only
  std::string console_log;  // guest serial console goes here
  uint64_t memory_mib = 512;
  uint32_t cpus = 1;
  uint64_t disk_mib = 256;
  uint64_t tsc_khz = 0;  // tcg only
  // Guest RAM in this file instead of anonymous memory: a template's (snapshot.h). The machine
  // that makes the template maps it shared (its RAM is the file); a clone maps it private, so
  // its writes are copy-on-write pages of its own and the file never changes.
  std::string memory_file;
  bool share_memory = false;
  // A clone: waits for its state on kQemuStateFd (migrate-incoming over QMP) instead of booting.
  bool incoming = false;
};

// The guest kernel command line (short: every byte is parsed under emulation too).
std::string GuestCommandLine(const QemuLaunch& launch);
std::vector<std::string> QemuArgv(const QemuLaunch& launch);

// Asks QEMU to quit over QMP (fd: our end of the QMP socket); does not wait.
Status QmpQuit(int qmp_fd);

// RAM that is a named shared file is left out of a saved state (the file is the RAM), and a
// clone takes it from its own mapping of the file: set on both sides before a migration.
inline constexpr const char* kQmpIgnoreShared =
    R"({"execute":"migrate-set-capabilities","arguments":{"capabilities":)"
    R"([{"capability":"x-ignore-shared","state":true}]}})";

// Sends QMP commands (each a JSON object; a connection's first must be qmp_capabilities) and
// reads QEMU's lines until every command is answered, one answers an error, or `timeout`
// passes. `fds` go with the first byte (SCM_RIGHTS, for getfd). Returns the last answer;
// events and the greeting seen on the way are dropped.
StatusOr<std::string> QmpRun(int qmp_fd, const std::vector<std::string>& commands,
                             std::chrono::milliseconds timeout, const std::vector<int>& fds = {});

// The last max_lines of a guest console, carriage returns dropped. A panic's stack trace
// pushes its cause out of any short tail, so the "Kernel panic" line is put first when the
// tail lacks it.
std::string ConsoleExcerpt(const std::string& console, size_t max_lines);

// Waits up to `timeout` for the child to exit; true (and *wstatus set) if it did.
bool WaitChild(pid_t pid, std::chrono::milliseconds timeout, int* wstatus);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_QEMU_H_
