// One MCP session: the lifecycle (initialize, version negotiation), dispatch of requests and
// notifications, JSON-RPC errors, and the box the tools run in (session.h has the contract).
#include "mcp/session.h"

#include <map>
#include <mutex>

#include "base/json.h"
#include "base/log.h"
#include "base/text.h"
#include "mcp/jsonrpc.h"
#include "mcp/tools.h"

namespace codebox::mcp {
namespace {

using nlohmann::json;

// Since this revision, a tool's input validation errors are tool execution errors (a result
// with isError, which the model sees) instead of -32602 (SEP-1303, the 2025-11-25 changelog).
constexpr std::string_view kArgumentErrorsAsResults = "2025-11-25";

constexpr const char* kInstructions =
    "Each tool runs in one isolated box that belongs to this session (no network). run_python "
    "runs cells of one stateful IPython session; run_command runs programs; write_file, "
    "read_file and list_files reach the box's files (relative paths are under the workdir); "
    "reset gives a fresh box.";

}  // namespace

struct Session::State {
  SessionOptions options;
  std::unique_ptr<BoxSource> boxes;

  // A tools/call being answered: cancelled says its answer is not wanted; running is the box
  // while a run_python or run_command runs in it, so that a cancel can stop it (StopTool,
  // with the call's own exec cancel).
  struct InFlight {
    bool cancelled = false;
    std::string tool;
    std::shared_ptr<Box> running;
    std::shared_ptr<ExecCancel> cancel = std::make_shared<ExecCancel>();
  };

  mutable std::mutex mu;  // guards the fields below
  bool initialized = false;
  std::string version;
  std::shared_ptr<Box> box;
  std::map<std::string, InFlight> in_flight;  // by the id's JSON text ("1" and "\"1\"" differ)

  std::mutex tool_mu;  // one tool call at a time on the box

  std::optional<json> Dispatch(const json& message);
  json Initialize(const json& id, const json& params);
  std::optional<json> CallTool(const json& id, const json& params);
  ToolResult RunInBox(const std::string& key, const std::string& tool, const json& args);
  void Cancel(const json& params);
  void CloseBox();
};

Session::Session(SessionOptions options, std::unique_ptr<BoxSource> boxes)
    : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->boxes = std::move(boxes);
}

Session::~Session() { state_->CloseBox(); }

bool Session::initialized() const {
  std::lock_guard lock(state_->mu);
  return state_->initialized;
}

std::string Session::protocol_version() const {
  std::lock_guard lock(state_->mu);
  return state_->version;
}

std::optional<json> Session::Handle(const json& message) {
  try {
    return state_->Dispatch(message);
  } catch (const std::exception& e) {
    // Nothing above should throw; if it does, the client gets an answer and the server goes on.
    CODEBOX_LOG(kError, "mcp: internal error handling a message: " << e.what());
    const json* id = message.is_object() && message.contains("id") ? &message["id"] : nullptr;
    if (id == nullptr) return std::nullopt;
    return ErrorAnswer(*id, kInternalError, "Internal error: " + base::TerminalSafe(e.what()));
  }
}

