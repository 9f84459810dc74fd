// The run_python tool as the model sees it: its schema, its arguments, and the result that
// goes back, capped so that one chatty cell cannot fill the model's context.
#ifndef CODEBOX_LLM_TOOLS_H_
#define CODEBOX_LLM_TOOLS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codebox/execution.h"
#include "codebox/status.h"
#include "llm/chat.h"

namespace codebox::llm {

inline constexpr char kRunPythonTool[] = "run_python";

ToolSpec RunPythonToolSpec();

// JSON a model wrote (tool arguments, calls written into its text), bounded like all JSON from
// outside; raw line breaks and tabs inside strings, which small models leave in their code,
// are read as if escaped. A discarded value when it is not JSON.
nlohmann::json ParseModelJson(std::string_view text);

// The "code" of run_python arguments ({"code": "..."}). kInvalidArgument, with a message
// written for the model (what was wrong, what the arguments must look like), otherwise.
StatusOr<std::string> ParseRunPythonArguments(std::string_view arguments);

// s itself when it fits in limit bytes, else its head and tail with a marker saying how many
// bytes were left out between them.
std::string CapText(std::string_view s, size_t limit);

// The chunks of a stream as one text.
std::string JoinChunks(const std::vector<std::string>& chunks);

// The tool result for the model, from one cell: JSON {stdout, stderr, result (the main
// result's text/plain, or null), error ({name, value, traceback} or null), timed_out,
// kernel_restarted, output_truncated[, outputs (text/plain of the other results that are not
// images), images (one line per image, as the host saved it), out_of_memory]}. Each text is
// capped to cap_bytes (head and tail), and so is the list of outputs as a whole.
std::string ToolResultJson(const Execution& cell, const std::vector<std::string>& image_lines,
                           size_t cap_bytes);

// The tool result for a call that could not run (bad arguments, unknown tool):
// JSON {"error": message}.
std::string ToolErrorJson(std::string_view message);

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_TOOLS_H_
