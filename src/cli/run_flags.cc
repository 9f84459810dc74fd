#include "cli/run_flags.h"

#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <iterator>

#include "base/fs.h"
#include "base/io.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/help_text.h"

namespace codebox::cli {
namespace {

constexpr const char kRunHelp[] = R"(usage: codebox run [options] CODE | FILE.py | - | --file F
       codebox run --session [options] FILE...

Runs Python code in a fresh box and streams what it prints. CODE is run as
`python3 -c CODE`; a FILE.py that exists on this host, or --file F, is run as
`python3 F` (tracebacks name the file and show its lines); `-` reads the code
from stdin. Exit status: the code's own, or codebox's (see EXIT STATUS).

With --session, each FILE runs in turn as a cell of one IPython session in the
box, as a notebook's "run all" does: variables persist from file to file, and
the value of each cell's last expression is printed after its output. It stops
at the first cell that raises, after its traceback: exit status 1 (124 if that
cell timed out); 0 when every cell ran. --timeout applies to each cell.

options:
  --file F             run host file F
  --session            run the FILE arguments as cells of one session
  --out DIR            --session: save the cells' images (charts) in DIR, as
                       out-CELL-N.png; without it they are only described
)";

constexpr const char kExecHelp[] = R"(usage: codebox exec [options] [--] CMD [ARGS...]

Runs a command in a fresh box. Options end at CMD: what follows it is the
command's own (`codebox exec ls -la /work`). Exit status: the command's own, or
codebox's (see EXIT STATUS).

options:
  -i, --stdin          stream this process's stdin to the command as it arrives
  -t                   run the command on a terminal in the box, with this one
                       in raw mode (needs a terminal): -it for a shell or a
                       REPL (`codebox exec -it bash`, or `codebox shell`). With
                       -i or -t there is no exec timeout unless --timeout is
                       given
)";

constexpr const char kCommonHelp[] =
    R"(  --copy-in HOST:BOX   copy a host file or directory into the box first
                       (repeatable)
  --copy-out BOX:HOST  copy a box file or directory out afterwards
                       (repeatable)
  --copy-out-limit SIZE  most bytes one --copy-out may hold, MiB or with a
                       M/G suffix (default: the box's --disk size)
  --json               print one JSON object instead of the output as it
                       comes (its fields: docs/cli.md)
  --local              run in this process even when a codebox server is set
                       or answers
)";

// The flags of run and exec themselves (the box's and --pip's are parsed elsewhere).
struct OwnFlag {
  const char* name;
  bool takes_value;
  bool run;
  bool exec;
};
constexpr OwnFlag kOwnFlags[] = {
    {"--json", false, true, true},
    {"--local", false, true, true},
    {"--copy-in", true, true, true},
    {"--copy-out", true, true, true},
    {"--copy-out-limit", true, true, true},
    {"--file", true, true, false},
    {"--session", false, true, false},
    {"--out", true, true, false},
    {"--stdin", false, false, true},
    {"-i", false, false, true},
    {"-t", false, false, true},
    {"-it", false, false, true},
    {"-ti", false, false, true},
    {"--help", false, true, true},
};

const OwnFlag* FindOwnFlag(const std::string& name, bool is_exec) {
  for (const OwnFlag& f : kOwnFlags) {
    if (name == f.name && (is_exec ? f.exec : f.run)) return &f;
  }
  return nullptr;
}

Status UnknownFlag(const std::string& typed, bool is_exec) {
  const std::string flag = typed.substr(0, typed.find('='));
  std::vector<std::string> names = BoxFlagNames();
  names.insert(names.end(), {"--pip", "--index-url"});
  for (const OwnFlag& f : kOwnFlags) {
    if (is_exec ? f.exec : f.run) names.emplace_back(f.name);
  }
  std::string_view closest = base::ClosestWord(flag, {names.begin(), names.end()});
  std::string message = "unknown option " + flag;
  if (!closest.empty()) message += "; did you mean " + std::string(closest) + "?";
  if (is_exec)
    message += " (options go before the command; see --help)";
  else
    message += " (see --help)";
  return InvalidArgument(message);
}

StatusOr<Copy> ParseCopy(const std::string& flag, const std::string& value) {
  size_t colon = value.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
    return InvalidArgument(flag + " wants FROM:TO, got '" + value + "'");
  }
  return Copy{value.substr(0, colon), value.substr(colon + 1)};
}

