// Placeholder: replaced by the issue that owns `codebox image`.
#include <cstdio>

#include "cli/commands.h"

namespace codebox::cli {

int ImageCommand(const std::vector<std::string>&) {
  std::fputs("codebox image: not built yet\n", stderr);
  return 2;
}

}  // namespace codebox::cli
