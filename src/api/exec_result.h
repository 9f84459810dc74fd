// An exec's result as JSON: the one shape every face prints and reads (the HTTP API's exec,
// python, run, packages and a process's end; `codebox run|exec --json`'s "result"; the remote
// client). Output is exact: text that is UTF-8 goes as it is, anything else as base64, said by
// "stdout_encoding" / "stderr_encoding".
#ifndef CODEBOX_API_EXEC_RESULT_H_
#define CODEBOX_API_EXEC_RESULT_H_

#include <nlohmann/json.hpp>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::api {

// {"exit_code", "signal", "stdout", "stdout_encoding", "stderr", "stderr_encoding",
//  "timed_out", "out_of_memory", "output_truncated", "duration_ms", "driver"}, and
// "dropped_stdout" / "dropped_stderr" when an attacher missed bytes.
nlohmann::json ExecResultToJson(const ExecResult& result);

// The checked decoder of ExecResultToJson's shape (kProtocolError naming the field; a field
// that came from a box, such as the driver, is made terminal-safe). "signal", "duration_ms",
// "driver", the encodings and the dropped counts may be absent.
StatusOr<ExecResult> ExecResultFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_EXEC_RESULT_H_
