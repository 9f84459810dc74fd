// The run_python tool as the model sees it: its schema, its arguments, and the result that
// goes back, capped so that one chatty program cannot fill the model's context.
#ifndef CODEBOX_LLM_TOOLS_H_
#define CODEBOX_LLM_TOOLS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "codebox/options.h"
#include "codebox/status.h"
#include "llm/chat.h"

namespace codebox::llm {

inline constexpr char kRunPythonTool[] = "run_python";

ToolSpec RunPythonToolSpec();

// The "code" of run_python arguments ({"code": "..."}). kInvalidArgument, with a message
// written for the model (what was wrong, what the arguments must look like), otherwise.
StatusOr<std::string> ParseRunPythonArguments(std::string_view arguments);

// s itself when it fits in limit bytes, else its head and tail with a marker saying how many
// bytes were left out between them.
std::string CapText(std::string_view s, size_t limit);

// The tool result for the model: JSON {stdout, stderr, exit_code, timed_out,
// output_truncated[, out_of_memory, signal]}, each stream capped to cap_bytes.
std::string ToolResultJson(const ExecResult& result, size_t cap_bytes);

// The tool result for a call that could not run (bad arguments, unknown tool):
// JSON {"error": message}.
std::string ToolErrorJson(std::string_view message);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_TOOLS_H_
