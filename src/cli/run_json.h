// `codebox run|exec --json`: one JSON object on stdout, the interface scripts read
// (docs/cli.md has its schema). Its "exit_code" is always the status the process exits with.
#ifndef CODEBOX_CLI_RUN_JSON_H_
#define CODEBOX_CLI_RUN_JSON_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

// The version of the objects `--json` prints; raised when a field changes meaning or goes.
inline constexpr int kJsonVersion = 1;

// An object with "version" and "exit_code" (the process's exit status), and "error" (null,
// or {"message": why codebox failed}).
nlohmann::json JsonOutcome(int exit_status, const Status& error);

// The program's result: "program_exit_code" (its own; -1 when a signal ended it), "signal",
// "stdout"/"stderr" with "stdout_encoding"/"stderr_encoding" ("utf-8", or "base64" for bytes
// that are not UTF-8), "timed_out", "out_of_memory", "output_truncated", "duration_ms",
// "driver".
void AddExecJson(const ExecResult& result, nlohmann::json* out);

// "utf-8" text as it is, anything else base64: the pair of fields for one output stream.
void AddOutputJson(std::string_view name, std::string_view bytes, nlohmann::json* out);

// Serializes straight to stdout, indented, with a newline.
void PrintJson(const nlohmann::json& j);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_RUN_JSON_H_
