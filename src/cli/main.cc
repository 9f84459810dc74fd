// codebox: the command-line front end. Dispatches to one function per subcommand.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "cli/help_text.h"

namespace {

constexpr const char kUsage[] = R"(codebox: run untrusted code in a disposable isolated box

usage: codebox COMMAND [options]

commands:
  run [options] CODE | FILE.py   run Python code in a fresh box
  run --session FILE...          run files as cells of one Python session
  repl [options]                 an interactive Python session in a fresh box
  exec [options] CMD ARGS...     run a command in a fresh box (-it: a terminal)
  shell [options]                an interactive shell in a fresh box
  ask [options] TASK             a model writes code, a box runs it: an answer
  doctor                         which drivers and limits this host supports
  image build|pull|ls|rm ...     build, pull, list or remove images
  gc [--dry-run]                 remove what killed codebox processes left
  options [--markdown]           every box and exec option (docs/options.md)
  serve [options]                serve the HTTP API with warm pools
  status [--server ADDR]         a server's boxes and pools
  start BOX -- CMD ARGS...       start a process in a server's box; it runs on
  ps BOX                         a server box's processes
  attach BOX PID                 follow a process of a server's box to its exit
  kill BOX PID [--signal SIG]    kill a server box's process and its children
  mcp [options]                  an MCP server on stdio for agents
  help [COMMAND]                 this text, or a command's options

run `codebox help COMMAND` (or `codebox COMMAND --help`) for its options.
)";

// One row per subcommand: its name and its function (args exclude the name).
struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};

int Version(const std::vector<std::string>&) {
  std::puts("codebox 0.1.0");
  return 0;
}

constexpr Command kCommands[] = {
    {"run", codebox::cli::RunCommand},
    {"shell", codebox::cli::ShellCommand},
    {"exec", codebox::cli::ExecCommand},
    {"ask", codebox::cli::AskCommand},
    {"repl", codebox::cli::ReplCommand},
    {"doctor", codebox::cli::DoctorCommand},
    {"image", codebox::cli::ImageCommand},
    {"gc", codebox::cli::GcCommand},
    {"options", codebox::cli::OptionsCommand},
    {"serve", codebox::cli::ServeCommand},
    {"status", codebox::cli::StatusCommand},
    {"mcp", codebox::cli::McpCommand},
    {"start", codebox::cli::StartCommand},
    {"ps", codebox::cli::PsCommand},
    {"attach", codebox::cli::AttachCommand},
    {"kill", codebox::cli::KillCommand},
    {"version", Version},
};

const Command* FindCommand(const std::string& name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int UnknownCommand(const std::string& name) {
  std::vector<std::string_view> names;
  for (const Command& c : kCommands) names.push_back(c.name);
  std::string_view closest = codebox::base::ClosestWord(name, names);
  std::string safe = codebox::base::TerminalSafe(name, 200);
  std::fprintf(stderr, "codebox: unknown command '%s'%s%s%s (codebox help lists them)\n",
               safe.c_str(), closest.empty() ? "" : "; did you mean ", std::string(closest).c_str(),
               closest.empty() ? "" : "?");
  return codebox::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return codebox::cli::kExitUsage;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    if (command != "help" || args.empty()) {
      std::fputs(kUsage, stdout);
      std::fputs(codebox::cli::kExitStatusHelp, stdout);
      return 0;
    }
    // `codebox help CMD [SUB]`: CMD's own help, as `codebox CMD [SUB] --help` prints it.
    const Command* wanted = FindCommand(args[0]);
    if (wanted == nullptr) return UnknownCommand(args[0]);
    std::vector<std::string> help_args(args.begin() + 1, args.end());
    help_args.push_back("--help");
    return wanted->run(help_args);
  }
  if (command == "--version") command = "version";
  const Command* found = FindCommand(command);
  if (found == nullptr) return UnknownCommand(command);
  return found->run(args);
}
