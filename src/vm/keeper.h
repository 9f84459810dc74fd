// codebox-vm-keeper: one small single-threaded process per vm box, between the library and QEMU, so
// that no QEMU outlives the process that owns the box.
//
// PR_SET_PDEATHSIG cannot go on QEMU from the library: it fires when the creating *thread* exits,
// and library callers (Python thread pools) create boxes on short-lived threads. The keeper is
// single-threaded, so there PR_SET_PDEATHSIG(SIGKILL) on QEMU means exactly "the keeper died". The
// keeper watches the owner through a pidfd (opened, then getppid() checked, so an owner that died
// before the open is not missed) and QEMU through SIGCHLD:
//   * owner gone (even SIGKILLed): SIGKILL QEMU, reap it, remove the box's run directory;
//   * QEMU ended: report its wait status to the library and exit;
//   * "k" from the library, or the library's end of the status socket closed: SIGKILL QEMU.
// QMP and the agent socket go straight to QEMU; the keeper closes its copies.
#ifndef CODEBOX_VM_KEEPER_H_
#define CODEBOX_VM_KEEPER_H_

#include <sys/types.h>

#include <string>

namespace codebox::vm {

// The keeper's fds besides 0-2 (1 and 2: QEMU's log) and QEMU's 3 and 4 (kQemuAgentFd, kQemuQmpFd):
// its stream socket to the library.
inline constexpr int kKeeperStatusFd = 5;

// Lines the keeper writes on the status socket, in order:
//   "qemu <pid>\n"       QEMU runs (exec succeeded)
//   "exit <wstatus>\n"   QEMU ended; the keeper exits next
//   "error <text>\n"     QEMU could not be started; the keeper exits next
// The library writes "k" to have QEMU SIGKILLed.

// codebox-vm-keeper --parent PID --run-dir DIR -- QEMU-ARGV...
int RunKeeper(pid_t parent, const std::string& run_dir, char** qemu_argv, char** envp);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_KEEPER_H_
