// `codebox run` and `codebox exec`: one fresh box, one exec, the box's exit status; and
// `codebox run --session`: files as the cells of one code-interpreter session.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/io.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/cell_output.h"
#include "cli/commands.h"
#include "cli/interactive_exec.h"
#include "cli/run_network.h"
#include "codebox/box.h"
#include "remote/remote_box.h"
#include "remote/server_choice.h"
#include "server/api_json.h"

namespace codebox::cli {
namespace {

struct Copy {
  std::string from;
  std::string to;
};

struct Cell {
  std::string file;
  std::string code;
};

struct Invocation {
  BoxOptions box;
  std::vector<std::string> argv;  // exec: the command; run: python3 -c CODE
  std::vector<Cell> cells;        // run --session: the files, in order
  std::string out_dir;            // run --session: where images go ("": not saved)
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

constexpr const char kRunHelp[] = R"(usage: codebox run [options] CODE | - | --file F
       codebox run --session [options] FILE...

Runs Python code (python3 -c) in a fresh box and prints what it prints. `-` reads the code
from stdin. The exit status is the code's; 124 if it timed out, 125 if codebox could not run it,
126 if a --pip install failed.

With --session, each FILE runs in turn as a cell of one IPython session in the box, as a
notebook's "run all" does: variables persist from file to file, and the value of each cell's
last expression is printed after its output. It stops at the first cell that raises, after
its traceback: exit status 1 (124 if that cell timed out); 0 when every cell ran. --timeout
applies to each cell.

options:
  --file F             read the code from host file F
  --session            run the FILE arguments as cells of one session (see above)
  --out DIR            --session: save the cells' images (charts) in DIR, as
                       out-CELL-N.png; without it they are only described
  --copy-in HOST:BOX   copy a host file or directory into the box first (repeatable)
  --copy-out BOX:HOST  copy a box file or directory out afterwards (repeatable)
  --copy-out-limit SIZE  most bytes all files of one --copy-out may hold, MiB or with M/G
                       suffix (default: the box's --disk size)
  --json               print one JSON object: stdout, stderr, exit_code, timed_out, ...,
                       network (none, allow, open), egress (the box's connections: host,
                       port, allowed, reason, address, bytes_up, bytes_down) and install
                       (pip's result, with --pip)
  --local              run in this process even when a codebox server is set or answers
)";

constexpr const char kExecHelp[] = R"(usage: codebox exec [options] -- CMD [ARGS...]

Runs a command in a fresh box. The exit status is the command's; 124 if it timed out,
125 if codebox could not run it, 126 if a --pip install failed or the command cannot be
executed, 127 if there is no such command.

options:
  -i, --stdin          stream this process's stdin to the command as it arrives
  -t                   run the command on a terminal in the box, this one in raw mode (needs
                       a terminal; -it for a shell: `codebox exec -it -- bash`, or
                       `codebox shell`). With -i or -t: no exec timeout unless --timeout
  --copy-in HOST:BOX   copy a host file or directory into the box first (repeatable)
  --copy-out BOX:HOST  copy a box file or directory out afterwards (repeatable)
  --copy-out-limit SIZE  most bytes all files of one --copy-out may hold, MiB or with M/G
                       suffix (default: the box's --disk size)
  --json               print one JSON object: stdout, stderr, exit_code, timed_out, ...,
                       network (none, allow, open), egress (the box's connections: host,
                       port, allowed, reason, address, bytes_up, bytes_down) and install
                       (pip's result, with --pip)
  --local              run in this process even when a codebox server is set or answers
)";

StatusOr<Copy> ParseCopy(const std::string& flag, const std::string& value) {
  size_t colon = value.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
    return InvalidArgument(flag + " wants FROM:TO, got '" + value + "'");
  }
  return Copy{value.substr(0, colon), value.substr(colon + 1)};
}

StatusOr<std::string> ReadAllStdin() {
  std::string data((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  return data;
}

// run --session: every file read before any box starts, so a typo costs nothing.
StatusOr<bool> ReadCells(const std::vector<std::string>& files, bool has_code_file,
                         Invocation* inv) {
  if (has_code_file) return InvalidArgument("--session takes the files as arguments, not --file");
  if (inv->json) return InvalidArgument("--json does not go with --session");
  if (files.empty()) {
    return InvalidArgument("no files given; usage: codebox run --session [options] FILE...");
  }
  for (const std::string& file : files) {
    if (file == "-") return InvalidArgument("--session reads files, not stdin ('-')");
    auto text = base::ReadFile(file);
    if (!text.ok()) return InvalidArgument("--session: " + text.status().message());
    inv->cells.push_back({file, std::move(*text)});
  }
  return true;
}

// Parses flags common to run and exec; positional arguments go to *rest.
// Returns nullopt status-less when --help was printed.
StatusOr<bool> ParseInvocation(const std::vector<std::string>& args, bool is_exec, Invocation* inv,
                               std::vector<std::string>* rest) {
  std::optional<std::string> code_file;
  bool session = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(is_exec ? kExecHelp : kRunHelp, stdout);
      std::fputs(kPipFlagsHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      return false;
    }
    if (is_exec && a == "--") {
      rest->insert(rest->end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    ASSIGN_OR_RETURN(bool was_box_flag, ParseBoxFlag(args, &i, &inv->box));
    if (was_box_flag) continue;
    ASSIGN_OR_RETURN(bool was_pip_flag, ParsePipFlag(args, &i, &inv->pip));
    if (was_pip_flag) continue;
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= args.size()) return InvalidArgument(a + " needs a value");
      return args[++i];
    };
    if (a == "--json") {
      inv->json = true;
    } else if (a == "--local") {
      inv->local = true;
    } else if (a == "--copy-in" || a == "--copy-out") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(Copy c, ParseCopy(a, v));
      (a == "--copy-in" ? inv->copy_in : inv->copy_out).push_back(c);
    } else if (a == "--copy-out-limit") {
      ASSIGN_OR_RETURN(std::string v, value());
      auto mib = ParseMebibytes(v);
      if (!mib.ok()) return InvalidArgument("--copy-out-limit: " + mib.status().message());
      if (*mib == 0 || *mib > (uint64_t{1} << 44)) {
        return InvalidArgument("--copy-out-limit: give a size from 1M up");
      }
      inv->copy_out_options.max_bytes = *mib << 20;
    } else if (!is_exec && a == "--file") {
      ASSIGN_OR_RETURN(code_file, value());
    } else if (!is_exec && a == "--session") {
      session = true;
    } else if (!is_exec && a == "--out") {
      ASSIGN_OR_RETURN(inv->out_dir, value());
    } else if (is_exec && (a == "--stdin" || a == "-i" || a == "-t" || a == "-it" || a == "-ti")) {
      if (!inv->interactive) inv->interactive.emplace();
      if (a.find('t') != std::string::npos && a != "--stdin") inv->interactive->tty = true;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      return InvalidArgument("unknown option " + a + BoxFlagHint(a) + " (see --help)");
    } else {
      rest->push_back(a);
    }
  }
  RETURN_IF_ERROR(ApplyPip(inv->pip, &inv->box));
  if (is_exec) {
    if (rest->empty())
      return InvalidArgument("no command given; usage: codebox exec [options] -- CMD ARGS...");
    inv->argv = *rest;
    if (inv->interactive && inv->json) return InvalidArgument("--json does not go with -i or -t");
    if (inv->interactive && NamesExecTimeout(args)) {
      inv->interactive->timeout = inv->box.exec_timeout;
    }
    return true;
  }
  if (session) return ReadCells(*rest, code_file.has_value(), inv);
  if (!inv->out_dir.empty()) return InvalidArgument("--out goes with --session");
  std::string code;
  if (code_file) {
    if (!rest->empty())
      return InvalidArgument("give the code either as an argument or with --file, not both");
    auto text = base::ReadFile(*code_file);
    if (!text.ok()) return InvalidArgument("--file: " + text.status().message());
    code = *text;
  } else if (rest->size() == 1 && (*rest)[0] == "-") {
    ASSIGN_OR_RETURN(code, ReadAllStdin());
  } else if (rest->size() == 1) {
    code = (*rest)[0];
  } else {
    return InvalidArgument(rest->empty()
                               ? "no code given; usage: codebox run [options] CODE | - | --file F"
                               : "give the code as one argument (quote it)");
  }
  inv->argv = {"python3", "-c", code};
  return true;
}

void WriteOut(FILE* stream, std::string_view data) {
  std::fwrite(data.data(), 1, data.size(), stream);
  std::fflush(stream);
}

// Serializes straight to stdout: escaped binary output is up to 6x its size, and must not
// be built as one more string in memory first. Invalid UTF-8 becomes U+FFFD.
void PrintJson(const nlohmann::json& j) {
  nlohmann::detail::serializer<nlohmann::json> out(
      nlohmann::detail::output_adapter<char>(std::cout), ' ',
      nlohmann::json::error_handler_t::replace);
  out.dump(j, /*pretty_print=*/true, /*ensure_ascii=*/false, /*indent_step=*/2);
  std::cout << '\n' << std::flush;
}

// A box with the --pip packages installed and the --copy-in files in it; nullptr once the
// error is printed, with *status the exit status (125, or 126 when the install failed).
std::unique_ptr<Box> StartBox(const std::string& command, Invocation& inv, int* status) {
  *status = kExitCodeboxError;
  auto box = Box::Create(inv.box);
  if (!box.ok()) {
    PrintError(command, box.status());
    return nullptr;
  }
  if ((*status = InstallFirst(command, box->get(), &inv.pip, inv.json)) != 0) {
    if (inv.json && inv.pip.result) {  // pip's result is the answer: the code did not run
      nlohmann::json j = nlohmann::json::object();
      AddNetworkJson(inv.box, box->get(), inv.pip, &j);
      PrintJson(j);
    }
    return nullptr;
  }
  for (const Copy& c : inv.copy_in) {
    if (Status st = (*box)->CopyIn(c.from, c.to); !st.ok()) {
      PrintError(command, st);
      *status = kExitCodeboxError;
      return nullptr;
    }
  }
  return std::move(*box);
}

// The --copy-out copies, then the box's end. `status`, or 125 when one of them failed.
int FinishBox(const std::string& command, const Invocation& inv, Box* box, int status) {
  for (const Copy& c : inv.copy_out) {
    if (Status st = box->CopyOut(c.from, c.to, inv.copy_out_options); !st.ok()) {
      PrintError(command, st);
      status = kExitCodeboxError;
    }
  }
  if (Status st = box->Destroy(); !st.ok()) PrintError(command, st);
  return status;
}

// run --session: the files as cells of one kernel, stopping at the first that raises.
int RunCells(const std::string& command, Invocation& inv) {
  std::optional<std::string> images;  // the directory they go to
  if (!inv.out_dir.empty()) {
    if (Status st = base::MakeDirs(inv.out_dir); !st.ok()) {
      PrintError(command, st.WithContext("--out"));
      return kExitCodeboxError;
    }
    images = inv.out_dir;
  }
  int start_status = 0;
  std::unique_ptr<Box> box = StartBox(command, inv, &start_status);
  if (box == nullptr) return start_status;
  CellPrinter printer({[](std::string_view t) { WriteOut(stdout, t); },
                       [](std::string_view t) { WriteOut(stderr, t); }},
                      std::move(images));
  int status = 0;
  for (size_t i = 0; i < inv.cells.size(); ++i) {
    const Cell& cell = inv.cells[i];
    printer.Begin(static_cast<int>(i + 1));
    auto e = box->RunCode(cell.code, printer.Streaming());
    if (!e.ok()) {
      PrintError(command, e.status().WithContext(cell.file));
      status = kExitCodeboxError;
      break;
    }
    printer.End(
        *e, {.timeout = inv.box.exec_timeout, .output_limit_bytes = inv.box.output_limit_bytes});
    if (e->error) {
      const size_t left = inv.cells.size() - i - 1;
      std::fprintf(
          stderr, "codebox %s: %s (cell %zu of %zu) raised %s%s\n", command.c_str(),
          base::TerminalSafe(cell.file).c_str(), i + 1, inv.cells.size(),
          base::TerminalSafe(e->error->name, 200).c_str(),
          left == 0 ? "" : ("; the " + std::to_string(left) + " after it did not run").c_str());
      status = e->timed_out ? kExitTimedOut : 1;
      break;
    }
  }
  ReportNetwork(inv.box, *box);
  return FinishBox(command, inv, box.get(), status);
}

// Prints what --json or the limits call for (the output itself was streamed); the exit status.
// `box` is null for a one-shot run on a server.
int Report(const Invocation& inv, ExecResult& result, const Box* box) {
  if (inv.json) {
    nlohmann::json j = server::ExecResultJson(result);  // the same fields as the HTTP API's
    AddNetworkJson(inv.box, box, inv.pip, &j);
    if (box != nullptr) j["user"] = box->info().user;  // who ran it (BoxInfo::user)
    PrintJson(j);
  } else {
    if (box != nullptr) ReportNetwork(inv.box, *box);
    // Say plainly when a limit ended it, so empty output is never a mystery.
    if (result.timed_out) {
      std::fprintf(stderr, "codebox: timed out after %.1f s (--timeout to change)\n",
                   result.duration.count() / 1000.0);
    } else if (result.out_of_memory) {
      std::fprintf(stderr, "codebox: killed: out of memory (limit %llu MiB, --memory to change)\n",
                   static_cast<unsigned long long>(inv.box.memory_mib));
    }
    if (result.output_truncated) {
      std::fprintf(stderr, "codebox: output truncated at %llu bytes per stream\n",
                   static_cast<unsigned long long>(inv.box.output_limit_bytes));
    }
    // An image without Python (busybox, a Go binary's image): the agent could not start it.
    if (result.exit_code == 127 && !inv.argv.empty() && inv.argv[0] == "python3" &&
        result.stderr_data.find("exec python3:") != std::string::npos) {
      std::fprintf(stderr,
                   "codebox: image %s has no python3 on its PATH; run Python in an image that "
                   "has it, or commands with `codebox exec --image %s -- CMD`\n",
                   inv.box.image.c_str(), inv.box.image.c_str());
    }
  }
  return ExitStatusOf(result);
}

int Execute(const std::string& command, Invocation& inv) {
  if (!inv.cells.empty()) return RunCells(command, inv);
  ExecOptions exec;
  exec.stdin_data = inv.stdin_data;
  if (!inv.json) {  // stream as it comes; the result is not printed again
    exec.on_stdout = [](std::string_view d) { WriteOut(stdout, d); };
    exec.on_stderr = [](std::string_view d) { WriteOut(stderr, d); };
  }
  // `run CODE` on a server with nothing to copy or install and no network: one request, a
  // warm pool box.
  if (command == "run" && !inv.box.server.empty() && inv.copy_in.empty() && inv.copy_out.empty() &&
      EffectiveNetwork(inv.box) == NetworkMode::kNone) {
    auto result = remote::RunOnServer(inv.box, inv.argv[2], exec);
    if (!result.ok()) {
      PrintError(command, result.status());
      return kExitCodeboxError;
    }
    return Report(inv, *result, nullptr);
  }
  int start_status = 0;
  if (inv.interactive) {  // before a box starts
    if (Status st = CheckInteractive(*inv.interactive); !st.ok()) {
      PrintError(command, st);
      return kExitCodeboxError;
    }
  }
  std::unique_ptr<Box> box = StartBox(command, inv, &start_status);
  if (box == nullptr) return start_status;
  if (inv.interactive) {
    return FinishBox(command, inv, box.get(),
                     RunInteractive(command, *box, inv.argv, *inv.interactive));
  }
  auto result = box->Exec(inv.argv, exec);
  if (!result.ok()) {
    PrintError(command, result.status());
    return kExitCodeboxError;
  }
  return FinishBox(command, inv, box.get(), Report(inv, *result, box.get()));
}

int Main(const std::string& command, const std::vector<std::string>& args, bool is_exec) {
  Invocation inv;
  std::vector<std::string> rest;
  auto parsed = ParseInvocation(args, is_exec, &inv, &rest);
  if (!parsed.ok()) {
    PrintError(command, parsed.status());
    return kExitCodeboxError;
  }
  if (!*parsed) return 0;  // --help
  // A server has no route for an interactive exec yet: it runs here unless --server asks for
  // one (which then says it cannot).
  const bool here = inv.local || (inv.interactive && inv.box.server.empty());
  if (Status st = remote::ChooseServer(&inv.box, here); !st.ok()) {
    PrintError(command, st);
    return kExitCodeboxError;
  }
  return Execute(command, inv);
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) { return Main("run", args, false); }
int ExecCommand(const std::vector<std::string>& args) { return Main("exec", args, true); }

}  // namespace codebox::cli