std::string ReadAllStdin() {
  return std::string((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
}

// run --session: every file read before any box starts, so a typo costs nothing.
Status ReadCells(const std::vector<std::string>& files, bool has_code_file, Invocation* inv) {
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
  return Status::Ok();
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A bare argument that can only be meant as a file name: one word ending in .py.
bool LooksLikeFileName(const std::string& arg) {
  return arg.size() > 3 && arg.compare(arg.size() - 3, 3, ".py") == 0 &&
         arg.find_first_of(" \t\n;()'\"=") == std::string::npos;
}

Status UseProgramFile(const std::string& flag, const std::string& path, Invocation* inv) {
  auto text = base::ReadFile(path);
  if (!text.ok()) return InvalidArgument(flag + text.status().message());
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgument(flag + path + " is not a file");
  }
  if (name[0] == '-') name = "./" + name;  // never an option of python3
  inv->program_file = ProgramFile{name, std::move(*text)};
  inv->argv = {"python3", name};
  return Status::Ok();
}

// run: what the positional arguments and --file say the code is.
Status PickCode(const std::vector<std::string>& rest, const std::optional<std::string>& file,
                Invocation* inv) {
  if (file) {
    if (!rest.empty()) {
      return InvalidArgument("give the code either as an argument or with --file, not both");
    }
    return UseProgramFile("--file: ", *file, inv);
  }
  if (rest.size() != 1) {
    return InvalidArgument(rest.empty() ? "no code given; usage: codebox run [options] CODE | "
                                          "FILE.py | - | --file F"
                                        : "give the code as one argument (quote it)");
  }
  const std::string& arg = rest[0];
  if (arg == "-") {
    inv->argv = {"python3", "-c", ReadAllStdin()};
    return Status::Ok();
  }
  if (arg.find('\n') == std::string::npos && IsRegularFile(arg)) {
    return UseProgramFile("", arg, inv);
  }
  if (LooksLikeFileName(arg)) {
    return InvalidArgument(arg +
                           ": no such file on this host (to run a file, give its path; to run "
                           "code, quote the code)");
  }
  inv->argv = {"python3", "-c", arg};
  return Status::Ok();
}

}  // namespace

StatusOr<bool> ParseInvocation(const std::vector<std::string>& args, bool is_exec,
                               Invocation* inv) {
  std::optional<std::string> code_file;
  std::vector<std::string> rest;
  bool session = false;
  size_t options_end = args.size();  // exec: where its command starts
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      options_end = i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') {  // not an option: exec's command starts here
      if (is_exec) {
        rest.assign(args.begin() + static_cast<long>(i), args.end());
        options_end = i;
        break;
      }
      rest.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(is_exec ? kExecHelp : kRunHelp, stdout);
      std::fputs(kCommonHelp, stdout);
      std::fputs(kPipFlagsHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      std::fputs(kExitStatusHelp, stdout);
      return false;
    }
    ASSIGN_OR_RETURN(bool was_box_flag, ParseBoxFlag(args, &i, &inv->box));
    if (was_box_flag) continue;
    ASSIGN_OR_RETURN(bool was_pip_flag, ParsePipFlag(args, &i, &inv->pip));
    if (was_pip_flag) continue;

    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const OwnFlag* flag = FindOwnFlag(name, is_exec);
    if (flag == nullptr) return UnknownFlag(a, is_exec);
    std::string value;
    if (!flag->takes_value) {
      if (eq != std::string::npos) return InvalidArgument(name + " takes no value");
    } else if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument(name + " needs a value");
    }
    if (name == "--json") {
      inv->json = true;
    } else if (name == "--local") {
      inv->local = true;
    } else if (name == "--copy-in" || name == "--copy-out") {
      ASSIGN_OR_RETURN(Copy c, ParseCopy(name, value));
      (name == "--copy-in" ? inv->copy_in : inv->copy_out).push_back(c);
    } else if (name == "--copy-out-limit") {
      auto mib = ParseMebibytes(value);
      if (!mib.ok()) return InvalidArgument("--copy-out-limit: " + mib.status().message());
      if (*mib == 0 || *mib > (uint64_t{1} << 44)) {
        return InvalidArgument("--copy-out-limit: give a size from 1M up");
      }
      inv->copy_out_options.max_bytes = *mib << 20;
    } else if (name == "--file") {
      code_file = value;
    } else if (name == "--session") {
      session = true;
    } else if (name == "--out") {
      inv->out_dir = value;
    } else if (name == "--stdin" || name == "-i" || name == "-t" || name == "-it" ||
               name == "-ti") {
      if (!inv->interactive) inv->interactive.emplace();
      if (name.find('t') != std::string::npos && name != "--stdin") inv->interactive->tty = true;
    }
  }
  RETURN_IF_ERROR(ApplyPip(inv->pip, &inv->box));
  RETURN_IF_ERROR(ValidateForCli(inv->box));
  if (is_exec) {
    if (rest.empty()) {
      return InvalidArgument("no command given; usage: codebox exec [options] CMD [ARGS...]");
    }
    inv->argv = rest;
    if (inv->interactive && inv->json) return InvalidArgument("--json does not go with -i or -t");
    // Only codebox's own options: the command's words may say --timeout too.
    if (inv->interactive &&
        NamesExecTimeout({args.begin(), args.begin() + static_cast<long>(options_end)})) {
      inv->interactive->timeout = inv->box.exec_timeout;
    }
    return true;
  }
  if (session) {
    RETURN_IF_ERROR(ReadCells(rest, code_file.has_value(), inv));
    return true;
  }
  if (!inv->out_dir.empty()) return InvalidArgument("--out goes with --session");
  RETURN_IF_ERROR(PickCode(rest, code_file, inv));
  return true;
}

}  // namespace codebox::cli
