#include "mcp/jsonrpc.h"

#include "base/json.h"

#include "mcp/session.h"

namespace codebox::mcp {

nlohmann::json ErrorAnswer(const nlohmann::json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"},
          {"id", IsValidId(id) ? id : nlohmann::json(nullptr)},
          {"error", {{"code", code}, {"message", message}}}};
}

nlohmann::json ResultAnswer(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

bool IsValidId(const nlohmann::json& id) {
  // A string id is echoed in every answer and kept while its request runs: a client gets a
  // long one, not an unbounded one.
  constexpr size_t kMaxIdBytes = 256;
  return (id.is_string() && id.get_ref<const std::string&>().size() <= kMaxIdBytes) ||
         id.is_number_integer();  // is_number_integer covers unsigned too
}

std::string Serialize(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ParsedMessage ParseMessage(std::string_view text) {
  ParsedMessage parsed;
  // No exceptions: a hostile or broken client's text is an answer, not a crash. The parser
  // rejects invalid UTF-8 in strings, so every string in a message is valid UTF-8.
  // Nesting is bounded: an id or a param nested 200,000 deep must not reach a dump().
  StatusOr<nlohmann::json> json = base::ParseJson(text, {.max_bytes = text.size()}, "the message");
  nlohmann::json message = json.ok() ? std::move(*json) : nlohmann::json();
  if (!json.ok()) {
    parsed.error_answer =
        ErrorAnswer(nullptr, kParseError,
                    "Parse error: " + json.status().message() +
                        " (send one JSON-RPC 2.0 object per message)");
  } else if (message.is_array()) {
    parsed.error_answer = ErrorAnswer(nullptr, kInvalidRequest,
                                      "Invalid Request: JSON-RPC batches are not part of MCP "
                                      "since 2025-06-18; send one message at a time");
  } else if (!message.is_object()) {
    parsed.error_answer = ErrorAnswer(nullptr, kInvalidRequest,
                                      "Invalid Request: a JSON-RPC message is a JSON object");
  } else {
    parsed.message = std::move(message);
  }
  return parsed;
}

bool IsRequest(const nlohmann::json& message, std::string_view method) {
  if (!message.is_object()) return false;
  auto m = message.find("method");
  auto id = message.find("id");
  return m != message.end() && m->is_string() && m->get_ref<const std::string&>() == method &&
         id != message.end() && IsValidId(*id);
}

}  // namespace codebox::mcp
