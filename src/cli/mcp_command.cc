// `codebox mcp`: a Model Context Protocol server on stdin/stdout (docs/mcp.md). One MCP
// session, one box, made on the first tool call and destroyed when the session ends.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "mcp/session.h"
#include "mcp/stdio.h"
#include "remote/server_choice.h"

namespace codebox::cli {
namespace {

constexpr const char kMcpHelp[] = R"(usage: codebox mcp [options]

A Model Context Protocol server on stdin and stdout, for agents (Claude
Desktop, Cursor, VS Code, agent frameworks) to start as a subprocess:
newline-delimited JSON-RPC, nothing else on stdout, logs on stderr. Its tools
run in one box, made on the first call and destroyed when stdin ends or on
SIGTERM/SIGINT:

  run_python(code, timeout?)      a cell of one stateful IPython session
  run_command(argv | cmd, timeout?)
  write_file(path, content), read_file(path), list_files(path?)
  reset                           a fresh box: variables and files gone

docs/mcp.md has the client configuration. The box flags below set the box.

options:
  --max-timeout T  the most a call's `timeout` may ask for (default 10m)
  --local          run the box in this process even when a codebox server is
                   set or answers
)";

struct McpFlags {
  BoxOptions box;
  mcp::SessionOptions session;
  bool local = false;
};

// nullopt after printing the help.
StatusOr<std::optional<McpFlags>> ParseFlags(const std::vector<std::string>& args) {
  McpFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kMcpHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      return std::optional<McpFlags>();
    }
    ASSIGN_OR_RETURN(bool was_box_flag, ParseBoxFlag(args, &i, &f.box));
    if (was_box_flag) continue;
    if (a == "--local") {
      f.local = true;
    } else if (a == "--max-timeout" || a.starts_with("--max-timeout=")) {
      std::string value;
      if (a.size() > 13) {
        value = a.substr(14);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      }
      auto timeout = ParseTimeout(value);
      if (!timeout.ok()) return timeout.status().WithContext("--max-timeout");
      f.session.max_timeout = *timeout;
    } else if (a.starts_with("-")) {
      return InvalidArgument("unknown option " + a + BoxFlagHint(a) + " (see codebox mcp --help)");
    } else {
      return InvalidArgument("no arguments are taken, got '" + a + "' (see codebox mcp --help)");
    }
  }
  return std::optional<McpFlags>(std::move(f));
}

}  // namespace

int McpCommand(const std::vector<std::string>& args) {
  auto parsed = ParseFlags(args);
  if (!parsed.ok()) {
    PrintError("mcp", parsed.status());
    return kExitUsage;
  }
  if (!parsed->has_value()) return 0;
  McpFlags& flags = **parsed;
  if (Status st = ValidateForCli(flags.box); !st.ok()) {
    PrintError("mcp", st);
    return kExitUsage;
  }
  if (Status st = remote::ChooseServer(&flags.box, flags.local); !st.ok()) {
    PrintError("mcp", st);
    return kExitCodeboxError;
  }
  // stdout carries the protocol alone: the server writes to a copy of it, and fd 1 goes to
  // stderr, so that a stray print of any library cannot corrupt a message.
  const int protocol_out = ::dup(STDOUT_FILENO);
  if (protocol_out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    PrintError("mcp", Internal(std::string("dup of stdout: ") + strerror(errno)));
    return kExitCodeboxError;
  }
  // SIGTERM and SIGINT end the session as EOF does: blocked in every thread (before any
  // starts), read through a signalfd by the reader. A client gone is an error on write.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const int stop_fd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (stop_fd < 0) {
    PrintError("mcp", Internal(std::string("signalfd: ") + strerror(errno)));
    return kExitCodeboxError;
  }
  CODEBOX_LOG(kInfo, "mcp: serving MCP on stdio (image " << flags.box.image << ")");
  auto session = std::make_unique<mcp::Session>(flags.session, mcp::LocalBoxSource(flags.box));
  if (mcp::ServeStdio(*session, STDIN_FILENO, protocol_out, stop_fd) == mcp::StdioEnd::kBusy) {
    // A call still runs in the session: the box dies with this process (its supervisor
    // watches us), and destroying the session under the call is not safe.
    CODEBOX_LOG(kWarn, "mcp: a tool call did not end after the stop; exiting without waiting");
    std::fflush(stderr);
    std::_Exit(0);
  }
  session.reset();  // destroys the box
  return 0;
}

}  // namespace codebox::cli
