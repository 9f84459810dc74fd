// codebox-jail: the supervisor process of one jail (see supervisor.h). Started by
// Jail::Start with posix_spawn; not meant to be run by hand.
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "jail/supervisor.h"

int main(int argc, char** argv) {
  // Whatever the spawner leaked, only 0-5 survive (posix_spawn already closed the rest; this
  // holds when started any other way).
  ::syscall(SYS_close_range, 6u, ~0u, 0u);
  if (argc == 2 && std::strcmp(argv[1], "--probe") == 0) return codebox::jail::supervisor::Probe();
  if (argc == 3 && std::strcmp(argv[1], "--parent") == 0) {
    return codebox::jail::supervisor::RunBox(static_cast<pid_t>(std::atoi(argv[2])));
  }
  static const char kUsage[] =
      "usage: codebox-jail --parent PID | --probe (started by libcodebox)\n";
  (void)!::write(2, kUsage, sizeof kUsage - 1);
  return 2;
}
