// A box's process table as JSON (GET /v1/boxes/{id}/processes): the server's encoder and the
// clients' checked decoder. The table came out of a box: the decoder holds it to the bounds the
// host's agent client holds the agent to (256 entries, 8 arguments of 128 bytes each).
#ifndef CODEBOX_API_PROCESS_INFO_H_
#define CODEBOX_API_PROCESS_INFO_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codebox/process.h"
#include "codebox/status.h"

namespace codebox::api {

// {"pid", "argv", "tty", "background", "started_unix_ms", "state": "running"|"exited",
//  "exit_code", "signal" (null while it runs), "stdout_bytes", "stderr_bytes",
//  "dropped_stdout", "dropped_stderr"}, and once it ended "timed_out", "out_of_memory",
//  "duration_ms".
nlohmann::json ProcessInfoToJson(const ProcessInfo& process);
// {"processes": [...]}.
nlohmann::json ProcessListToJson(const std::vector<ProcessInfo>& processes);
StatusOr<std::vector<ProcessInfo>> ProcessListFromJson(const nlohmann::json& j);

// What POST /v1/boxes/{id}/processes answers at once: {"pid", "argv", "state": "running"}.
nlohmann::json ProcessStartedToJson(int pid, const std::vector<std::string>& argv);
// The pid, checked (1..2^22, as the agent's).
StatusOr<int> ProcessStartedFromJson(const nlohmann::json& j);

// A process's end (GET /v1/boxes/{id}/processes/{pid}/events, its answer or `done` event):
// ExecResultToJson's fields, "pid", and "dropped_stdout" / "dropped_stderr" always (bytes that
// fell out of the ring before this client saw them, 0 when none).
struct ProcessResult {
  int pid = 0;
  ExecResult result;
};
nlohmann::json ProcessResultToJson(int pid, const ExecResult& result);
// ExecResultFromJson and the pid, checked as ProcessStartedFromJson's.
StatusOr<ProcessResult> ProcessResultFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_PROCESS_INFO_H_
