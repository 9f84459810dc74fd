// The command line of `codebox run` and `codebox exec`, parsed into one Invocation before any
// box starts: flags as `--flag VALUE` or `--flag=VALUE`, exec's command from the first word
// that is not an option (as docker and kubectl do), and a "did you mean" for a slip.
#ifndef CODEBOX_CLI_RUN_FLAGS_H_
#define CODEBOX_CLI_RUN_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "cli/interactive_exec.h"
#include "cli/run_network.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

struct Copy {
  std::string from;
  std::string to;
};

struct Cell {
  std::string file;
  std::string code;
};

// A program from a host file (--file F, or a bare `run F` naming one): written into the box's
// workdir under its own name and run as `python3 NAME`, so tracebacks name the file and show
// its lines, and __file__ and sys.argv[0] are what they are for `python3 F` on the host.
struct ProgramFile {
  std::string box_name;  // "prog.py" (./ in front of a name that starts with '-')
  std::string code;
};

struct Invocation {
  BoxOptions box;
  std::vector<std::string> argv;  // exec: the command; run: python3 -c CODE, or python3 NAME
  std::optional<ProgramFile> program_file;
  std::vector<Cell> cells;  // run --session: the files, in order
  std::string out_dir;      // run --session: where images go ("": not saved)
  std::optional<std::string> stdin_data;
  std::vector<Copy> copy_in;        // host -> box
  std::vector<Copy> copy_out;       // box -> host
  CopyOutOptions copy_out_options;  // max_bytes 0: the box's disk size
  bool json = false;
  bool local = false;  // --local: never through a server
  PipInstall pip;      // --pip, --index-url: installed before anything runs
  // exec -i / -t / -it: a program the user talks to (interactive_exec.h).
  std::optional<InteractiveExec> interactive;
};

// Parses `codebox run|exec ARGS`. false (and nothing else done) when --help was printed.
// Every error is a usage error: the message names the flag as typed and, for a slip, the
// flag meant. Host files named by --file, --session or a bare `run F` are read here.
StatusOr<bool> ParseInvocation(const std::vector<std::string>& args, bool is_exec, Invocation* inv);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_RUN_FLAGS_H_
