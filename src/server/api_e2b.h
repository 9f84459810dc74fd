// E2B's face of the API (docs/e2b.md): what api.cc routes to it, and what its two files
// (api_e2b.cc: the control plane; api_e2b_envd.cc: the in-sandbox routes) share.
#ifndef CODEBOX_SERVER_API_E2B_H_
#define CODEBOX_SERVER_API_E2B_H_

#include "codebox/status.h"
#include "http/server.h"
#include "server/api_internal.h"

namespace codebox::server {

// An in-sandbox request (envd, the code interpreter): it names its sandbox in E2b-Sandbox-Id
// and carries that sandbox's access token instead of a server token.
bool IsE2bSandboxRequest(const http::Request& request);
// Any request of E2B's face: an in-sandbox one, or a control-plane path (/v2/..., /sandboxes,
// /snapshots, /templates, /volumes, /secrets), none of which /v1 routes use.
bool IsE2bRequest(const http::Request& request);

// Answers an E2B request (api.cc routes every IsE2bRequest here).
void E2bRoute(Call& call);
// The in-sandbox routes (api_e2b_envd.cc): checks the sandbox's access token, then serves.
void E2bSandboxRoute(Call& call);

// A control-plane or envd REST error: the HTTP status of `status` with E2B's body
// {"code": <that status>, "message"}.
void RespondE2bError(Call& call, const Status& status);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_E2B_H_
