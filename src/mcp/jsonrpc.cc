#include "mcp/jsonrpc.h"

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
  return id.is_string() || id.is_number_integer();  // is_number_integer covers unsigned too
}

std::string Serialize(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ParsedMessage ParseMessage(std::string_view text) {
  ParsedMessage parsed;
  // No exceptions: a hostile or broken client's text is an answer, not a crash. The parser
  // rejects invalid UTF-8 in strings, so every string in a message is valid UTF-8.
  nlohmann::json message = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    parsed.error_answer = ErrorAnswer(nullptr, kParseError,
                                      "Parse error: the message is not valid JSON (send one "
                                      "JSON-RPC 2.0 object per message)");
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
