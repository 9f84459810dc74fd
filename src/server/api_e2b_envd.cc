// E2B's in-sandbox routes (docs/e2b.md): every request names its sandbox (E2b-Sandbox-Id) and
// carries that sandbox's own access token, checked here in constant time; then envd's process
// service (process.Process, Connect's JSON codec) on the box's process table, and /health.
// The box is the attacker: what comes out of it (output, exit, the process table) is bounded
// by the host before it gets here, as on codebox's own routes.
#include <atomic>
#include <mutex>

#include "base/json.h"
#include "e2b/connect.h"
#include "e2b/process.h"
#include "e2b/sandboxes.h"
#include "server/api_e2b.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;
namespace connect = e2b::connect;

// The largest request message a Connect call may carry (a SendInput's 1 MiB in base64, and
// room for its framing).
constexpr size_t kMaxMessageBytes = 2u << 20;

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

// A server stream's answer: 200 and envelopes; the start event first (what the box writes
// before it is held back), the end-of-stream envelope last. Send is called from the box's
// threads; the first failed write makes the rest no-ops.
class ConnectStream {
 public:
  explicit ConnectStream(http::Exchange& exchange) : exchange_(exchange) {}

  Status Open() {
    std::lock_guard<std::mutex> lock(mu_);
    Status st = exchange_.BeginStream(200, connect::kStreamContentType);
    if (!st.ok()) failed_ = true;
    return st;
  }
  void Start(const std::string& start_event) {
    std::lock_guard<std::mutex> lock(mu_);
    Write(connect::Envelope(start_event));
    Write(held_);
    held_.clear();
    started_ = true;
  }
  void Send(const std::string& event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return Write(connect::Envelope(event));
    held_ += connect::Envelope(event);
  }
  void End(const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    Write(connect::EndOfStream(status));
  }
  bool failed() const { return failed_.load(); }

 private:
  void Write(const std::string& bytes) {
    if (failed_ || bytes.empty()) return;
    if (!exchange_.SendChunk(bytes).ok()) failed_ = true;
  }

  http::Exchange& exchange_;
  std::mutex mu_;
  std::string held_;  // events before the start event: at most what the box wrote meanwhile
  bool started_ = false;
  std::atomic<bool> failed_{false};
};

// The user a call runs as: "Authorization: Basic base64(<user>:)", none for the default.
// codebox's sandboxes have E2B's two, user and root (docs/e2b.md says which each is).
Status CheckUser(const http::Request& request) {
  const std::string& auth = request.Header("authorization");
  if (auth.empty()) return Status::Ok();
  if (auth != "Basic dXNlcjo=" && auth != "Basic cm9vdDo=") {
    return InvalidArgument("a sandbox has the users \"user\" and \"root\"; the request named "
                           "another");
  }
  return Status::Ok();
}

// Connect-Timeout-Ms: how long a streaming call may run; for a process, its lifetime (it is
// killed then, as envd does). Absent: none.
StatusOr<std::optional<std::chrono::milliseconds>> ConnectTimeout(const http::Request& request) {
  const std::string& text = request.Header("connect-timeout-ms");
  if (text.empty()) return std::optional<std::chrono::milliseconds>();
  if (text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("Connect-Timeout-Ms is not a number of milliseconds");
  }
  const int64_t ms = std::stoll(text);
  if (ms < 1) return InvalidArgument("Connect-Timeout-Ms must be at least 1");
  return std::optional<std::chrono::milliseconds>(ms);
}

ExecOptions StreamingOptions(ConnectStream& stream, bool tty) {
  ExecOptions o;
  o.keep_output = false;
  o.on_stdout = [&stream, tty](std::string_view chunk) {
    stream.Send(e2b::DataEventJson(tty ? e2b::DataStream::kPty : e2b::DataStream::kStdout, chunk));
  };
  o.on_stderr = [&stream](std::string_view chunk) {
    stream.Send(e2b::DataEventJson(e2b::DataStream::kStderr, chunk));
  };
  return o;
}

