// Processes that outlive a request (docs/server.md, "Processes"): start one in the background,
// list a box's table, follow one (server-sent events in the exec stream's format, or one JSON
// answer at its end), write its stdin, signal it, kill its tree. The table is the box's, so
// the agent's word is bounded by the host (AgentClient) before it gets here.
#include <memory>

#include "api/error.h"
#include "api/process_info.h"
#include "server/api_internal.h"
#include "server/api_request.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;

}  // namespace

void StartProcessInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = DecodeStartRequest(*body, call.context.options.ceilings);
  if (!request.ok()) return call.RespondError(request.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  auto process = lease->box().Start(request->argv, request->options);
  if (!process.ok()) return call.RespondError(process.status());
  const int pid = (*process)->pid();
  (*process)->Detach();  // it runs on; this handle only started it
  call.RespondJson(201, api::ProcessStartedToJson(pid, request->argv));
}

void ListProcessesInBox(Call& call) {
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  auto listed = lease->box().Processes();
  if (!listed.ok()) return call.RespondError(listed.status());
  call.RespondJson(200, api::ProcessListToJson(*listed));
}

void AttachToProcess(Call& call) {
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  const bool streaming = call.request.WantsEventStream();
  EventSink sink(call.exchange);
  ExecOptions options;
  if (streaming) {
    if (!sink.Begin().ok()) return;
    options.on_stdout = [&sink](std::string_view c) { sink.SendText("stdout", c); };
    options.on_stderr = [&sink](std::string_view c) { sink.SendText("stderr", c); };
    options.keep_output = false;
  }
  auto process = lease->box().Attach(call.pid, options);
  if (!process.ok()) {
    if (streaming) {
      call.NoteError(process.status());
      return sink.Send("error", api::ErrorToJson(process.status()));
    }
    return call.RespondError(process.status());
  }
  StatusOr<ExecResult> result = [&] {
    // A client that goes away detaches: the process runs on.
    DisconnectWatch watch(call.exchange, streaming ? &sink : nullptr,
                          [&process] { (*process)->Detach(); });
    return (*process)->Wait();
  }();
  if (!result.ok()) {
    if (streaming) {
      call.NoteError(result.status());
      return sink.Send("error", api::ErrorToJson(result.status()));
    }
    return call.RespondError(result.status());
  }
  json body = api::ProcessResultToJson(call.pid, *result);
  if (streaming) return sink.Send("done", body);
  call.RespondJson(200, body);
}

void WriteProcessStdin(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = api::StdinRequestFromJson(*body);
  if (!request.ok()) return call.RespondError(request.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().SendStdin(call.pid, request->text, request->close);
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

void SignalProcessInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto signal = api::SignalRequestFromJson(*body);
  if (!signal.ok()) return call.RespondError(signal.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().SignalProcess(call.pid, *signal);
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

void KillProcessInBox(Call& call) {
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().KillProcess(call.pid);
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

}  // namespace codebox::server