std::optional<json> Session::State::Dispatch(const json& message) {
  if (!message.is_object()) {
    return ErrorAnswer(nullptr, kInvalidRequest, "Invalid Request: a message is a JSON object");
  }
  const json null_id;
  auto id_it = message.find("id");
  const json& id = id_it == message.end() ? null_id : *id_it;
  auto version = message.find("jsonrpc");
  if (version == message.end() || *version != "2.0") {
    return ErrorAnswer(id, kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
  }
  auto method_it = message.find("method");
  if (method_it == message.end()) {
    // A response from the client (we send no requests, so there is nothing to match it to).
    if (id_it != message.end() && (message.contains("result") || message.contains("error"))) {
      return std::nullopt;
    }
    return ErrorAnswer(id, kInvalidRequest,
                       "Invalid Request: a message needs \"method\" (a request or "
                       "notification) or \"result\"/\"error\" (a response)");
  }
  if (!method_it->is_string()) {
    return ErrorAnswer(id, kInvalidRequest, "Invalid Request: \"method\" must be a string");
  }
  const std::string& method = method_it->get_ref<const std::string&>();
  auto params_it = message.find("params");
  const json empty = json::object();
  const json& params = params_it == message.end() ? empty : *params_it;

  if (id_it == message.end()) {  // a notification: never answered
    if (method == "notifications/cancelled" && params.is_object()) Cancel(params);
    return std::nullopt;
  }
  if (!IsValidId(id)) {
    return ErrorAnswer(nullptr, kInvalidRequest,
                       "Invalid Request: \"id\" must be a string or an integer");
  }
  if (!params.is_object()) {
    return ErrorAnswer(id, kInvalidParams, "Invalid params: \"params\" must be an object");
  }
  if (method == "initialize") return Initialize(id, params);
  if (method == "ping") return ResultAnswer(id, json::object());
  const bool known = method == "tools/list" || method == "tools/call";
  if (!known) {
    return ErrorAnswer(
        id, kMethodNotFound,
        "Method not found: " + method + " (this server offers tools only: tools/list, tools/call)");
  }
  {
    std::lock_guard lock(mu);
    if (!initialized) {
      return ErrorAnswer(id, kInvalidRequest,
                         "Invalid Request: send initialize first (" + method +
                             " before the session is initialized)");
    }
  }
  if (method == "tools/list") return ResultAnswer(id, {{"tools", ToolDefinitions()}});
  return CallTool(id, params);
}

json Session::State::Initialize(const json& id, const json& params) {
  auto requested = params.find("protocolVersion");
  if (requested == params.end() || !requested->is_string()) {
    return ErrorAnswer(id, kInvalidParams,
                       "Invalid params: initialize needs \"protocolVersion\" (a string)");
  }
  for (const char* field : {"capabilities", "clientInfo"}) {
    auto it = params.find(field);
    if (it == params.end() || !it->is_object()) {
      return ErrorAnswer(
          id, kInvalidParams,
          std::string("Invalid params: initialize needs \"") + field + "\" (an object)");
    }
  }
  std::lock_guard lock(mu);
  if (initialized) {
    return ErrorAnswer(id, kInvalidRequest,
                       "Invalid Request: this session is already initialized (version " + version +
                           "); start a new session to initialize again");
  }
  // The version asked for when we speak it, else our newest (the client then decides).
  version = kSupportedProtocolVersions[0];
  for (const char* supported : kSupportedProtocolVersions) {
    if (*requested == supported) version = supported;
  }
  initialized = true;
  return ResultAnswer(
      id,
      {{"protocolVersion", version},
       {"capabilities", {{"tools", {{"listChanged", false}}}}},
       {"serverInfo",
        {{"name", options.server_name}, {"title", "codebox"}, {"version", options.server_version}}},
       {"instructions", kInstructions}});
}

std::optional<json> Session::State::CallTool(const json& id, const json& params) {
  auto name_it = params.find("name");
  if (name_it == params.end() || !name_it->is_string()) {
    return ErrorAnswer(id, kInvalidParams,
                       "Invalid params: tools/call needs \"name\" (a string naming a tool)");
  }
  const std::string& name = name_it->get_ref<const std::string&>();
  const json empty = json::object();
  auto args_it = params.find("arguments");
  const json& args = args_it == params.end() ? empty : *args_it;
  if (!args.is_object()) {
    return ErrorAnswer(id, kInvalidParams,
                       "Invalid params: \"arguments\" of tools/call must be an object");
  }
  if (!IsKnownTool(name)) {
    std::string names;
    for (const json& tool : ToolDefinitions()) {
      names += (names.empty() ? "" : ", ") + tool["name"].get<std::string>();
    }
    return ErrorAnswer(
        id, kInvalidParams,
        "Unknown tool: " + base::TerminalSafe(name, 200) + " (the tools: " + names + ")");
  }
  if (std::string problem = CheckArguments(name, args); !problem.empty()) {
    std::lock_guard lock(mu);
    if (version < kArgumentErrorsAsResults) {
      return ErrorAnswer(id, kInvalidParams, "Invalid params: " + problem);
    }
    return ResultAnswer(id, ErrorResult("Invalid arguments: " + problem).ToJson());
  }

  const std::string key = id.dump();
  {
    std::lock_guard lock(mu);
    if (!in_flight.emplace(key, InFlight{}).second) {
      return ErrorAnswer(id, kInvalidRequest,
                         "Invalid Request: a request with id " + base::Excerpt(key) +
                             " is still running");
    }
  }
  ToolResult result = RunInBox(key, name, args);
  std::lock_guard lock(mu);
  const bool cancelled = in_flight[key].cancelled;
  in_flight.erase(key);
  // The spec: no answer is sent for a cancelled request.
  if (cancelled) return std::nullopt;
  return ResultAnswer(id, result.ToJson());
}

ToolResult Session::State::RunInBox(const std::string& key, const std::string& tool,
                                    const json& args) {
  std::lock_guard tool_lock(tool_mu);
  std::shared_ptr<Box> current;
  {
    std::lock_guard lock(mu);
    if (in_flight[key].cancelled) return ErrorResult("cancelled");  // never sent
  }
  if (tool == "reset") {
    CloseBox();
    ToolResult result;
    result.Text(
        "reset: the box is destroyed with every variable and file; the next call starts a "
        "fresh one");
    return result;
  }
  {
    std::lock_guard lock(mu);
    current = box;
  }
  if (!current) {
    auto opened = boxes->Open();
    if (!opened.ok()) {
      return ErrorResult("could not start a box: " + base::TerminalSafe(opened.status().message()));
    }
    current = std::move(*opened);
    std::lock_guard lock(mu);
    box = current;
  }
  std::shared_ptr<ExecCancel> cancel;
  {
    std::lock_guard lock(mu);
    if (in_flight[key].cancelled) return ErrorResult("cancelled");
    in_flight[key].tool = tool;
    in_flight[key].running = current;
    cancel = in_flight[key].cancel;
  }
  return RunTool(*current, tool, args, options, std::move(cancel));
}

void Session::State::Cancel(const json& params) {
  auto id = params.find("requestId");
  if (id == params.end() || !IsValidId(*id)) return;
  std::shared_ptr<Box> running;
  std::shared_ptr<ExecCancel> cancel;
  std::string tool;
  {
    std::lock_guard lock(mu);
    auto it = in_flight.find(id->dump());
    if (it == in_flight.end()) return;  // done already, or never ours: the spec says ignore
    it->second.cancelled = true;
    running = it->second.running;
    cancel = it->second.cancel;
    tool = it->second.tool;
  }
  if (running) {
    if (Status s = StopTool(*running, tool, *cancel); !s.ok()) {
      CODEBOX_LOG(kWarn, "mcp: stopping a cancelled " << tool << ": " << s.message());
    }
  }
}

void Session::State::CloseBox() {
  std::shared_ptr<Box> old;
  {
    std::lock_guard lock(mu);
    old = std::move(box);
  }
  if (old) boxes->Close(std::move(old));
}

}  // namespace codebox::mcp
