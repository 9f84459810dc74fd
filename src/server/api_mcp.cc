// The MCP Streamable HTTP transport at /mcp (docs/mcp.md; the MCP specification, revision
// 2025-11-25, "Transports"): one JSON-RPC message per POST, answered with application/json;
// an initialize makes a session and answers its Mcp-Session-Id, which every later request
// carries; notifications and responses get 202; DELETE ends the session. There is no
// server-initiated stream: GET /mcp answers 405 (api.cc's table has no GET route for it).
#include <algorithm>
#include <string>
#include <string_view>

#include "base/json.h"
#include "base/text.h"
#include "mcp/jsonrpc.h"
#include "mcp/session.h"
#include "server/api_internal.h"
#include "server/mcp_sessions.h"

namespace codebox::server {
namespace {

using nlohmann::json;

constexpr int kServerError = -32000;  // JSON-RPC "server error": the transport refused it

// A JSON-RPC error answer, as the HTTP error's body (the spec allows one; the SDK shows it).
void RespondRpcError(Call& call, int status, const json& id, const Status& why) {
  call.NoteError(why);
  http::Response response;
  response.status = status;
  response.body = base::JsonText({{"jsonrpc", "2.0"},
                                  {"id", id},
                                  {"error", {{"code", kServerError}, {"message", why.message()}}}});
  if (status == 429) response.headers.emplace_back("Retry-After", "1");
  (void)call.exchange.Respond(std::move(response));
}

void RespondMessage(Call& call, const json& answer, const std::string& session_id) {
  http::Response response;
  response.body = base::JsonText(answer);
  if (!session_id.empty()) response.headers.emplace_back("Mcp-Session-Id", session_id);
  (void)call.exchange.Respond(std::move(response));
}

void RespondAccepted(Call& call) {
  http::Response response;
  response.status = 202;
  response.content_type.clear();
  (void)call.exchange.Respond(std::move(response));
}

// The media type before any parameters, lower-cased: "application/json; charset=utf-8" ->
// "application/json".
std::string MediaType(std::string_view value) {
  std::string_view type = value.substr(0, value.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  return base::AsciiLower(type);
}

// Whether an Accept header lets us answer application/json (absent: anything goes).
bool AcceptsJson(std::string_view accept) {
  if (accept.empty()) return true;
  std::string all = base::AsciiLower(accept);
  return all.find("application/json") != std::string::npos ||
         all.find("application/*") != std::string::npos || all.find("*/*") != std::string::npos;
}

bool SupportedVersion(std::string_view version) {
  return std::any_of(std::begin(mcp::kSupportedProtocolVersions),
                     std::end(mcp::kSupportedProtocolVersions),
                     [&](const char* v) { return version == v; });
}

McpSessions& Sessions(Call& call) { return *call.context.mcp; }

// initialize: a new session; its id goes back only when the handshake succeeded.
void Initialize(Call& call, const json& message) {
  // A full or busy node lets a peer hold the session (and the box its tools will make).
  if (PlaceOnPeer(call, DriverKind::kAuto)) return;
  auto use = Sessions(call).Open(call.Owner());
  if (!use.ok()) {
    return RespondRpcError(call, 429, message["id"], use.status());
  }
  std::optional<json> answer = use->session().Handle(message);
  if (!use->session().initialized()) {
    (void)Sessions(call).End(use->id());
    if (!answer) return RespondAccepted(call);
    return RespondMessage(call, *answer, "");
  }
  Sessions(call).Keep(*use);
  RespondMessage(call, answer.value_or(json::object()), use->id());
}

}  // namespace

void McpPost(Call& call) {
  if (RouteToSessionNode(call)) return;  // a session of another node (docs/scale-out.md)
  const http::Request& request = call.request;
  // JSON only: a browser form (text/plain, urlencoded) cannot post here without a preflight.
  std::string type = MediaType(request.Header("content-type"));
  if (type != "application/json") {
    return RespondRpcError(call, 415, nullptr,
                           InvalidArgument("POST /mcp takes one JSON-RPC message as Content-Type: "
                                           "application/json, not '" +
                                           base::Excerpt(type) + "'"));
  }
  if (!AcceptsJson(request.Header("accept"))) {
    return RespondRpcError(
        call, 406, nullptr,
        InvalidArgument("this server answers /mcp with application/json; the Accept header "
                        "must allow it (send Accept: application/json, text/event-stream)"));
  }
  mcp::ParsedMessage parsed = mcp::ParseMessage(request.body);
  if (!parsed.message) {
    call.NoteError(InvalidArgument("not a JSON-RPC message"));
    http::Response response;
    response.status = 400;
    response.body = base::JsonText(*parsed.error_answer);
    (void)call.exchange.Respond(std::move(response));
    return;
  }
  const json& message = *parsed.message;
  // Echoed in the answers below only when it is an id JSON-RPC allows (a string of at most 256
  // bytes, or an integer): a client's 60 MB "id" is not sent back.
  const json id = message.contains("id") && mcp::IsValidId(message["id"]) ? message["id"]
                                                                          : json(nullptr);
  if (message.contains("id") && !message["id"].is_null() && !mcp::IsValidId(message["id"])) {
    call.NoteError(InvalidArgument("an invalid JSON-RPC id"));
    http::Response response;
    response.status = 400;
    response.body = base::JsonText(
        mcp::ErrorAnswer(nullptr, mcp::kInvalidRequest,
                         "Invalid Request: an id is a string of at most 256 bytes or an integer"));
    (void)call.exchange.Respond(std::move(response));
    return;
  }
  if (mcp::IsRequest(message, "initialize")) return Initialize(call, message);

  const std::string& session_id = request.Header("mcp-session-id");
  if (session_id.empty()) {
    return RespondRpcError(
        call, 400, id,
        InvalidArgument("no Mcp-Session-Id header: send initialize first, then its "
                        "Mcp-Session-Id with every request"));
  }
  auto use = Sessions(call).Find(session_id, call.caller);
  if (!use.ok()) return RespondRpcError(call, 404, id, use.status());
  // The spec: a version we do not support is 400; the client sends the one negotiated.
  const std::string& version = request.Header("mcp-protocol-version");
  const std::string negotiated = use->session().protocol_version();
  if (!version.empty() && (!SupportedVersion(version) || version != negotiated)) {
    return RespondRpcError(call, 400, id,
                           InvalidArgument("MCP-Protocol-Version " + base::Excerpt(version) +
                                           " is not this session's (" + negotiated + ")"));
  }
  std::optional<json> answer = use->session().Handle(message);
  if (!answer) return RespondAccepted(call);  // a notification or a response, or cancelled
  RespondMessage(call, *answer, "");
}

void McpDelete(Call& call) {
  if (RouteToSessionNode(call)) return;
  const std::string& session_id = call.request.Header("mcp-session-id");
  if (session_id.empty()) {
    return RespondRpcError(
        call, 400, nullptr,
        InvalidArgument("DELETE /mcp ends the session named by the Mcp-Session-Id header; "
                        "it is missing"));
  }
  Status st = Sessions(call).End(session_id, call.caller);
  if (!st.ok()) return RespondRpcError(call, 404, nullptr, st);
  call.RespondNoContent();
}

}  // namespace codebox::server
