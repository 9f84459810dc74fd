// `codebox start`, `ps`, `attach`, `kill`: the processes of a box on a codebox server that
// outlive the request that started them (docs/server.md, "Processes that outlive a request").
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/io.h"
#include "base/text.h"
#include "cli/box_flags.h"
#include "cli/commands.h"
#include "cli/server_flags.h"
#include "api/error.h"
#include "api/exec_result.h"
#include "api/process_info.h"
#include "api/text_event.h"
#include "base/json_fields.h"

namespace codebox::cli {
namespace {

using nlohmann::json;

constexpr const char kProcessHelp[] =
    R"(usage: codebox start BOX [--ring BYTES] [--timeout S] -- PROGRAM [ARG...]
       codebox ps BOX [--json]
       codebox attach BOX PID
       codebox kill BOX PID [--signal SIG]

The processes of a box on a codebox server (BOX: its id, b-...) that outlive the
request that started them.

  start    starts PROGRAM in the box in the background and prints its pid; it runs
           until it exits, is killed or the box ends (--timeout S: at most S s)
  ps       lists the box's processes: those running and the last ones that ended
  attach   prints what the process wrote (the last --ring bytes of each stream,
           1 MiB by default) and then its output as it comes; exits with its exit
           status (128+N for signal N). Ctrl-C leaves it running.
  kill     kills the process and everything it started; --signal SIG (a number
           or a name such as TERM) sends SIG to its process group instead

options:
)";

// The box and pid routes of one command.
std::string BoxTarget(const std::string& box) { return "/v1/boxes/" + box + "/processes"; }

// A pid as the routes take it, or 0.
int ParsePid(const std::string& s) {
  if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  int pid = std::stoi(s);
  return pid <= (1 << 22) ? pid : 0;
}

int Usage(const std::string& command, const std::string& why) {
  PrintError(command, InvalidArgument(why + " (see codebox " + command + " --help)"));
  return kExitUsage;
}

int Start(const remote::ServerApi& api, const std::string& box, const json& body) {
  auto started = api.CallJson("POST", BoxTarget(box), body.dump(), std::chrono::seconds(60),
                              "start");
  if (!started.ok()) return PrintError("start", started.status()), kExitCodeboxError;
  auto pid = api::ProcessStartedFromJson(*started);
  if (!pid.ok()) return PrintError("start", pid.status()), kExitCodeboxError;
  std::printf("%d\n", *pid);
  return 0;
}

int Ps(const remote::ServerApi& api, const std::string& box, bool as_json) {
  auto answer = api.CallJson("GET", BoxTarget(box), "", std::chrono::seconds(60), "ps");
  if (!answer.ok()) return PrintError("ps", answer.status()), kExitCodeboxError;
  auto list = api::ProcessListFromJson(*answer);
  if (!list.ok()) return PrintError("ps", list.status()), kExitCodeboxError;
  if (as_json) {
    std::printf("%s\n", answer->dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%-8s %-8s %-10s %10s %10s  %s\n", "PID", "STATE", "EXIT", "STDOUT", "STDERR",
              "COMMAND");
  for (const ProcessInfo& p : *list) {
    std::string exit = "-";
    if (p.exit) {
      exit = p.exit->signal != 0 ? "signal " + std::to_string(p.exit->signal)
                                 : std::to_string(p.exit->exit_code);
    }
    std::string command;
    for (const std::string& arg : p.argv) command += (command.empty() ? "" : " ") + arg;
    std::printf("%-8d %-8s %-10s %10llu %10llu  %s\n", p.pid, p.running ? "running" : "exited",
                exit.c_str(), static_cast<unsigned long long>(p.stdout_bytes),
                static_cast<unsigned long long>(p.stderr_bytes),
                base::TerminalSafe(command, 200).c_str());
  }
  return 0;
}

int Attach(const remote::ServerApi& api, const std::string& box, int pid) {
  http::ClientRequest request;
  request.method = "GET";
  request.target = BoxTarget(box) + "/" + std::to_string(pid) + "/events";
  request.timeout = std::chrono::seconds(120);  // the longest silence: keep-alives come
  std::optional<ExecResult> result;
  Status failed;
  auto on_event = [&](std::string_view event, std::string_view data) -> Status {
    if (event == "stdout" || event == "stderr") {
      ASSIGN_OR_RETURN(std::string text, api::TextEventFromJson(data, event));
      return base::WriteAll(event == "stdout" ? 1 : 2, text);
    }
    if (event == "done") {
      ASSIGN_OR_RETURN(json j, base::ParseJsonObject(data, "the server's done event"));
      ASSIGN_OR_RETURN(result, api::ExecResultFromJson(j));
    } else if (event == "error") {
      failed = api::ErrorEventFromJson(data);
    }
    return Status::Ok();
  };
  auto response = api.CallEvents(request, on_event, "attach");
  if (!failed.ok()) return PrintError("attach", failed), kExitCodeboxError;
  if (!result) {
    return PrintError("attach", response.ok() ? ProtocolError("the stream ended without a result")
                                              : response.status()),
           kExitCodeboxError;
  }
  if (result->dropped_stdout + result->dropped_stderr > 0) {
    std::fprintf(stderr, "codebox attach: %llu bytes of stdout and %llu of stderr had fallen out "
                         "of the box's rings before they could be shown\n",
                 static_cast<unsigned long long>(result->dropped_stdout),
                 static_cast<unsigned long long>(result->dropped_stderr));
  }
  return result->signal != 0 ? 128 + result->signal : result->exit_code;
}

int Kill(const remote::ServerApi& api, const std::string& box, int pid,
         const std::string& signal) {
  const std::string target = BoxTarget(box) + "/" + std::to_string(pid);
  Status st = signal.empty()
                  ? api.CallNoContent("DELETE", target, "", std::chrono::seconds(60), "kill")
                  : api.CallNoContent("POST", target + "/signal",
                                      json({{"signal", ParsePid(signal) > 0
                                                           ? json(ParsePid(signal))
                                                           : json(signal)}})
                                          .dump(),
                                      std::chrono::seconds(60), "kill");
  if (!st.ok()) return PrintError("kill", st), kExitCodeboxError;
  return 0;
}

// One of the four: `command` is its name.
int ProcessCommand(const std::string& command, const std::vector<std::string>& args) {
  ServerFlags flags;
  std::vector<std::string> positional;
  std::vector<std::string> argv;  // start: after --
  bool as_json = false;
  std::string signal;
  json start = json::object();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kProcessHelp, stdout);
      std::fputs(kServerFlagsHelp, stdout);
      return 0;
    } else if (command == "start" && a == "--") {
      argv.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    } else if (flags.Take(args, &i)) {
    } else if (command == "ps" && a == "--json") {
      as_json = true;
    } else if (command == "kill" && a == "--signal" && i + 1 < args.size()) {
      signal = args[++i];
    } else if (command == "start" && (a == "--ring" || a == "--timeout") && i + 1 < args.size()) {
      const std::string& value = args[++i];
      char* end = nullptr;
      double n = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || n < 0) {
        return Usage(command, a + " takes a number, not '" + value + "'");
      }
      if (a == "--ring") {
        start["ring_bytes"] = static_cast<uint64_t>(n);
      } else {
        start["timeout"] = n;
      }
    } else if (!a.empty() && a[0] == '-') {
      return Usage(command, "unknown or incomplete option '" + a + "'");
    } else {
      positional.push_back(a);
    }
  }
  const size_t want = command == "attach" || command == "kill" ? 2 : 1;
  if (positional.size() != want) {
    return Usage(command, want == 2 ? "name the box and the process: BOX PID" : "name the box: BOX");
  }
  int pid = 0;
  if (want == 2 && (pid = ParsePid(positional[1])) == 0) {
    return Usage(command, "'" + positional[1] + "' is not a pid");
  }
  if (command == "start" && argv.empty()) return Usage(command, "name the program after --");
  auto api = flags.Open();
  if (!api.ok()) return PrintError(command, api.status()), kExitUsage;
  const std::string& box = positional[0];
  if (command == "start") {
    start["argv"] = argv;
    return Start(*api, box, start);
  }
  if (command == "ps") return Ps(*api, box, as_json);
  if (command == "attach") return Attach(*api, box, pid);
  return Kill(*api, box, pid, signal);
}

}  // namespace

int StartCommand(const std::vector<std::string>& args) { return ProcessCommand("start", args); }
int PsCommand(const std::vector<std::string>& args) { return ProcessCommand("ps", args); }
int AttachCommand(const std::vector<std::string>& args) { return ProcessCommand("attach", args); }
int KillCommand(const std::vector<std::string>& args) { return ProcessCommand("kill", args); }

}  // namespace codebox::cli
