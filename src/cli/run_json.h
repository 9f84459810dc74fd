// `codebox run|exec --json`: one JSON object on stdout, the interface scripts read
// (docs/cli.md has its schema). Its "exit_code" is always the status the process exits with.
#ifndef CODEBOX_CLI_RUN_JSON_H_
#define CODEBOX_CLI_RUN_JSON_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

// The versions of the objects `--json` prints; each is raised when a field changes meaning or
// goes. run/exec's 2 holds the program's result as the API's exec result ("result").
inline constexpr int kRunJsonVersion = 2;
inline constexpr int kAskJsonVersion = 1;

// An object with "version", "exit_code" (the process's exit status), and "error" (null, or
// {"message": why codebox failed}).
nlohmann::json JsonOutcome(int version, int exit_status, const Status& error);

// Serializes straight to stdout, indented, with a newline.
void PrintJson(const nlohmann::json& j);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_RUN_JSON_H_
