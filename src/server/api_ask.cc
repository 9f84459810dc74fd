// POST /v1/ask: the ask loop (src/llm/interpreter.h) on the server, for the playground's chat
// tab. The model endpoint and its key are the server's (`codebox serve --model M --base-url
// URL`, $OPENAI_API_KEY): the key goes to the model endpoint only, never into an answer or a
// box. Each ask runs in one box of the server's default options, taken like a one-shot box
// (counted against --max-boxes, from a pool when one matches) and destroyed when the ask
// ends; a client that goes away destroys it at once. With Accept: text/event-stream the steps
// stream as they happen: `box`, `thinking` (the model's, as progress), `text` (the model's
// words), `code`, `result`, `notice`, `answer`, then `done` (or `error`).
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>

#include "api/ask.h"
#include "api/error.h"
#include "api/run_result.h"
#include "api/text_event.h"
#include "llm/interpreter.h"
#include "llm/runner.h"
#include "server/api_internal.h"
#include "server/api_request.h"
#include "server/api_stream.h"

namespace codebox::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How the interpreter's notice about its image directory starts (src/llm/session.cc).
constexpr std::string_view kImageDirNotice = "images are saved in ";

// One step for the page: the code and the whole cell result, images included as the base64
// the box sent (the page shows them as data: images; never as HTML outside a sandbox).
api::AskStep PageStep(const llm::Step& step) {
  return {.index = step.index,
          .kind = step.kind,
          .code = step.code,
          .result = step.result,
          .error = step.error,
          .thinking = step.thinking};
}

// The transcript for the page; its steps only `with_steps` (a stream sent them one by one).
api::AskResult PageResult(const llm::Transcript& t, Clock::time_point start, bool with_steps) {
  api::AskResult r{
      .answer = t.answer,
      .stop_reason = t.stop_reason,
      .stop_detail = t.stop_detail,
      .mode = t.mode,
      .model = t.model,
      .driver = t.driver,
      .steps = {},
      .duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)};
  if (with_steps) {
    for (const llm::Step& step : t.steps) r.steps.push_back(PageStep(step));
  }
  return r;
}

// The ask's box: made by the interpreter through the factory, destroyed by the watch when the
// client goes away (from the watch's thread) and after the ask.
class AskBox {
 public:
  // False (and the box destroyed) when the client left before the box was made.
  bool Set(std::shared_ptr<Box> box) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) {
        box_ = std::move(box);
        return true;
      }
    }
    (void)box->Destroy();
    return false;
  }
  // Destroys the box and drops this reference: a one-shot box counts against --max-boxes
  // until its last owner lets go, and the answer must not go out before that.
  void Destroy() {
    std::shared_ptr<Box> box;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      box = std::move(box_);
    }
    if (box) (void)box->Destroy();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<Box> box_;
  bool done_ = false;  // Destroy() ran: a box made after it is destroyed at once
};

}  // namespace

void Ask(Call& call) {
  const ApiOptions& api = call.context.options;
  if (!api.ask.configured) {
    return call.RespondError(FailedPrecondition(
        "no model is configured for /v1/ask: start codebox serve with --model M and "
        "--base-url URL (an OpenAI-compatible endpoint; the key comes from the server's "
        "$OPENAI_API_KEY)"));
  }
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = api::AskRequestFromJson(*body);
  if (!request.ok()) return call.RespondError(request.status());
  auto box_options = DecodeBoxOptions(json::object(), api.defaults, api.ceilings);
  if (!box_options.ok()) return call.RespondError(box_options.status());

  const bool streaming = call.request.WantsEventStream();
  EventSink sink(call.exchange);
  if (streaming && !sink.Begin().ok()) return;
  AskBox ask_box;
  llm::InterpreterOptions options;
  options.base_url = api.ask.base_url;
  options.model = api.ask.model;
  options.api_key = api.ask.api_key;
  options.max_steps = api.ask.max_steps;
  options.box = *box_options;
  BoxRegistry* registry = call.context.registry;
  const BoxOwner owner = call.Owner();
  options.runner_factory = [&](const BoxOptions& o) -> StatusOr<std::unique_ptr<llm::CodeRunner>> {
    bool from_pool = false;
    ASSIGN_OR_RETURN(std::shared_ptr<Box> box, registry->TakeOneShot(o, &from_pool, owner));
    if (!ask_box.Set(box)) return Unavailable("the client went away before the box started");
    if (streaming) {
      sink.Send("box",
                api::OneShotBoxToJson({.driver = box->info().driver, .from_pool = from_pool}));
    }
    return llm::BoxRunnerOver(std::move(box));
  };
  if (streaming) {
    options.on_text = [&](std::string_view text) { sink.SendText("text", text); };
    options.on_thinking = [&](std::string_view text) { sink.SendText("thinking", text); };
    options.on_code = [&](int step, const std::string& code) {
      sink.Send("code", api::AskCodeToJson({.step = step, .code = code}));
    };
    options.on_result = [&](const llm::Step& step) {
      sink.Send("result", api::AskStepToJson(PageStep(step)));
    };
    options.on_notice = [&](std::string_view text) {
      // Where the interpreter saved images on this host is no business of the page (it gets
      // the images in `result` events, and the directory is removed after the ask).
      if (text.rfind(kImageDirNotice, 0) == 0) return;
      sink.Send("notice", api::TextEventToJson(text));
    };
  }

  auto start = Clock::now();
  llm::Interpreter interpreter(options);
  StatusOr<llm::Transcript> transcript = [&] {
    DisconnectWatch watch(call.exchange, streaming ? &sink : nullptr,
                          [&ask_box] { ask_box.Destroy(); });
    return interpreter.Ask(request->task);
  }();
  ask_box.Destroy();
  // With no output directory the images were saved in a fresh temporary directory of the
  // interpreter's; the page got them in the events, so nothing of the ask stays on the host.
  if (const std::string& dir = interpreter.partial().image_dir; !dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  if (!transcript.ok()) {
    if (!streaming) return call.RespondError(transcript.status());
    call.NoteError(transcript.status());
    return sink.Send("error", api::ErrorToJson(transcript.status()));
  }
  const api::AskResult result = PageResult(*transcript, start, /*with_steps=*/!streaming);
  if (!streaming) return call.RespondJson(200, api::AskResultToJson(result));
  sink.Send("answer", api::AskAnswerToJson({.text = transcript->answer,
                                            .stop_reason = transcript->stop_reason,
                                            .stop_detail = transcript->stop_detail}));
  // Its steps went out one by one.
  sink.Send("done", api::AskResultToJson(result, /*with_steps=*/false));
}

}  // namespace codebox::server
