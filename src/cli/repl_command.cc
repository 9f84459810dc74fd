// `codebox repl`: an interactive Python session in a fresh box, like `python3 -i`. Each input
// runs as a cell of the box's code-interpreter session (Box::RunCode), so state persists.
#include <unistd.h>

#include <atomic>
#include <clocale>
#include <cstdio>
#include <cstdlib>

#include "base/fs.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/cell_input.h"
#include "cli/cell_output.h"
#include "cli/commands.h"
#include "cli/line_reader.h"
#include "cli/progress.h"
#include "codebox/box.h"
#include "remote/server_choice.h"

namespace codebox::cli {
namespace {

constexpr const char kReplHelp[] = R"(usage: codebox repl [options]

An interactive Python session in a fresh box, like `python3 -i`: each input
runs as a cell of one IPython kernel, so variables, imports and functions
persist from input to input. The box is destroyed when the session ends.

  >>> / ...        a block (def, if, for, ...), an open bracket or string, or a
                   line ending in \ continues on `... ` lines; an empty line
                   ends a block
  Ctrl-C           interrupts the running cell (KeyboardInterrupt; variables
                   are kept), or abandons the line being typed
  Ctrl-D, exit()   leaves, destroying the box
  --timeout T      how long each cell may run (default 30 s; none for no limit)

The value of a cell's last expression is printed, as Python's prompt does.
Images a cell shows (a chart, image/png, image/jpeg, image/svg+xml) are saved
as out-CELL-N.EXT in the output directory and their path is printed. The line
history is kept in $XDG_STATE_HOME/codebox/repl_history, else
~/.local/state/codebox/repl_history.

options:
  --out DIR        where images are saved (made if missing). Default: a new
                   temporary directory, named at start and removed at the end
                   when nothing was saved
  --local          run the box in this process even when a codebox server is
                   set or answers
)";

struct ReplFlags {
  BoxOptions box;
  std::string out_dir;  // "" = a temporary one
  bool local = false;   // --local: never through a codebox server
};

// nullopt after printing the help.
StatusOr<std::optional<ReplFlags>> ParseFlags(const std::vector<std::string>& args) {
  ReplFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kReplHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      return std::optional<ReplFlags>();
    }
    ASSIGN_OR_RETURN(bool was_box_flag, ParseBoxFlag(args, &i, &f.box));
    if (was_box_flag) continue;
    if (a == "--local") {
      f.local = true;
    } else if (a == "--out") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return InvalidArgument("--out needs a DIR");
      f.out_dir = args[++i];
    } else if (a.starts_with("--out=")) {
      f.out_dir = a.substr(6);
    } else if (a.starts_with("-")) {
      return InvalidArgument("unknown option " + a + BoxFlagHint(a) + " (see codebox repl --help)");
    } else {
      return InvalidArgument("no arguments are taken, got '" + a +
                             "' (to run files: codebox run --session FILE...)");
    }
  }
  return std::optional<ReplFlags>(std::move(f));
}

void Write(FILE* stream, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

class Repl {
 public:
  Repl(Box* box, const ReplFlags& flags, InterruptRelay* relay, std::string out_dir)
      : box_(box),
        flags_(flags),
        relay_(relay),
        printer_(CellSinks{[](std::string_view t) { Write(stdout, t); },
                           [](std::string_view t) { Write(stderr, t); }},
                 std::optional<std::string>(std::move(out_dir))) {}

  // Reads and runs cells until Ctrl-D, exit() or a box that cannot go on. The exit status.
  int Loop(LineReader* reader) {
    std::string cell;
    for (;;) {
      if (std::string problem = reader->TakeHistoryProblem(); !problem.empty()) {
        Write(stderr, "codebox repl: " + base::TerminalSafe(problem) + "\n");
      }
      std::string line;
      const LineReader::Event event = reader->Read(cell.empty() ? ">>> " : "... ", &line);
      if (event == LineReader::Event::kInterrupted) {
        Write(stderr, "\nKeyboardInterrupt\n");
        cell.clear();
        continue;
      }
      if (event == LineReader::Event::kEnd) {
        if (::isatty(STDOUT_FILENO)) Write(stdout, "\n");  // after the prompt Ctrl-D left
        // A block the input ended inside still runs, as `python3 -i < file` does.
        if (!cell.empty() && !IsExitCommand(cell) && !RunCell(cell)) return kExitCodeboxError;
        return 0;
      }
      reader->Remember(line);
      if (cell.empty() && line.find_first_not_of(" \t") == std::string::npos) continue;
      cell = cell.empty() ? line : cell + "\n" + line;
      if (NeedsMoreInput(cell)) continue;
      if (IsExitCommand(cell)) return 0;
      if (!RunCell(cell)) return kExitCodeboxError;
      cell.clear();
    }
  }

 private:
  // False when the box cannot run cells any more (the error is printed).
  bool RunCell(const std::string& code) {
    printer_.Begin(++cells_);
    relay_->SetCellRunning(true);
    auto execution = box_->RunCode(code, printer_.Streaming());
    relay_->SetCellRunning(false);
    const bool interrupted = relay_->TakeCellInterrupted();
    if (interrupted && ::isatty(STDERR_FILENO)) Write(stderr, "\n");  // past the tty's "^C"
    if (!execution.ok()) {
      PrintError("repl", execution.status());
      return false;
    }
    printer_.End(*execution, CellEnd{.interrupted_by_user = interrupted,
                                     .timeout = flags_.box.exec_timeout,
                                     .output_limit_bytes = flags_.box.output_limit_bytes});
    return true;
  }

  Box* box_;
  const ReplFlags& flags_;
  InterruptRelay* relay_;
  CellPrinter printer_;
  int cells_ = 0;
};

// "Python 3.11.2, IPython 8.5.0", from the box (so terminal-safe), and the kernel started.
StatusOr<std::string> StartKernel(Box* box) {
  // Starting the kernel may take longer than a short --timeout allows a cell.
  RunCodeOptions options;
  options.timeout = std::chrono::seconds(120);
  // IPython.core.release, not IPython.__version__: the kernel loads the IPython package itself
  // lazily (its __init__ costs a second).
  ASSIGN_OR_RETURN(Execution e, box->RunCode("import sys\n"
                                             "from IPython.core import release\n"
                                             "print('Python', sys.version.split()[0] + ',',"
                                             " 'IPython', release.version, end='')",
                                             options));
  if (e.error) {
    return Internal("the session's first cell failed: " + e.error->name + ": " + e.error->value);
  }
  std::string text;
  for (const std::string& chunk : e.stdout_chunks) text += chunk;
  return base::TerminalSafe(text, 200);
}

std::string CellTimeLimit(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) return "cells run without a time limit";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", timeout.count() / 1000.0);
  return std::string("each cell may run ") + secs + " s (--timeout)";
}

}  // namespace

