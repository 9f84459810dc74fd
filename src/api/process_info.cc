#include "api/process_info.h"

#include <chrono>
#include <string>

#include "api/exec_result.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {
namespace {

using nlohmann::json;

constexpr int64_t kMaxMillis = int64_t{1} << 50;
constexpr int64_t kMaxBytes = int64_t{1} << 62;
constexpr int64_t kMaxPid = 1 << 22;  // the agent's bound on a pid

}  // namespace

json ProcessInfoToJson(const ProcessInfo& p) {
  json j = {{"pid", p.pid},
            {"argv", p.argv},
            {"tty", p.tty},
            {"background", p.background},
            {"started_unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                    p.started.time_since_epoch())
                                    .count()},
            {"state", p.running ? "running" : "exited"},
            {"exit_code", nullptr},
            {"signal", nullptr},
            {"stdout_bytes", p.stdout_bytes},
            {"stderr_bytes", p.stderr_bytes},
            {"dropped_stdout", p.dropped_stdout},
            {"dropped_stderr", p.dropped_stderr}};
  if (p.exit) {
    j["exit_code"] = p.exit->exit_code;
    j["signal"] = p.exit->signal;
    j["timed_out"] = p.exit->timed_out;
    j["out_of_memory"] = p.exit->out_of_memory;
    j["duration_ms"] = p.exit->duration.count();
  }
  return j;
}

json ProcessListToJson(const std::vector<ProcessInfo>& processes) {
  json list = json::array();
  for (const ProcessInfo& p : processes) list.push_back(ProcessInfoToJson(p));
  return {{"processes", std::move(list)}};
}

StatusOr<std::vector<ProcessInfo>> ProcessListFromJson(const json& j) {
  base::JsonFields f(j, "the process list");
  const json* list = f.Find("processes");
  if (list == nullptr || !list->is_array()) return f.Fault("processes", "is not a list");
  if (list->size() > 256) return f.Fault("processes", "has more than 256 entries");
  std::vector<ProcessInfo> out;
  for (const json& item : *list) {
    if (!item.is_object()) return f.Fault("processes", "holds an entry that is not an object");
    base::JsonFields e(item, "the process entry");
    ProcessInfo p;
    ASSIGN_OR_RETURN(int64_t pid, e.Int("pid", 1, kMaxPid));
    p.pid = static_cast<int>(pid);
    ASSIGN_OR_RETURN(p.argv, e.Strings("argv"));
    if (p.argv.size() > 8) return e.Fault("argv", "has more than 8 arguments");
    for (std::string& arg : p.argv) arg = base::TerminalSafe(arg, 128);
    ASSIGN_OR_RETURN(p.tty, e.Bool("tty", false));
    ASSIGN_OR_RETURN(p.background, e.Bool("background", false));
    ASSIGN_OR_RETURN(int64_t started, e.Int("started_unix_ms", 0, kMaxMillis, 0));
    p.started = std::chrono::system_clock::time_point(std::chrono::milliseconds(started));
    ASSIGN_OR_RETURN(std::string state, e.String("state"));
    if (state != "running" && state != "exited") {
      return e.Fault("state", "is neither \"running\" nor \"exited\"");
    }
    p.running = state == "running";
    if (!p.running) {
      ExecResult r;
      ASSIGN_OR_RETURN(int64_t code, e.Int("exit_code", -1, 255));
      ASSIGN_OR_RETURN(int64_t sig, e.Int("signal", 0, 64, 0));
      ASSIGN_OR_RETURN(r.timed_out, e.Bool("timed_out", false));
      ASSIGN_OR_RETURN(r.out_of_memory, e.Bool("out_of_memory", false));
      ASSIGN_OR_RETURN(int64_t ms, e.Int("duration_ms", 0, kMaxMillis, 0));
      r.exit_code = static_cast<int>(code);
      r.signal = static_cast<int>(sig);
      r.duration = std::chrono::milliseconds(ms);
      p.exit = std::move(r);
    }
    uint64_t* counts[] = {&p.stdout_bytes, &p.stderr_bytes, &p.dropped_stdout, &p.dropped_stderr};
    const char* names[] = {"stdout_bytes", "stderr_bytes", "dropped_stdout", "dropped_stderr"};
    for (size_t i = 0; i < 4; ++i) {
      ASSIGN_OR_RETURN(int64_t n, e.Int(names[i], 0, kMaxBytes, 0));
      *counts[i] = static_cast<uint64_t>(n);
    }
    out.push_back(std::move(p));
  }
  return out;
}

json ProcessStartedToJson(int pid, const std::vector<std::string>& argv) {
  return {{"pid", pid}, {"argv", argv}, {"state", "running"}};
}

StatusOr<int> ProcessStartedFromJson(const json& j) {
  ASSIGN_OR_RETURN(int64_t pid,
                   base::JsonFields(j, "the server's started process").Int("pid", 1, kMaxPid));
  return static_cast<int>(pid);
}

json ProcessResultToJson(int pid, const ExecResult& result) {
  json j = ExecResultToJson(result);
  j["pid"] = pid;
  j["dropped_stdout"] = result.dropped_stdout;
  j["dropped_stderr"] = result.dropped_stderr;
  return j;
}

StatusOr<ProcessResult> ProcessResultFromJson(const json& j) {
  ProcessResult p;
  ASSIGN_OR_RETURN(p.result, ExecResultFromJson(j));
  ASSIGN_OR_RETURN(int64_t pid, base::JsonFields(j, "the process's result").Int("pid", 1, kMaxPid));
  p.pid = static_cast<int>(pid);
  return p;
}

}  // namespace codebox::api
