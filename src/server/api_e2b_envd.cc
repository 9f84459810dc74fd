// E2B's in-sandbox routes (docs/e2b.md): every request names its sandbox (E2b-Sandbox-Id) and
// carries that sandbox's own access token, checked here in constant time; then /health and
// envd's services (api_e2b_process.cc, api_e2b_files.cc), over Connect's JSON codec whose
// answers are made here.
#include <algorithm>
#include <chrono>

#include "base/json.h"
#include "base/text.h"
#include "e2b/connect.h"
#include "e2b/filesystem.h"
#include "server/api_e2b.h"

namespace codebox::server {

using nlohmann::json;
namespace connect = e2b::connect;

namespace {

// The largest request message a Connect call may carry (a SendInput's 1 MiB in base64, and
// room for its framing).
constexpr size_t kMaxMessageBytes = 2u << 20;

}  // namespace

void RespondConnect(Call& call, const json& message) {
  http::Response response;
  response.body = base::JsonText(message);
  (void)call.exchange.Respond(std::move(response));
}

void RespondConnectError(Call& call, connect::Code code, std::string_view message) {
  call.NoteError(Status(StatusCode::kInvalidArgument, std::string(message)));
  http::Response response;
  response.status = connect::HttpStatus(code);
  response.body = connect::ErrorJson(code, message);
  (void)call.exchange.Respond(std::move(response));
}

void RespondConnectError(Call& call, const Status& status) {
  RespondConnectError(call, connect::CodeFor(status.code()), status.message());
}

// The request message of a unary call (the body) or a streaming one (its one envelope).
StatusOr<json> ConnectMessage(const http::Request& request, bool streaming) {
  std::string_view text = request.body;
  if (streaming) {
    if (!connect::IsStreamContentType(request.Header("content-type"))) {
      return InvalidArgument("a streaming call's Content-Type must be application/connect+json");
    }
    ASSIGN_OR_RETURN(text, connect::SingleEnvelope(request.body, kMaxMessageBytes));
  } else if (text.size() > kMaxMessageBytes) {
    return InvalidArgument("the request message passes " + std::to_string(kMaxMessageBytes) +
                           " bytes");
  }
  json message = base::ParseJsonOrDiscarded(text);
  if (message.is_discarded()) return InvalidArgument("the request message is not JSON");
  return message;
}

StatusOr<std::optional<std::chrono::milliseconds>> ConnectTimeout(const Call& call) {
  const std::string& text = call.request.Header("connect-timeout-ms");
  if (text.empty()) return std::optional<std::chrono::milliseconds>();
  // Up to about 31 years: past any ceiling, and nothing overflows.
  const std::optional<uint64_t> ms = base::ParseDecimal(text, 1'000'000'000'000);
  if (!ms) return InvalidArgument("Connect-Timeout-Ms is not a number of milliseconds");
  if (*ms < 1) return InvalidArgument("Connect-Timeout-Ms must be at least 1");
  const std::chrono::milliseconds ceiling = call.context.options.ceilings.exec_timeout;
  const std::chrono::milliseconds asked(static_cast<int64_t>(*ms));
  return std::optional<std::chrono::milliseconds>(ceiling == kNoTimeout ? asked
                                                                        : std::min(asked, ceiling));
}

void RespondStreamError(Call& call, const Status& status) {
  call.NoteError(status);
  ConnectStream stream(call.exchange);
  if (stream.Open().ok()) stream.End(status);
}

Status ConnectStream::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  Status st = exchange_.BeginStream(200, connect::kStreamContentType);
  if (!st.ok()) failed_ = true;
  return st;
}

void ConnectStream::Start(const std::string& start_event) {
  std::lock_guard<std::mutex> lock(mu_);
  Write(connect::Envelope(start_event));
  Write(held_);
  held_.clear();
  started_ = true;
}

void ConnectStream::Send(const std::string& event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return Write(connect::Envelope(event));
  held_ += connect::Envelope(event);
}

void ConnectStream::End(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  Write(connect::EndOfStream(status));
}

void ConnectStream::Write(const std::string& bytes) {
  if (failed_ || bytes.empty()) return;
  if (!exchange_.SendChunk(bytes).ok()) failed_ = true;
}

