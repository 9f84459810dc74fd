// The code interpreter's messages (E2B's /execute and /contexts on port 49999, issue 35): the
// requests of runCode and createCodeContext, decoded with checked types and bounds, and the
// newline-delimited JSON lines an execution streams back (stdout, stderr, result, error,
// number_of_executions, end_of_execution), each one whole line.
#ifndef CODEBOX_E2B_CODE_H_
#define CODEBOX_E2B_CODE_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "codebox/execution.h"
#include "codebox/status.h"

namespace codebox::e2b {

inline constexpr size_t kMaxCodeBytes = 16u << 20;
inline constexpr size_t kMaxContextIdBytes = 128;

// "python", "bash", "javascript", ... from what a client names: lower-cased and trimmed, "js"
// as "javascript", "ts" as "typescript"; "" stays "" (the default, python).
std::string NormalizeLanguage(std::string_view language);

// POST /execute: {"code", "context_id"?, "language"?, "env_vars"?}. A context and a language
// together are refused (kInvalidArgument), as E2B's server refuses them.
struct ExecuteRequest {
  std::string code;
  std::string context_id;  // "" when not given
  std::string language;    // normalized; "" when not given
  std::map<std::string, std::string> env_vars;
};
StatusOr<ExecuteRequest> ExecuteRequestFromJson(const nlohmann::json& body);

// POST /contexts: {"language"?, "cwd"?}.
struct ContextRequest {
  std::string language = "python";
  std::string cwd;  // "" when not given
};
StatusOr<ContextRequest> ContextRequestFromJson(const nlohmann::json& body);

// {"id", "language", "cwd"}: a context as /contexts answers it.
nlohmann::json ContextToJson(std::string_view id, std::string_view language, std::string_view cwd);

// The lines of an execution, each ending in "\n". `timestamp` is RFC 3339.
std::string StdoutLine(std::string_view text, std::string_view timestamp);
std::string StderrLine(std::string_view text, std::string_view timestamp);
// {"type": "result", "text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json"
// (an object), "javascript", "is_main_result"}: the formats the result has, by E2B's names.
std::string ResultLine(const CellResult& result);
std::string ErrorLine(const CellError& error);
std::string ExecutionCountLine(int64_t count);
std::string EndOfExecutionLine();

}  // namespace codebox::e2b

#endif  // CODEBOX_E2B_CODE_H_
