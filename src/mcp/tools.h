// The six tools of a codebox MCP session: their definitions for tools/list (name, description,
// inputSchema, annotations), the check of a call's arguments against the inputSchema, and
// running one in a box. Results are MCP content: text blocks and checked PNG/JPEG images.
#ifndef CODEBOX_MCP_TOOLS_H_
#define CODEBOX_MCP_TOOLS_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "codebox/box.h"
#include "mcp/session.h"

namespace codebox::mcp {

// tools/list's "tools": run_python, run_command, write_file, read_file, list_files, reset.
const nlohmann::json& ToolDefinitions();
bool IsKnownTool(std::string_view name);

// "" when `arguments` (an object) fit the tool's inputSchema; else what is wrong, naming the
// argument ("missing required argument 'code' ...", "argument 'timeout' must be ...").
std::string CheckArguments(std::string_view tool, const nlohmann::json& arguments);

// A CallToolResult being built: content blocks in order, and whether the call failed.
struct ToolResult {
  nlohmann::json content = nlohmann::json::array();
  bool is_error = false;

  void Text(std::string text);
  void Image(std::string base64, std::string mime_type);
  nlohmann::json ToJson() const;  // {"content": [...], "isError": bool}
};

// A failed call: one text block saying what happened, isError true.
ToolResult ErrorResult(std::string text);

// `timeout` (seconds, > 0) as milliseconds, at least 1 ms and at most max_timeout; nullopt
// when the call has none (the box's exec_timeout applies).
std::optional<std::chrono::milliseconds> ToolTimeout(const nlohmann::json& arguments,
                                                     const SessionOptions& options);

// Runs a checked call of a tool that needs a box (all but reset) in `box`. `cancel` is the
// call's own: StopTool cancels it.
ToolResult RunTool(Box& box, std::string_view tool, const nlohmann::json& arguments,
                   const SessionOptions& options, std::shared_ptr<ExecCancel> cancel);

// Stops a call of `tool` running in `box` from another thread (notifications/cancelled):
// run_python's cell is interrupted (KeyboardInterrupt, state kept); run_command's process
// tree is killed through `cancel`, the one RunTool was given (also when the exec has not
// started yet: it is then killed as it starts). Other tools end on their own soon.
Status StopTool(Box& box, std::string_view tool, ExecCancel& cancel);

}  // namespace codebox::mcp

#endif  // CODEBOX_MCP_TOOLS_H_
