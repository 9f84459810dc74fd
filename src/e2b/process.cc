#include "e2b/process.h"

#include <climits>

#include "base/json.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

constexpr int kMaxPid = 1 << 22;

// A uint32 as proto3 JSON writes it: a number, or a decimal string.
StatusOr<int64_t> Uint(const base::JsonFields& f, const char* key, int64_t max) {
  const json* value = f.Find(key);
  if (value != nullptr && value->is_string()) {
    const auto& text = value->get_ref<const std::string&>();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
      return f.Fault(key, "is not a number");
    }
    std::optional<uint64_t> n = base::ParseDecimal(text, static_cast<uint64_t>(max));
    if (!n) return f.Fault(key, "is past " + std::to_string(max));
    return static_cast<int64_t>(*n);
  }
  return f.Int(key, 0, max);
}

StatusOr<const json*> Object(const base::JsonFields& f, const char* key, bool required) {
  const json* value = f.Find(key);
  if (value == nullptr) {
    if (required) return f.Missing(key);
    return static_cast<const json*>(nullptr);
  }
  if (!value->is_object()) return f.Fault(key, "is not an object");
  return value;
}

StatusOr<int> SelectedPid(const base::JsonFields& f) {
  ASSIGN_OR_RETURN(const json* process, Object(f, "process", true));
  base::JsonFields p(*process, "process selector", StatusCode::kInvalidArgument);
  if (p.Find("tag") != nullptr && p.Find("pid") == nullptr) {
    return InvalidArgument("selecting a process by tag is not supported by codebox: give its pid");
  }
  ASSIGN_OR_RETURN(int64_t pid, Uint(p, "pid", kMaxPid));
  if (pid < 1) return p.Fault("pid", "is not a pid (1.." + std::to_string(kMaxPid) + ")");
  return static_cast<int>(pid);
}

