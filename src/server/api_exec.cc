// Running code: exec, python and run_code in a registered box, restart/interrupt of its
// kernel, and the one-shot POST /v1/run. Each answers once with JSON, or, when the client
// asks for text/event-stream, streams stdout/stderr (and cell results) as they come and ends
// with `done` (or `error`). A client that goes away mid-call stops the call's box work.
#include <chrono>
#include <functional>
#include <memory>

#include "api/error.h"
#include "api/exec_result.h"
#include "api/execution.h"
#include "api/run_result.h"
#include "server/api_internal.h"
#include "server/api_request.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void ReportStreamError(Call& call, EventSink& sink, const Status& status) {
  call.NoteError(status);
  sink.Send("error", api::ErrorToJson(status));
}

using ExecCall = std::function<StatusOr<ExecResult>(const ExecOptions&)>;

using ExecAnswer = std::function<json(const ExecResult&)>;

// Runs `run` and answers with its result as `encode` writes it (the exec result, or a one-shot
// run's), streaming when asked. `on_gone` stops the work when the client goes away.
void AnswerExec(Call& call, std::string_view kind, ExecOptions options, const ExecCall& run,
                const std::function<void()>& on_gone,
                const ExecAnswer& encode = api::ExecResultToJson) {
  const bool streaming = call.request.WantsEventStream();
  EventSink sink(call.exchange);
  if (streaming) {
    if (!sink.Begin().ok()) return;  // the client is gone before anything ran
    options.on_stdout = [&sink](std::string_view c) { sink.SendText("stdout", c); };
    options.on_stderr = [&sink](std::string_view c) { sink.SendText("stderr", c); };
    // Each chunk is sent on as it comes: the server does not also hold the whole output, and
    // `done` carries stdout and stderr empty (docs/server.md, Streaming).
    options.keep_output = false;
  }
  auto start = Clock::now();
  StatusOr<ExecResult> result = [&] {
    DisconnectWatch watch(call.exchange, streaming ? &sink : nullptr, on_gone);
    return run(options);
  }();
  call.ObserveExec(kind, start);
  if (!result.ok()) {
    if (streaming) return ReportStreamError(call, sink, result.status());
    return call.RespondError(result.status());
  }
  json body = encode(*result);
  if (streaming) return sink.Send("done", body);
  call.RespondJson(200, body);
}

// Exec or RunPython in the call's box; a client gone mid-call kills exactly this call's
// processes, through its ExecCancel.
void AnswerBoxExec(Call& call, std::string_view kind, ExecOptions options,
                   const std::function<StatusOr<ExecResult>(Box&, const ExecOptions&)>& run) {
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Box& box = lease->box();
  auto cancel = std::make_shared<ExecCancel>();
  options.cancel = cancel;
  AnswerExec(
      call, kind, std::move(options), [&](const ExecOptions& o) { return run(box, o); },
      [&cancel] { cancel->Cancel(); });
}

}  // namespace

void ExecInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = DecodeExecRequest(*body, call.context.options.ceilings);
  if (!request.ok()) return call.RespondError(request.status());
  AnswerBoxExec(call, "exec", request->options,
                [&](Box& box, const ExecOptions& o) { return box.Exec(request->argv, o); });
}

void PythonInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = DecodePythonRequest(*body, call.context.options.ceilings);
  if (!request.ok()) return call.RespondError(request.status());
  AnswerBoxExec(call, "python", request->options,
                [&](Box& box, const ExecOptions& o) { return box.RunPython(request->code, o); });
}

void RunCodeInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = DecodeCellRequest(*body, call.context.options.ceilings);
  if (!request.ok()) return call.RespondError(request.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Box& box = lease->box();

  const bool streaming = call.request.WantsEventStream();
  EventSink sink(call.exchange);
  RunCodeOptions options;
  options.timeout = request->timeout;
  if (streaming) {
    if (!sink.Begin().ok()) return;
    options.on_stdout = [&sink](std::string_view c) { sink.SendText("stdout", c); };
    options.on_stderr = [&sink](std::string_view c) { sink.SendText("stderr", c); };
    options.on_result = [&sink](const CellResult& r) {
      sink.Send("result", api::CellResultToJson(r));
    };
  }
  auto start = Clock::now();
  StatusOr<Execution> execution = [&] {
    // A client gone mid-cell: the cell is interrupted (KeyboardInterrupt; state kept).
    DisconnectWatch watch(call.exchange, streaming ? &sink : nullptr,
                          [&box] { (void)box.InterruptCode(); });
    return box.RunCode(request->code, options);
  }();
  call.ObserveExec("run_code", start);
  if (!execution.ok()) {
    if (streaming) return ReportStreamError(call, sink, execution.status());
    return call.RespondError(execution.status());
  }
  if (streaming) return sink.Send("done", api::ExecutionToJson(*execution));
  call.RespondJson(200, api::ExecutionToJson(*execution));
}

void RestartKernel(Call& call) {
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().RestartKernel();
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

void InterruptCode(Call& call) {
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().InterruptCode();
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

void RunOneShot(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  const ApiOptions& api = call.context.options;
  auto request = DecodeRunRequest(*body, api.defaults, api.ceilings);
  if (!request.ok()) return call.RespondError(request.status());
  if (PlaceOnPeer(call, request->box.driver)) return;
  if (Status st = EnsureImage(call, request->box); !st.ok()) return call.RespondError(st);
  bool from_pool = false;
  auto taken = call.context.registry->TakeOneShot(request->box, &from_pool, call.Owner());
  if (!taken.ok() && taken.status().code() == StatusCode::kResourceExhausted &&
      PlaceOnPeer(call, request->box.driver, /*local_refused=*/true)) {
    return;
  }
  if (!taken.ok()) return call.RespondError(taken.status());
  std::shared_ptr<Box> box = *taken;
  const api::OneShotBox ran_in{.driver = box->info().driver, .from_pool = from_pool};
  AnswerExec(
      call, "run", request->exec,
      [&](const ExecOptions& o) { return box->RunPython(request->code, o); },
      // The box is this request's alone: a client gone mid-run ends it at once.
      [&] { (void)box->Destroy(); },
      [&](const ExecResult& r) { return api::RunResultToJson(r, ran_in); });
  if (const auto& on_egress = call.context.options.hooks.on_egress) {  // all of it: it ends
    for (const EgressRecord& r : box->EgressLog()) on_egress("one-shot", r);
  }
  (void)box->Destroy();
}

}  // namespace codebox::server
