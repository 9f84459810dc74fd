// Who may drive the API from a browser: the Origin and Host checks every request passes before
// its route (docs/server.md, "Browsers"). A page on another site must not drive a server on
// loopback (its requests carry that site's Origin), and DNS rebinding (a name of the attacker's
// that resolves to 127.0.0.1) must not work (its requests carry the attacker's name as Host).
// The MCP specification requires Origin validation for Streamable HTTP (/mcp).
#ifndef CODEBOX_SERVER_API_ORIGIN_H_
#define CODEBOX_SERVER_API_ORIGIN_H_

#include <string>
#include <string_view>

#include "http/server.h"

namespace codebox::server {

// "" when `request` may go on; else why it is refused (answered 403):
// * an Origin header that is not this server's own origin, http://<Host> (or https://<Host>
//   behind a TLS proxy), compared without case; "null" is not an origin we serve;
// * when the server has no tokens (`tokens_required` false), a Host that is not loopback:
//   `localhost` or an IP literal (127.0.0.1, [::1], any address), with or without a port.
// Requests without these headers (the unix socket, curl, codebox's own clients) pass.
std::string RefusedOrigin(const http::Request& request, bool tokens_required);

// Whether `host` (a Host header: name or IP literal, optional ":port") is `localhost` or an IP
// literal.
bool IsLoopbackNameOrIpLiteral(std::string_view host);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_ORIGIN_H_