// {"size": {"cols", "rows"}}, each side 1..10000.
StatusOr<TerminalSize> PtySize(const json& pty) {
  base::JsonFields f(pty, "pty", StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(const json* size, Object(f, "size", true));
  base::JsonFields s(*size, "pty size", StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(int64_t cols, Uint(s, "cols", 10000));
  ASSIGN_OR_RETURN(int64_t rows, Uint(s, "rows", 10000));
  if (cols < 1 || rows < 1) return InvalidArgument("pty size: cols and rows must be 1..10000");
  return TerminalSize{.rows = static_cast<uint16_t>(rows), .cols = static_cast<uint16_t>(cols)};
}

Status CheckObject(const json& body, std::string_view what) {
  if (!body.is_object()) return InvalidArgument(std::string(what) + " is not a JSON object");
  return Status::Ok();
}

}  // namespace

StatusOr<ProcessStart> ProcessStartFromJson(const json& body) {
  RETURN_IF_ERROR(CheckObject(body, "start request"));
  base::JsonFields f(body, "start request", StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(const json* process, Object(f, "process", true));
  base::JsonFields p(*process, "start request: process", StatusCode::kInvalidArgument);
  ProcessStart out;
  ASSIGN_OR_RETURN(std::string cmd, p.String("cmd"));
  if (cmd.empty()) return p.Fault("cmd", "is empty");
  ASSIGN_OR_RETURN(std::vector<std::string> args, p.Strings("args", std::vector<std::string>{}));
  if (args.size() > kMaxArgs) {
    return p.Fault("args", "has more than " + std::to_string(kMaxArgs) + " entries");
  }
  out.argv.reserve(args.size() + 1);
  out.argv.push_back(std::move(cmd));
  for (std::string& a : args) out.argv.push_back(std::move(a));
  RETURN_IF_ERROR(ValidateArgv(out.argv));
  if (const json* envs = p.Find("envs"); envs != nullptr) {
    if (!envs->is_object()) return p.Fault("envs", "is not an object of strings");
    for (const auto& [k, v] : envs->items()) {
      if (!v.is_string()) return p.Fault("envs", "has a value that is not a string");
      out.envs.emplace(k, v.get<std::string>());
    }
    RETURN_IF_ERROR(ValidateEnvironment(out.envs));
  }
  ASSIGN_OR_RETURN(out.cwd, p.String("cwd", std::string()));
  if (out.cwd.size() > 4096) return p.Fault("cwd", "is longer than 4096 bytes");
  ASSIGN_OR_RETURN(const json* pty, Object(f, "pty", false));
  if (pty != nullptr) {
    ASSIGN_OR_RETURN(TerminalSize size, PtySize(*pty));
    out.pty = size;
  }
  // A terminal's input is always open (pty.sendInput); without one, as asked.
  ASSIGN_OR_RETURN(out.stdin_open, f.Bool("stdin", out.pty.has_value()));
  if (out.pty) out.stdin_open = true;
  return out;
}

StatusOr<int> ProcessPidFromJson(const json& body) {
  RETURN_IF_ERROR(CheckObject(body, "process request"));
  base::JsonFields f(body, "process request", StatusCode::kInvalidArgument);
  return SelectedPid(f);
}

StatusOr<ProcessInput> ProcessInputFromJson(const json& body) {
  RETURN_IF_ERROR(CheckObject(body, "input request"));
  base::JsonFields f(body, "input request", StatusCode::kInvalidArgument);
  ProcessInput out;
  ASSIGN_OR_RETURN(out.pid, SelectedPid(f));
  ASSIGN_OR_RETURN(const json* input, Object(f, "input", true));
  base::JsonFields i(*input, "input request: input", StatusCode::kInvalidArgument);
  const char* key = i.Find("pty") != nullptr ? "pty" : "stdin";
  ASSIGN_OR_RETURN(std::string text, i.String(key));
  ASSIGN_OR_RETURN(out.bytes, base::DecodeBase64(text, kMaxInputBytes));
  return out;
}

StatusOr<ProcessSignal> ProcessSignalFromJson(const json& body) {
  RETURN_IF_ERROR(CheckObject(body, "signal request"));
  base::JsonFields f(body, "signal request", StatusCode::kInvalidArgument);
  ProcessSignal out;
  ASSIGN_OR_RETURN(out.pid, SelectedPid(f));
  const json* signal = f.Find("signal");
  if (signal == nullptr) return f.Missing("signal");
  if (*signal == "SIGNAL_SIGKILL" || *signal == 9) {
    out.signal = 9;
  } else if (*signal == "SIGNAL_SIGTERM" || *signal == 15) {
    out.signal = 15;
  } else {
    return f.Fault("signal", "is not SIGNAL_SIGKILL or SIGNAL_SIGTERM");
  }
  return out;
}

StatusOr<ProcessUpdate> ProcessUpdateFromJson(const json& body) {
  RETURN_IF_ERROR(CheckObject(body, "update request"));
  base::JsonFields f(body, "update request", StatusCode::kInvalidArgument);
  ProcessUpdate out;
  ASSIGN_OR_RETURN(out.pid, SelectedPid(f));
  ASSIGN_OR_RETURN(const json* pty, Object(f, "pty", false));
  if (pty != nullptr) {
    ASSIGN_OR_RETURN(TerminalSize size, PtySize(*pty));
    out.size = size;
  }
  return out;
}

std::string StartEventJson(int pid) {
  return base::JsonText(json{{"event", {{"start", {{"pid", pid}}}}}});
}

std::string DataEventJson(DataStream stream, std::string_view bytes) {
  const char* name = stream == DataStream::kStdout   ? "stdout"
                     : stream == DataStream::kStderr ? "stderr"
                                                     : "pty";
  return base::JsonText(json{{"event", {{"data", {{name, base::EncodeBase64(bytes)}}}}}});
}

std::string EndEventJson(const ExecResult& r) {
  json end;
  if (r.signal != 0) {
    end = {
        {"exitCode", -1},
        {"exited", false},
        {"status", "signal: " + std::string(r.signal == 9 ? "killed"
                                                          : "signal " + std::to_string(r.signal))}};
  } else {
    end = {{"exitCode", r.exit_code},
           {"exited", true},
           {"status", "exit status " + std::to_string(r.exit_code)}};
  }
  std::string error;
  if (r.timed_out) {
    error = "the command passed its timeout and was killed";
  } else if (r.out_of_memory) {
    error = "the command ran out of memory and was killed";
  } else if (r.signal != 0 || r.exit_code != 0) {
    error = end["status"].get<std::string>();
  }
  if (!error.empty()) end["error"] = error;
  return base::JsonText(json{{"event", {{"end", end}}}});
}

std::string KeepaliveEventJson() {
  return base::JsonText(json{{"event", {{"keepalive", json::object()}}}});
}

json ProcessListToJson(const std::vector<ProcessInfo>& processes) {
  json list = json::array();
  for (const ProcessInfo& p : processes) {
    if (!p.running || p.argv.empty()) continue;
    json args = json::array();
    for (size_t i = 1; i < p.argv.size(); ++i) args.push_back(p.argv[i]);
    list.push_back({{"pid", p.pid},
                    {"config", {{"cmd", p.argv[0]}, {"args", args}, {"envs", json::object()}}}});
  }
  return {{"processes", list}};
}

StatusOr<std::string> UserFromAuthorization(std::string_view header) {
  if (header.empty()) return std::string();
  constexpr std::string_view kScheme = "Basic ";
  const auto invalid = [] {
    return InvalidArgument("the Authorization header names no user: send 'Basic base64(<user>:)'");
  };
  if (header.size() > 256 || !header.starts_with(kScheme)) return invalid();
  auto decoded = base::DecodeBase64(header.substr(kScheme.size()), 128);
  if (!decoded.ok()) return invalid();
  std::string user = decoded->substr(0, decoded->find(':'));  // the password part is empty
  if (!base::IsUserName(user)) {
    return InvalidArgument("the Authorization header's user '" + base::Excerpt(user) +
                           "' is not a user name");
  }
  return user;
}

}  // namespace codebox::e2b
