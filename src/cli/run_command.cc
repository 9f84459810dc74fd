// `codebox run` and `codebox exec`: one fresh box, one exec, the box's exit status.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/io.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "codebox/box.h"

namespace codebox::cli {
namespace {

struct Copy {
  std::string from;
  std::string to;
};

struct Invocation {
  BoxOptions box;
  std::vector<std::string> argv;      // exec: the command; run: python3 -c CODE
  std::optional<std::string> stdin_data;
  std::vector<Copy> copy_in;          // host -> box
  std::vector<Copy> copy_out;         // box -> host
  CopyOutOptions copy_out_options;    // max_bytes 0: the box's disk size
  bool json = false;
};

constexpr const char kRunHelp[] = R"(usage: codebox run [options] CODE | - | --file F

Runs Python code (python3 -c) in a fresh box and prints what it prints. `-` reads the code
from stdin. The exit status is the code's; 124 if it timed out, 125 if codebox could not run it.

options:
  --file F             read the code from host file F
  --copy-in HOST:BOX   copy a host file or directory into the box first (repeatable)
  --copy-out BOX:HOST  copy a box file or directory out afterwards (repeatable)
  --copy-out-limit SIZE  most bytes all files of one --copy-out may hold, MiB or with M/G
                       suffix (default: the box's --disk size)
  --json               print one JSON object: stdout, stderr, exit_code, timed_out, ...
)";

constexpr const char kExecHelp[] = R"(usage: codebox exec [options] -- CMD [ARGS...]

Runs a command in a fresh box. The exit status is the command's; 124 if it timed out,
125 if codebox could not run it.

options:
  --stdin              forward this process's stdin to the command
  --copy-in HOST:BOX   copy a host file or directory into the box first (repeatable)
  --copy-out BOX:HOST  copy a box file or directory out afterwards (repeatable)
  --copy-out-limit SIZE  most bytes all files of one --copy-out may hold, MiB or with M/G
                       suffix (default: the box's --disk size)
  --json               print one JSON object: stdout, stderr, exit_code, timed_out, ...
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

// Parses flags common to run and exec; positional arguments go to *rest.
// Returns nullopt status-less when --help was printed.
StatusOr<bool> ParseInvocation(const std::vector<std::string>& args, bool is_exec,
                               Invocation* inv, std::vector<std::string>* rest) {
  std::optional<std::string> code_file;
  bool forward_stdin = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(is_exec ? kExecHelp : kRunHelp, stdout);
      std::fputs(BoxFlagsHelp().c_str(), stdout);
      return false;
    }
    if (is_exec && a == "--") {
      rest->insert(rest->end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    ASSIGN_OR_RETURN(bool was_box_flag, ParseBoxFlag(args, &i, &inv->box));
    if (was_box_flag) continue;
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= args.size()) return InvalidArgument(a + " needs a value");
      return args[++i];
    };
    if (a == "--json") {
      inv->json = true;
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
    } else if (is_exec && a == "--stdin") {
      forward_stdin = true;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      return InvalidArgument("unknown option " + a + BoxFlagHint(a) + " (see --help)");
    } else {
      rest->push_back(a);
    }
  }
  if (is_exec) {
    if (rest->empty()) return InvalidArgument("no command given; usage: codebox exec [options] -- CMD ARGS...");
    inv->argv = *rest;
    if (forward_stdin) {
      ASSIGN_OR_RETURN(inv->stdin_data, ReadAllStdin());
    }
    return true;
  }
  std::string code;
  if (code_file) {
    if (!rest->empty()) return InvalidArgument("give the code either as an argument or with --file, not both");
    auto text = base::ReadFile(*code_file);
    if (!text.ok()) return InvalidArgument("--file: " + text.status().message());
    code = *text;
  } else if (rest->size() == 1 && (*rest)[0] == "-") {
    ASSIGN_OR_RETURN(code, ReadAllStdin());
  } else if (rest->size() == 1) {
    code = (*rest)[0];
  } else {
    return InvalidArgument(rest->empty() ? "no code given; usage: codebox run [options] CODE | - | --file F"
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
  nlohmann::detail::serializer<nlohmann::json> out(nlohmann::detail::output_adapter<char>(std::cout),
                                                   ' ', nlohmann::json::error_handler_t::replace);
  out.dump(j, /*pretty_print=*/true, /*ensure_ascii=*/false, /*indent_step=*/2);
  std::cout << '\n' << std::flush;
}

int ExitStatusOf(const ExecResult& r) {
  if (r.timed_out) return kExitTimedOut;
  if (r.signal != 0) return 128 + r.signal;
  return r.exit_code;
}

int Execute(const std::string& command, const Invocation& inv) {
  auto box = Box::Create(inv.box);
  if (!box.ok()) {
    PrintError(command, box.status());
    return kExitCodeboxError;
  }
  for (const Copy& c : inv.copy_in) {
    if (Status st = (*box)->CopyIn(c.from, c.to); !st.ok()) {
      PrintError(command, st);
      return kExitCodeboxError;
    }
  }
  ExecOptions exec;
  exec.stdin_data = inv.stdin_data;
  if (!inv.json) {  // stream as it comes; the result is not printed again
    exec.on_stdout = [](std::string_view d) { WriteOut(stdout, d); };
    exec.on_stderr = [](std::string_view d) { WriteOut(stderr, d); };
  }
  auto result = (*box)->Exec(inv.argv, exec);
  if (!result.ok()) {
    PrintError(command, result.status());
    return kExitCodeboxError;
  }
  int status = ExitStatusOf(*result);
  for (const Copy& c : inv.copy_out) {
    if (Status st = (*box)->CopyOut(c.from, c.to, inv.copy_out_options); !st.ok()) {
      PrintError(command, st);
      status = kExitCodeboxError;
    }
  }
  if (inv.json) {
    nlohmann::json j = {{"stdout", std::move(result->stdout_data)},
                        {"stderr", std::move(result->stderr_data)},
                        {"exit_code", result->exit_code},
                        {"signal", result->signal},
                        {"timed_out", result->timed_out},
                        {"out_of_memory", result->out_of_memory},
                        {"output_truncated", result->output_truncated},
                        {"duration_ms", result->duration.count()},
                        {"driver", result->driver}};
    PrintJson(j);
  } else {
    // Say plainly when a limit ended it, so empty output is never a mystery.
    if (result->timed_out) {
      std::fprintf(stderr, "codebox: timed out after %.1f s (--timeout to change)\n",
                   result->duration.count() / 1000.0);
    } else if (result->out_of_memory) {
      std::fprintf(stderr, "codebox: killed: out of memory (limit %llu MiB, --memory to change)\n",
                   static_cast<unsigned long long>(inv.box.memory_mib));
    }
    if (result->output_truncated) {
      std::fprintf(stderr, "codebox: output truncated at %llu bytes per stream\n",
                   static_cast<unsigned long long>(inv.box.output_limit_bytes));
    }
  }
  if (Status st = (*box)->Destroy(); !st.ok()) PrintError(command, st);
  return status;
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
  return Execute(command, inv);
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) { return Main("run", args, false); }
int ExecCommand(const std::vector<std::string>& args) { return Main("exec", args, true); }

}  // namespace codebox::cli
