// Placeholder: replaced by the issue that owns `codebox ask`.
#include <cstdio>

#include "cli/commands.h"

namespace codebox::cli {

int AskCommand(const std::vector<std::string>&) {
  std::fputs("codebox ask: not built yet\n", stderr);
  return 2;
}

}  // namespace codebox::cli
