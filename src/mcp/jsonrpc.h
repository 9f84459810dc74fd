// JSON-RPC 2.0 as MCP uses it: the error codes, answers, and what kind of message one is.
// ParseMessage and IsRequest (session.h) are defined in jsonrpc.cc.
#ifndef CODEBOX_MCP_JSONRPC_H_
#define CODEBOX_MCP_JSONRPC_H_

#include <nlohmann/json.hpp>
#include <string>

namespace codebox::mcp {

inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message}}; id null when unknown.
nlohmann::json ErrorAnswer(const nlohmann::json& id, int code, const std::string& message);
nlohmann::json ResultAnswer(const nlohmann::json& id, nlohmann::json result);

// A request id MCP allows: a string or an integer (never null, never fractional).
bool IsValidId(const nlohmann::json& id);

// One line of JSON text for a transport. Never throws: text that is not valid UTF-8 (there
// should be none; everything from a box is made safe first) is replaced, not an exception.
std::string Serialize(const nlohmann::json& message);

}  // namespace codebox::mcp

#endif  // CODEBOX_MCP_JSONRPC_H_
