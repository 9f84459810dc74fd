// `codebox gc`: removes what codebox processes that died without cleaning up (SIGKILL, a crash)
// left behind. Boxes clean up after themselves, and each codebox process also does this once on its
// first box start; this is for hosts where none starts again soon.
#include <cstdio>

#include "base/paths.h"
#include "base/text.h"
#include "box/leftovers.h"
#include "cli/box_flags.h"
#include "cli/commands.h"

namespace codebox::cli {

int GcCommand(const std::vector<std::string>& args) {
  box::LeftoverOptions options;
  options.walk_all_cgroups = true;
  std::string home;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(R"(usage: codebox gc [--dry-run] [--home DIR]

Removes leftovers of codebox processes that died without cleaning up: jail
staging directories, jail cgroups (killing what still runs in them), vm run
directories, and temp files of the image store and vm driver. Only leftovers
whose owner process is gone are touched (owner pid and start time, or a
build's lock).
  --dry-run   print what would be removed, remove nothing

Exit status: 0 done; 2 a bad option; 125 some leftover could not be removed.
)",
                 stdout);
      return 0;
    }
    if (args[i] == "--dry-run") {
      options.dry_run = true;
    } else if (args[i] == "--home" && i + 1 < args.size()) {
      home = args[++i];
    } else if (args[i] == "--home") {
      PrintError("gc", InvalidArgument("--home needs a value"));
      return kExitUsage;
    } else {
      PrintError("gc", InvalidArgument("unknown option " + args[i] + " (see codebox gc --help)"));
      return kExitUsage;
    }
  }
  options.home = base::CodeboxHome(home);
  box::LeftoverReport report = box::CollectLeftovers(options);
  const char* verb = options.dry_run ? "would remove" : "removed";
  for (const auto& line : report.removed) {
    std::printf("%s %s\n", verb, base::TerminalSafe(line).c_str());
  }
  for (const auto& line : report.failed) {
    std::fprintf(stderr, "codebox gc: could not remove %s\n", base::TerminalSafe(line).c_str());
  }
  std::printf("%zu leftover%s %s", report.removed.size(), report.removed.size() == 1 ? "" : "s",
              options.dry_run ? "to remove" : "removed");
  if (report.live > 0) std::printf(", %d of running codebox processes kept", report.live);
  if (!report.failed.empty()) std::printf(", %zu failed", report.failed.size());
  std::printf("\n");
  return report.failed.empty() ? 0 : kExitCodeboxError;
}

}  // namespace codebox::cli
