// `codebox shell`: an interactive shell in a fresh box, the short form of
// `codebox exec -it -- bash` (sh where the image has no bash).
#include <cstdio>

#include "cli/box_flags.h"
#include "cli/commands.h"
#include "cli/interactive_exec.h"
#include "cli/progress.h"
#include "codebox/box.h"

namespace codebox::cli {
namespace {

constexpr const char kShellHelp[] = R"(usage: codebox shell [options]

An interactive shell in a fresh box: bash, or sh where the image has no bash,
on a terminal in the box (as `codebox exec -it -- bash`). Every key goes to the
box (Ctrl-C interrupts the program running there, Ctrl-D ends the shell's
input), the window's size follows, and the exit status is the shell's (125 if
codebox could not run it). The box is destroyed when the shell ends. No exec
timeout unless --timeout is given; --box-timeout limits the whole session.
Needs a terminal; runs in this process (a codebox server cannot run one yet).

options:
)";

// bash where the image has it; the exec replaces sh, so the shell is the session's leader.
const std::vector<std::string> kShell = {
    "sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh"};

}  // namespace

int ShellCommand(const std::vector<std::string>& args) {
  BoxOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kShellHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      return 0;
    }
    auto was_box_flag = ParseBoxFlag(args, &i, &options);
    if (!was_box_flag.ok()) {
      PrintError("shell", was_box_flag.status());
      return kExitUsage;
    }
    if (!*was_box_flag) {
      PrintError("shell",
                 InvalidArgument("unknown option " + a + BoxFlagHint(a) + " (see --help)"));
      return kExitUsage;
    }
  }
  if (Status st = ValidateForCli(options); !st.ok()) {
    PrintError("shell", st);
    return kExitUsage;
  }
  InteractiveExec exec;
  exec.tty = true;
  if (NamesExecTimeout(args)) exec.timeout = options.exec_timeout;
  if (Status st = CheckInteractive(exec); !st.ok()) {
    PrintError("shell", st);
    return kExitUsage;
  }
  BoxStartNotice notice = AnnounceBoxStart(options);  // a vm under emulation takes seconds
  auto box = Box::Create(options);
  notice.Done();
  if (!box.ok()) {
    PrintError("shell", box.status());
    return kExitCodeboxError;
  }
  int status = RunInteractive("shell", **box, kShell, exec);
  if (Status st = (*box)->Destroy(); !st.ok()) PrintError("shell", st);
  return status;
}

}  // namespace codebox::cli