// Follows `process` to its end on `stream`: the end event and the end of the stream. A
// client that goes away detaches, and the process runs on (a background command, reattached
// later with Connect).
void FollowToEnd(Call& call, ConnectStream& stream, Process& process) {
  StatusOr<ExecResult> result = [&] {
    DisconnectWatch watch(call.exchange, nullptr, [&process] { process.Detach(); });
    return process.Wait();
  }();
  if (stream.failed() || call.exchange.ClientGone()) return;
  if (!result.ok()) {
    call.NoteError(result.status());
    return stream.End(result.status());
  }
  stream.Send(e2b::EndEventJson(*result));
  stream.End(result->timed_out
                 ? Status(StatusCode::kDeadlineExceeded, "the command passed its timeout")
                 : Status::Ok());
}

void StartProcess(Call& call, Box& box) {
  auto message = ConnectMessage(call.request, /*streaming=*/true);
  if (!message.ok()) return RespondConnectError(call, message.status());
  auto request = e2b::ProcessStartFromJson(*message);
  if (!request.ok()) return RespondConnectError(call, request.status());
  if (Status st = CheckUser(call.request); !st.ok()) return RespondConnectError(call, st);
  auto timeout = ConnectTimeout(call.request);
  if (!timeout.ok()) return RespondConnectError(call, timeout.status());
  ConnectStream stream(call.exchange);
  if (!stream.Open().ok()) return;
  ExecOptions o = StreamingOptions(stream, request->pty.has_value());
  o.env = request->envs;
  o.cwd = request->cwd;
  o.tty = request->pty;
  o.background = true;  // a client that goes away leaves it running (envd's rule)
  o.timeout = timeout->value_or(kNoTimeout);
  auto process = box.Start(request->argv, o);
  if (!process.ok()) {
    call.NoteError(process.status());
    return stream.End(process.status());
  }
  if (!request->stdin_open) (void)(*process)->CloseStdin();
  stream.Start(e2b::StartEventJson((*process)->pid()));
  FollowToEnd(call, stream, **process);
}

void ConnectToProcess(Call& call, Box& box) {
  auto message = ConnectMessage(call.request, /*streaming=*/true);
  if (!message.ok()) return RespondConnectError(call, message.status());
  auto pid = e2b::ProcessPidFromJson(*message);
  if (!pid.ok()) return RespondConnectError(call, pid.status());
  ConnectStream stream(call.exchange);
  if (!stream.Open().ok()) return;
  auto process = box.Attach(*pid, StreamingOptions(stream, /*tty=*/false));
  if (!process.ok()) {
    call.NoteError(process.status());
    return stream.End(process.status());
  }
  stream.Start(e2b::StartEventJson(*pid));
  FollowToEnd(call, stream, **process);
}

// The unary calls: one message in, one out.
void ProcessUnary(Call& call, Box& box, std::string_view method) {
  auto message = ConnectMessage(call.request, /*streaming=*/false);
  if (!message.ok()) return RespondConnectError(call, message.status());
  Status done;
  if (method == "List") {
    auto listed = box.Processes();
    if (!listed.ok()) return RespondConnectError(call, listed.status());
    return RespondConnect(call, e2b::ProcessListToJson(*listed));
  } else if (method == "SendInput") {
    auto input = e2b::ProcessInputFromJson(*message);
    if (!input.ok()) return RespondConnectError(call, input.status());
    done = box.SendStdin(input->pid, input->bytes);
  } else if (method == "CloseStdin") {
    auto pid = e2b::ProcessPidFromJson(*message);
    if (!pid.ok()) return RespondConnectError(call, pid.status());
    done = box.SendStdin(*pid, "", /*close=*/true);
  } else if (method == "SendSignal") {
    auto signal = e2b::ProcessSignalFromJson(*message);
    if (!signal.ok()) return RespondConnectError(call, signal.status());
    // SIGKILL is the SDK's kill(): the whole tree goes, as codebox's kill does.
    done = signal->signal == 9 ? box.KillProcess(signal->pid)
                               : box.SignalProcess(signal->pid, signal->signal);
  } else if (method == "Update") {
    auto update = e2b::ProcessUpdateFromJson(*message);
    if (!update.ok()) return RespondConnectError(call, update.status());
    if (update->size) {
      ExecOptions quiet;
      quiet.keep_output = false;
      auto process = box.Attach(update->pid, quiet);
      if (!process.ok()) return RespondConnectError(call, process.status());
      done = (*process)->Resize(*update->size);
      (*process)->Detach();
    }
  } else {
    return RespondConnectError(call, connect::Code::kUnimplemented,
                               "process." + std::string(method) + " is not supported by codebox");
  }
  if (!done.ok()) return RespondConnectError(call, done);
  RespondConnect(call, json::object());
}

