// envd's process service (process.Process) on the box's process table: start a command and
// follow it (its output as data events, its end), reattach to one, list, feed, signal and
// resize them. What comes out of the box (output, exit, the table) is bounded by the host
// before it gets here, as on codebox's own routes.
#include <optional>

#include "e2b/process.h"
#include "server/api_e2b.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;
namespace connect = e2b::connect;

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
  if (!message.ok()) return RespondStreamError(call, message.status());
  auto request = e2b::ProcessStartFromJson(*message);
  if (!request.ok()) return RespondStreamError(call, request.status());
  auto user = e2b::UserFromAuthorization(call.request.Header("authorization"));
  if (!user.ok()) return RespondStreamError(call, user.status());
  auto timeout = ConnectTimeout(call);
  if (!timeout.ok()) return RespondStreamError(call, timeout.status());
  ConnectStream stream(call.exchange);
  if (!stream.Open().ok()) return;
  ExecOptions o = StreamingOptions(stream, request->pty.has_value());
  o.env = request->envs;
  o.cwd = request->cwd;
  o.tty = request->pty;
  o.user = *user;       // the box says whether it has them: root, and its user
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
  if (!message.ok()) return RespondStreamError(call, message.status());
  auto pid = e2b::ProcessPidFromJson(*message);
  if (!pid.ok()) return RespondStreamError(call, pid.status());
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

}  // namespace

void ProcessService(Call& call, Box& box, std::string_view method) {
  if (method == "Start") return StartProcess(call, box);
  if (method == "Connect") return ConnectToProcess(call, box);
  ProcessUnary(call, box, method);
}

}  // namespace codebox::server