int ReplCommand(const std::vector<std::string>& args) {
  auto parsed = ParseFlags(args);
  if (!parsed.ok()) {
    PrintError("repl", parsed.status());
    return kExitUsage;
  }
  if (!parsed->has_value()) return 0;
  ReplFlags& flags = **parsed;
  if (Status st = ValidateForCli(flags.box); !st.ok()) {
    PrintError("repl", st);
    return kExitUsage;
  }
  if (Status st = remote::ChooseServer(&flags.box, flags.local); !st.ok()) {
    PrintError("repl", st);
    return kExitCodeboxError;
  }
  std::setlocale(LC_CTYPE, "");  // libedit decodes typed characters in the terminal's encoding

  std::string out_dir = flags.out_dir;
  const bool temporary_out = out_dir.empty();
  if (temporary_out) {
    auto made = base::MakeTempDir(base::TempRoot(), "codebox-repl-");
    if (!made.ok()) {
      PrintError("repl", made.status().WithContext("--out (a temporary directory)"));
      return kExitCodeboxError;
    }
    out_dir = *made;
  } else if (Status st = base::MakeDirs(out_dir); !st.ok()) {
    PrintError("repl", st.WithContext("--out"));
    return kExitCodeboxError;
  }

  // Before Box::Create, so that the box's threads start with SIGINT blocked.
  std::atomic<Box*> running_box = nullptr;
  auto relay = InterruptRelay::Install([&running_box] {
    if (Box* b = running_box.load(); b != nullptr) (void)b->InterruptCode();
  });
  if (!relay.ok()) {
    PrintError("repl", relay.status());
    return kExitCodeboxError;
  }
  Write(stderr,
        "codebox repl: starting a box (image " + base::TerminalSafe(flags.box.image) + ")...\n");
  // Erased before anything else is printed: the kernel's start is part of the wait.
  BoxStartNotice box_start = AnnounceBoxStart(flags.box);
  auto box = Box::Create(flags.box);
  if (!box.ok()) {
    box_start.Done();
    PrintError("repl", box.status());
    return kExitCodeboxError;
  }
  running_box = box->get();
  int status = 0;
  auto versions = StartKernel(box->get());
  box_start.Done();
  if (!versions.ok()) {
    PrintError("repl", versions.status());
    status = kExitCodeboxError;
  } else {
    Write(stderr, "codebox repl: " + *versions + " in a " + (*box)->info().driver + " box (image " +
                      base::TerminalSafe(flags.box.image) + ")\n" + "images go to " +
                      base::TerminalSafe(out_dir) + "; " + CellTimeLimit(flags.box.exec_timeout) +
                      "; Ctrl-C interrupts, Ctrl-D or exit() leaves\n");
    auto reader = LineReader::Create(ReplHistoryPath(Env("XDG_STATE_HOME"), Env("HOME")),
                                     (*relay)->prompt_fd());
    Repl repl(box->get(), flags, relay->get(), out_dir);
    status = repl.Loop(reader.get());
  }
  running_box = nullptr;
  if (Status st = (*box)->Destroy(); !st.ok()) {
    PrintError("repl", st);
    status = kExitCodeboxError;
  }
  if (temporary_out) ::rmdir(out_dir.c_str());  // only if nothing was saved in it
  return status;
}

}  // namespace codebox::cli