void ProcessService(Call& call, std::string_view method) {
  if (call.request.method != "POST") {
    return RespondConnectError(call, connect::Code::kUnimplemented, "Connect calls are POSTs");
  }
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) {
    return RespondConnectError(call, connect::Code::kUnavailable,
                               "the sandbox is not running any more");
  }
  if (method == "Start") return StartProcess(call, lease->box());
  if (method == "Connect") return ConnectToProcess(call, lease->box());
  ProcessUnary(call, lease->box(), method);
}

// The sandbox is gone (killed, past its timeout): 502, which the SDK takes for "not running"
// (isRunning() false, a TimeoutError or SandboxNotFoundError elsewhere).
void RespondSandboxGone(Call& call) {
  call.NoteError(NotFound("sandbox not running"));
  http::Response response;
  response.status = 502;
  response.body = base::JsonText(e2b::ErrorBody(
      502, "the sandbox is not running any more (killed, or past its timeout)"));
  (void)call.exchange.Respond(std::move(response));
}

}  // namespace

void E2bSandboxRoute(Call& call) {
  const http::Request& request = call.request;
  const std::string& id = request.Header("e2b-sandbox-id");
  // envd's routes and /execute carry X-Access-Token; the code interpreter's /contexts only
  // the traffic token, which codebox makes the same.
  std::string_view token = request.Header("x-access-token");
  if (token.empty()) token = request.Header("e2b-traffic-access-token");
  std::optional<E2bSandbox> sandbox = call.context.e2b.Authenticate(id, token);
  if (!sandbox) {
    call.NoteError(PermissionDenied("a wrong sandbox access token"));
    http::Response response;
    response.status = 401;
    response.body = base::JsonText(e2b::ErrorBody(
        401, "no sandbox " + base::Excerpt(id) + " with that access token (X-Access-Token)"));
    (void)call.exchange.Respond(std::move(response));
    return;
  }
  call.caller = Caller{sandbox->tenant, false};
  call.box_id = sandbox->id;
  if (sandbox->gone || !call.context.registry->Get(sandbox->id, call.caller).ok()) {
    return RespondSandboxGone(call);
  }
  std::shared_ptr<void> in_flight;
  if (call.context.options.tokens_required) {
    const uint32_t max = call.context.quotas.For(sandbox->tenant).max_requests;
    in_flight = call.context.in_flight.TryHold(sandbox->tenant, max);
    if (!in_flight) {
      return RespondE2bError(call, ResourceExhausted("tenant " + sandbox->tenant + " has " +
                                                     std::to_string(max) +
                                                     " requests in flight, its quota"));
    }
  }
  const std::string& path = request.path;
  const std::string& port = request.Header("e2b-sandbox-port");
  if (port == "49999") {
    return RespondE2bError(call, NotFound("the code interpreter (/execute, /contexts) is not "
                                          "served by codebox yet"));
  }
  if (path == "/health") return call.RespondNoContent();
  constexpr std::string_view kProcess = "/process.Process/";
  if (path.starts_with(kProcess)) return ProcessService(call, path.substr(kProcess.size()));
  if (path.starts_with("/filesystem.Filesystem/")) {
    return RespondConnectError(call, connect::Code::kUnimplemented,
                               "the filesystem service is not served by codebox yet");
  }
  RespondE2bError(call, NotFound("no envd route " + base::Excerpt(path)));
}

}  // namespace codebox::server
