// The messages of envd's process service (process.Process, issue 35) in Connect's JSON codec
// (proto3 JSON: camelCase names, bytes as base64, enums by name): the requests E2B's SDKs send
// to start, follow, feed, signal and resize a process, decoded with checked types and bounds,
// and the events and lists `codebox serve` answers with.
#ifndef CODEBOX_E2B_PROCESS_H_
#define CODEBOX_E2B_PROCESS_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/process.h"
#include "codebox/status.h"

namespace codebox::e2b {

// Bytes one SendInput may carry (decoded).
inline constexpr size_t kMaxInputBytes = 1u << 20;
// Arguments one Start may carry (each also within kMaxArgBytes).
inline constexpr size_t kMaxArgs = 4096;

// Start: {"process": {"cmd", "args", "envs", "cwd"}, "pty": {"size": {"cols", "rows"}},
// "tag", "stdin"}. `stdin` false (or absent without a pty): the process reads end of file.
struct ProcessStart {
  std::vector<std::string> argv;  // cmd, then args
  std::map<std::string, std::string> envs;
  std::string cwd;  // "" when not given
  std::optional<TerminalSize> pty;
  bool stdin_open = false;
};
StatusOr<ProcessStart> ProcessStartFromJson(const nlohmann::json& body);

// The pid of a {"process": {"pid": N}} selector (Connect, CloseStdin): 1..2^22. A selector by
// tag is refused (codebox's processes have none).
StatusOr<int> ProcessPidFromJson(const nlohmann::json& body);

// SendInput: {"process": {"pid"}, "input": {"stdin": base64} | {"pty": base64}}.
struct ProcessInput {
  int pid = 0;
  std::string bytes;
};
StatusOr<ProcessInput> ProcessInputFromJson(const nlohmann::json& body);

// SendSignal: {"process": {"pid"}, "signal": "SIGNAL_SIGKILL" | "SIGNAL_SIGTERM" | 9 | 15}.
struct ProcessSignal {
  int pid = 0;
  int signal = 0;  // 9 or 15
};
StatusOr<ProcessSignal> ProcessSignalFromJson(const nlohmann::json& body);

// Update: {"process": {"pid"}, "pty": {"size": {"cols", "rows"}}}; `size` nullopt when the
// request carries no pty.
struct ProcessUpdate {
  int pid = 0;
  std::optional<TerminalSize> size;
};
StatusOr<ProcessUpdate> ProcessUpdateFromJson(const nlohmann::json& body);

// The events of a Start or Connect stream, each the JSON of one envelope:
// {"event": {"start": {"pid"}}}, {"event": {"data": {"stdout" | "stderr" | "pty": base64}}},
// {"event": {"end": {"exitCode", "exited", "status", "error"}}}, {"event": {"keepalive": {}}}.
// Who an envd call (a process's or a file's) runs as: its header
// "Authorization: Basic base64(<user>:)" ("" for none: the sandbox's default user). A header
// that is not that, or a name that is not a user name, is kInvalidArgument; which users
// exist is the box's to say.
StatusOr<std::string> UserFromAuthorization(std::string_view header);

std::string StartEventJson(int pid);
enum class DataStream { kStdout, kStderr, kPty };
std::string DataEventJson(DataStream stream, std::string_view bytes);
// As envd says it: "exit status N", or "signal: killed" (exitCode -1, exited false) for a
// process a signal ended; `error` says it for any end but exit status 0.
std::string EndEventJson(const ExecResult& result);
std::string KeepaliveEventJson();

// List: {"processes": [{"pid", "config": {"cmd", "args", "envs": {}}}]}, the running ones.
nlohmann::json ProcessListToJson(const std::vector<ProcessInfo>& processes);

}  // namespace codebox::e2b

#endif  // CODEBOX_E2B_PROCESS_H_
