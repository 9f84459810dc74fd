// The `codebox` subcommands. Each returns the process exit status; args exclude the
// subcommand name. Each lives in its own file: run_command.cc (run, exec), doctor_command.cc,
// image_command.cc, ask_command.cc, repl_command.cc, gc_command.cc, options_command.cc.
#ifndef CODEBOX_CLI_COMMANDS_H_
#define CODEBOX_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace codebox::cli {

int RunCommand(const std::vector<std::string>& args);     // codebox run
int ExecCommand(const std::vector<std::string>& args);    // codebox exec
int ShellCommand(const std::vector<std::string>& args);   // codebox shell (shell_command.cc)
int DoctorCommand(const std::vector<std::string>& args);  // codebox doctor
int ImageCommand(const std::vector<std::string>& args);   // codebox image build|ls|rm
int AskCommand(const std::vector<std::string>& args);     // codebox ask
int ReplCommand(const std::vector<std::string>& args);    // codebox repl
int GcCommand(const std::vector<std::string>& args);      // codebox gc
int OptionsCommand(const std::vector<std::string>& args); // codebox options [--markdown]
int ServeCommand(const std::vector<std::string>& args);   // codebox serve (serve_command.cc)
int StatusCommand(const std::vector<std::string>& args);  // codebox status (status_command.cc)
int McpCommand(const std::vector<std::string>& args);     // codebox mcp (mcp_command.cc)
// A server box's processes (process_commands.cc).
int StartCommand(const std::vector<std::string>& args);   // codebox start
int PsCommand(const std::vector<std::string>& args);      // codebox ps
int AttachCommand(const std::vector<std::string>& args);  // codebox attach
int KillCommand(const std::vector<std::string>& args);    // codebox kill

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_COMMANDS_H_
