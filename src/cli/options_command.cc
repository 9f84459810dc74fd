// `codebox options`: every box and exec option, from the option schema.
#include <cstdio>

#include "cli/box_flags.h"
#include "cli/commands.h"

namespace codebox::cli {

int OptionsCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--markdown") {
    std::fputs(OptionsMarkdown().c_str(), stdout);
    return 0;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::fputs(
        "usage: codebox options [--markdown]\n\nPrints every box and exec option as "
        "the reference table of docs/options.md.\n\n",
        stdout);
    std::fputs(BoxFlagsHelp().c_str(), stdout);
    return 0;
  }
  std::fprintf(stderr, "codebox options: unknown argument %s (see --help)\n", args[0].c_str());
  return kExitUsage;
}

}  // namespace codebox::cli
