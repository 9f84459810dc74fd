// codebox: the command-line front end. Dispatches to one function per subcommand.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

constexpr const char kUsage[] = R"(codebox: run untrusted code in a disposable isolated box

usage: codebox COMMAND [options]

commands:
  run [options] CODE | - | --file F   run Python code in a fresh box, print its output
  run --session [options] FILE...     run files as cells of one Python session (state kept)
  repl [options]                      an interactive Python session in a fresh box
  exec [options] -- CMD ARGS...       run a command in a fresh box (-it: on a terminal)
  shell [options]                     an interactive shell in a fresh box (exec -it bash)
  ask [options] TASK                  let a model write code, run it in a box, answer
  doctor                              which drivers and limits this host supports, and why
  image build|ls|rm [NAME]            build, list or remove images (default image: python)
  gc [--dry-run]                      remove leftovers of codebox processes that were killed
  options [--markdown]                every box and exec option (docs/options.md)
  serve [options]                     serve the HTTP API with warm pools (docs/server.md)
  status [--server ADDR] [--json]     a server's boxes and pools
  mcp [options]                       an MCP server on stdio for agents (docs/mcp.md)

run `codebox COMMAND --help` for a command's options.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  using namespace codebox::cli;
  if (command == "run") return RunCommand(args);
  if (command == "exec") return ExecCommand(args);
  if (command == "shell") return ShellCommand(args);
  if (command == "ask") return AskCommand(args);
  if (command == "repl") return ReplCommand(args);
  if (command == "doctor") return DoctorCommand(args);
  if (command == "image") return ImageCommand(args);
  if (command == "gc") return GcCommand(args);
  if (command == "options") return OptionsCommand(args);
  if (command == "serve") return ServeCommand(args);
  if (command == "status") return StatusCommand(args);
  if (command == "mcp") return McpCommand(args);
  if (command == "--version" || command == "version") {
    std::puts("codebox 0.1.0");
    return 0;
  }
  std::fprintf(stderr, "codebox: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