namespace {

// The sandbox is gone (killed, past its timeout): 502, which the SDK takes for "not running"
// (isRunning() false, a TimeoutError or SandboxNotFoundError elsewhere).
void RespondSandboxGone(Call& call) {
  RespondE2bStatus(call, 502,
                   NotFound("the sandbox is not running any more (killed, or past its timeout)"));
}

// The sandbox a pre-signed /files URL is for: the one whose access token makes its signature.
StatusOr<E2bSandbox> SignedFilesSandbox(const Call& call) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch());
  ASSIGN_OR_RETURN(e2b::FileUrlSignature claim,
                   e2b::FileUrlSignatureFrom(call.request.method, call.request.query,
                                             static_cast<uint64_t>(now.count())));
  std::optional<E2bSandbox> sandbox = call.context.e2b.AuthenticateSignature(
      [&claim](std::string_view token) { return e2b::SignFileUrl(claim, token); },
      claim.signature);
  if (!sandbox) return PermissionDenied("no sandbox's access token made the URL's signature");
  return *sandbox;
}

// The sandbox a request names (E2b-Sandbox-Id) and proves with its access token, or the one
// a pre-signed URL's signature was made for; the error is the same whatever was wrong.
StatusOr<E2bSandbox> AuthenticateSandbox(const Call& call) {
  const http::Request& request = call.request;
  if (IsSignedFilesRequest(request)) return SignedFilesSandbox(call);
  const std::string& id = request.Header("e2b-sandbox-id");
  // envd's routes and /execute carry X-Access-Token; the code interpreter's /contexts only
  // the traffic token, which codebox makes the same.
  std::string_view token = request.Header("x-access-token");
  if (token.empty()) token = request.Header("e2b-traffic-access-token");
  std::optional<E2bSandbox> sandbox = call.context.e2b.Authenticate(id, token);
  if (!sandbox) {
    return PermissionDenied("no sandbox " + base::Excerpt(id) +
                            " with that access token (X-Access-Token)");
  }
  return *sandbox;
}

}  // namespace

void E2bSandboxRoute(Call& call) {
  const http::Request& request = call.request;
  StatusOr<E2bSandbox> sandbox = AuthenticateSandbox(call);
  if (!sandbox.ok()) {
    // A malformed signature is the client's mistake (400); everything else is "not yours".
    const bool malformed = sandbox.status().code() == StatusCode::kInvalidArgument;
    return RespondE2bStatus(call, malformed ? 400 : 401, sandbox.status());
  }
  call.caller = Caller{sandbox->tenant, false};
  call.box_id = sandbox->id;
  if (sandbox->gone || !call.context.registry->Get(sandbox->id, call.caller).ok()) {
    return RespondSandboxGone(call);
  }
  std::shared_ptr<void> in_flight;
  if (call.context.options.tokens_required) {
    in_flight = HoldRequest(call.context, sandbox->tenant);
    if (!in_flight) return RespondE2bError(call, RequestsExhausted(call.context, sandbox->tenant));
  }
  const std::string& path = request.path;
  const std::string& port = request.Header("e2b-sandbox-port");
  if (port == "49999") {
    auto lease = call.context.registry->Acquire(call.box_id, call.caller);
    if (!lease.ok()) return RespondSandboxGone(call);
    return CodeInterpreter(call, lease->box(), *sandbox);
  }
  if (path == "/health") return call.RespondNoContent();
  constexpr std::string_view kProcess = "/process.Process/";
  constexpr std::string_view kFilesystem = "/filesystem.Filesystem/";
  const bool process = path.starts_with(kProcess);
  const bool filesystem = path.starts_with(kFilesystem);
  if (!process && !filesystem && path != "/files") {
    return RespondE2bError(call, NotFound("no envd route " + base::Excerpt(path)));
  }
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return RespondSandboxGone(call);
  if (path == "/files") return FilesRoute(call, lease->box(), *sandbox);
  if (call.request.method != "POST") {
    return RespondConnectError(call, connect::Code::kUnimplemented, "Connect calls are POSTs");
  }
  if (process) return ProcessService(call, lease->box(), path.substr(kProcess.size()));
  FilesystemService(call, lease->box(), path.substr(kFilesystem.size()));
}

}  // namespace codebox::server
