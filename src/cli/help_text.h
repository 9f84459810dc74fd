// Text every subcommand's --help shares: the width help is wrapped to, and the exit statuses
// (the same table as the README's "Exit status").
#ifndef CODEBOX_CLI_HELP_TEXT_H_
#define CODEBOX_CLI_HELP_TEXT_H_

#include <cstddef>

namespace codebox::cli {

// Help lines are at most this many columns, so an 80-column terminal never wraps them.
inline constexpr size_t kHelpWidth = 79;

inline constexpr const char kExitStatusHelp[] = R"(
exit status:
  N        the program's own exit code (0..255)
  2        usage error: an unknown option or a bad value
  124      timed out: --timeout, or the box's --box-timeout
  125      codebox or the sandbox failed (the message says why)
  126      the program could not be executed (or a --pip install failed)
  127      the program was not found
  128+N    the program was killed by signal N; 137 also for out of memory
)";

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_HELP_TEXT_H_
