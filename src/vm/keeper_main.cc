// codebox-vm-keeper: the per-box process that ties QEMU's life to its owner (see keeper.h). Started
// by Machine::Start; not meant to be run by hand.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "vm/keeper.h"

int main(int argc, char** argv, char** envp) {
  // Whatever the spawner leaked, only 0-5 and a restore's state file (6, kQemuStateFd) survive.
  ::syscall(SYS_close_range, 7u, ~0u, 0u);
  if (argc >= 7 && std::strcmp(argv[1], "--parent") == 0 &&
      std::strcmp(argv[3], "--run-dir") == 0 && std::strcmp(argv[5], "--") == 0 &&
      argv[6][0] == '/') {
    pid_t parent = static_cast<pid_t>(std::atol(argv[2]));
    if (parent > 0) return codebox::vm::RunKeeper(parent, argv[4], argv + 6, envp);
  }
  static const char kUsage[] =
      "usage: codebox-vm-keeper --parent PID "
      "--run-dir DIR -- /path/to/qemu ARGS... "
      "(started by libcodebox)\n";
  (void)!::write(2, kUsage, sizeof kUsage - 1);
  return 2;
}
