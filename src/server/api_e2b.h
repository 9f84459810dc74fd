// E2B's face of the API (docs/e2b.md): what api.cc routes to it, and what its two files
// (api_e2b.cc: the control plane; api_e2b_envd.cc: the in-sandbox routes) share.
#ifndef CODEBOX_SERVER_API_E2B_H_
#define CODEBOX_SERVER_API_E2B_H_

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "codebox/box.h"
#include "codebox/status.h"
#include "e2b/connect.h"
#include "http/server.h"
#include "server/api_internal.h"

namespace codebox::server {

// An in-sandbox request (envd, the code interpreter): it names its sandbox in E2b-Sandbox-Id
// and carries that sandbox's access token instead of a server token; or a pre-signed /files
// URL, which carries a signature made with that token instead.
bool IsE2bSandboxRequest(const http::Request& request);
// GET or POST /files?...&signature=... without E2b-Sandbox-Id (the SDKs' downloadUrl and
// uploadUrl, fetched by anything: a browser, curl).
bool IsSignedFilesRequest(const http::Request& request);
// Any request of E2B's face: an in-sandbox one, or a control-plane path (/v2/..., /sandboxes,
// /snapshots, /templates, /volumes, /secrets), none of which /v1 routes use.
bool IsE2bRequest(const http::Request& request);

// Answers an E2B request (api.cc routes every IsE2bRequest here).
void E2bRoute(Call& call);
// The in-sandbox routes (api_e2b_envd.cc): checks the sandbox's access token, then serves.
void E2bSandboxRoute(Call& call);
// envd's services in `box`, the call's sandbox: process.Process (api_e2b_process.cc);
// filesystem.Filesystem and REST /files (api_e2b_files.cc). `method` is the Connect method.
void ProcessService(Call& call, Box& box, std::string_view method);
void FilesystemService(Call& call, Box& box, std::string_view method);
void FilesRoute(Call& call, Box& box, const E2bSandbox& sandbox);
// The code interpreter (port 49999: /execute, /contexts) in the call's sandbox
// (api_e2b_code.cc).
void CodeInterpreter(Call& call, Box& box, const E2bSandbox& sandbox);

// Where a sandbox's code lives: its working directory and home, as E2B's templates have it.
inline constexpr std::string_view kE2bHome = "/home/user";

// Connect's unary answers (api_e2b_envd.cc): a message (200, application/json), or an error
// ({"code": "<name>", "message"} with the code's HTTP status). The SDK raises by the code:
// not_found is its FileNotFoundError, invalid_argument its InvalidArgumentError.
void RespondConnect(Call& call, const nlohmann::json& message);
void RespondConnectError(Call& call, e2b::connect::Code code, std::string_view message);
void RespondConnectError(Call& call, const Status& status);
// A streaming call's error before its first message: 200 and the end-of-stream envelope that
// carries it (a client of a stream reads errors only there).
void RespondStreamError(Call& call, const Status& status);
// The request message of a unary call (the body) or a streaming one (its one envelope),
// bounded and parsed.
StatusOr<nlohmann::json> ConnectMessage(const http::Request& request, bool streaming);

// Connect-Timeout-Ms: how long a streaming call may run (a process's lifetime, as envd
// has it; a watch's), at most the server's exec ceiling (a client never sets its own).
// nullopt when absent; kInvalidArgument when not a number of ms.
StatusOr<std::optional<std::chrono::milliseconds>> ConnectTimeout(const Call& call);

// A server stream's answer: 200 and envelopes; the start event first (what the box writes
// before it is held back), the end-of-stream envelope last. Send is called from the box's
// threads; the first failed write makes the rest no-ops.
class ConnectStream {
 public:
  explicit ConnectStream(http::Exchange& exchange) : exchange_(exchange) {}
  Status Open();
  void Start(const std::string& start_event);
  void Send(const std::string& event);
  void End(const Status& status);
  bool failed() const { return failed_.load(); }

 private:
  void Write(const std::string& bytes);

  http::Exchange& exchange_;
  std::mutex mu_;
  std::string held_;  // events before the start event: at most what the box wrote meanwhile
  bool started_ = false;
  std::atomic<bool> failed_{false};
};

// A control-plane or envd REST error: the HTTP status of `status` with E2B's body
// {"code": <that status>, "message"}; RespondE2bStatus with a status of the caller's choice
// (501: not supported; 502: the sandbox is gone; 401: a wrong access token).
void RespondE2bError(Call& call, const Status& status);
void RespondE2bStatus(Call& call, int http_status, const Status& status);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_E2B_H_
