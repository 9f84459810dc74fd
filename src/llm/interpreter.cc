#include "llm/interpreter.h"

#include "llm/fence.h"
#include "llm/session.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

using Clock = std::chrono::steady_clock;

// Calls one message may make that are run; a model that writes more (a loop gone wrong) gets
// the rest answered with an error, each, as the API wants every call answered.
constexpr size_t kMaxCallsPerTurn = 32;

// Runs one tool call of the model and answers it with a tool message, which must follow for
// every call (the API rejects an assistant tool call left unanswered). The first call of a
// turn carries the turn's latency and thinking.
Status AnswerToolCall(Session& s, const ToolCall& call, const Step* turn) {
  Step& step = s.NewStep("tool");
  if (turn != nullptr) {
    step.model_latency = turn->model_latency;
    step.thinking = turn->thinking;
  }
  std::string content;
  if (call.name != kRunPythonTool) {
    step.error = "unknown tool '" + call.name + "'";
    content = ToolErrorJson("there is no tool named '" + call.name +
                            "'; the only tool is run_python. Nothing was run.");
  } else if (auto code = ParseRunPythonArguments(call.arguments); !code.ok()) {
    step.error = code.status().message();
    content = ToolErrorJson(code.status().message());
  } else {
    ASSIGN_OR_RETURN(Execution cell, s.RunCode(step, *code));
    std::vector<std::string> image_lines;
    for (const cell_images::SavedImage& image : step.images) image_lines.push_back(image.Summary());
    content = ToolResultJson(cell, image_lines, s.options().tool_output_cap);
  }
  if (!step.error.empty()) s.Notice("step " + std::to_string(step.index) + ": " + step.error);
  s.transcript().messages.push_back({"tool", std::move(content), {}, call.id, {}});
  return Status::Ok();
}

// Calls the model wrote into its text that could not be read have no id to answer; the model
// is told in a user message what was wrong, and writes them again.
void AnswerUnreadableCalls(Session& s, const std::vector<std::string>& problems, const Step* turn) {
  std::string text = "Your tool call could not be read, so nothing was run:";
  for (const std::string& problem : problems) {
    Step& step = s.NewStep("tool");
    if (turn != nullptr && problem == problems.front()) {
      step.model_latency = turn->model_latency;
      step.thinking = turn->thinking;
    }
    step.error = "unreadable tool call: " + problem;
    s.Notice("step " + std::to_string(step.index) + ": " + step.error);
    text += "\n- " + problem;
  }
  text += "\nCall run_python with JSON arguments like {\"code\": \"print(1 + 1)\"}, the code "
          "escaped as a JSON string.";
  s.transcript().messages.push_back({"user", std::move(text), {}, {}, {}});
}

}  // namespace

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kTools: return "tools";
    case Mode::kOneShot: return "oneshot";
    case Mode::kAuto: return "auto";
  }
  return "auto";
}

StatusOr<Mode> ParseMode(std::string_view name) {
  if (name == "tools") return Mode::kTools;
  if (name == "oneshot") return Mode::kOneShot;
  if (name == "auto") return Mode::kAuto;
  return InvalidArgument("unknown mode '" + std::string(name) + "' (tools, oneshot or auto)");
}

StatusOr<bool> RunToolsLoop(Session& s) {
  Transcript& t = s.transcript();
  const bool auto_mode = s.options().mode == Mode::kAuto;
  for (int turn = 1; turn <= s.options().max_steps; ++turn) {
    // The step for the turn is made only once we know whether it runs code; the latency is
    // carried over to it.
    Step probe;
    auto reply = s.Turn(probe, /*with_tools=*/true, /*stream_text=*/true);
    if (!reply.ok()) {
      // A server without tool support refuses the "tools" field with a 400.
      if (auto_mode && turn == 1 && reply.status().code() == StatusCode::kInvalidArgument) {
        s.Notice("the server rejected tool calling (" + reply.status().message() +
                 "); falling back to oneshot mode");
        return true;
      }
      return reply.status();
    }
    const ModelTurn& m = reply->turn;
    if (!m.asks_for_tools()) {
      if (auto_mode && turn == 1 && m.fenced_code) {
        s.Notice("the model answered with a code block instead of a tool call; running it");
        RETURN_IF_ERROR(RunOneShot(s, &*reply, &probe));
        return false;
      }
      Step& step = s.NewStep("answer");
      step.model_latency = probe.model_latency;
      step.thinking = probe.thinking;
      t.mode = "tools";
      if (m.text.empty()) {
        s.NoAnswer(*reply, step);
        return false;
      }
      t.answer = m.text;
      t.stop_reason = "answer";
      s.ShowAnswer(*reply);
      return false;
    }
    if (turn == s.options().max_steps) break;  // no one would read these results
    // In the order written, in the same session: a later call may use what an earlier made.
    for (size_t i = 0; i < m.calls.size(); ++i) {
      if (i >= kMaxCallsPerTurn) {
        s.transcript().messages.push_back(
            {"tool", ToolErrorJson("not run: one message may make at most " +
                                   std::to_string(kMaxCallsPerTurn) + " calls"),
             {}, m.calls[i].id, {}});
        continue;
      }
      RETURN_IF_ERROR(AnswerToolCall(s, m.calls[i], i == 0 ? &probe : nullptr));
    }
    if (!m.unreadable.empty()) {
      AnswerUnreadableCalls(s, m.unreadable, m.calls.empty() ? &probe : nullptr);
    }
  }
  t.mode = "tools";
  t.stop_reason = "step_limit";
  t.stop_detail = "no answer after " + std::to_string(s.options().max_steps) +
                  " model turns (raise --max-steps)";
  s.Notice("stopped after " + std::to_string(s.options().max_steps) +
           " model turns without a final answer (raise --max-steps)");
  return false;
}

Interpreter::Interpreter(InterpreterOptions options) : options_(std::move(options)) {}

StatusOr<Transcript> Interpreter::Ask(const std::string& task) {
  partial_ = Transcript{};
  partial_.task = task;
  if (options_.max_steps < 1) return InvalidArgument("max_steps must be at least 1");
  auto start = Clock::now();
  Session session(options_, partial_);
  Status status = [&]() -> Status {
    RETURN_IF_ERROR(session.Open());
    if (options_.mode == Mode::kOneShot) {
      partial_.messages = {{"system", OneShotSystemPrompt(session), {}, {}}, {"user", task, {}, {}}};
      return RunOneShot(session, nullptr);
    }
    partial_.messages = {{"system", ToolsSystemPrompt(session), {}, {}}, {"user", task, {}, {}}};
    ASSIGN_OR_RETURN(bool fall_back, RunToolsLoop(session));
    if (!fall_back) return Status::Ok();
    partial_.messages = {{"system", OneShotSystemPrompt(session), {}, {}}, {"user", task, {}, {}}};
    return RunOneShot(session, nullptr);
  }();
  // Files are copied out even after a failure: a chart made before the error is still useful.
  Status copied = session.CopyOutputs();
  partial_.total_latency =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(copied);
  return partial_;
}

}  // namespace codebox::llm
