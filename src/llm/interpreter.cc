#include "llm/interpreter.h"

#include "llm/fence.h"
#include "llm/session.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

using Clock = std::chrono::steady_clock;

// Runs one tool call of the model and answers it with a tool message, which must follow for
// every call (the API rejects an assistant tool call left unanswered).
Status AnswerToolCall(Session& s, const ToolCall& call, bool first_of_turn,
                      std::chrono::milliseconds model_latency) {
  Step& step = s.NewStep("tool");
  if (first_of_turn) step.model_latency = model_latency;
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
  s.transcript().messages.push_back({"tool", std::move(content), {}, call.id});
  return Status::Ok();
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
    const Message& m = reply->message;
    if (m.tool_calls.empty()) {
      if (auto_mode && turn == 1 && ExtractFencedCode(m.content)) {
        s.Notice("the model answered with a code block instead of a tool call; running it");
        RETURN_IF_ERROR(RunOneShot(s, &*reply, probe.model_latency));
        return false;
      }
      Step& step = s.NewStep("answer");
      step.model_latency = probe.model_latency;
      t.mode = "tools";
      t.answer = m.content;
      t.stop_reason = "answer";
      return false;
    }
    if (turn == s.options().max_steps) break;  // no one would read these results
    std::vector<ToolCall> calls = m.tool_calls;  // m lives in messages, which grow below
    for (size_t i = 0; i < calls.size(); ++i) {
      RETURN_IF_ERROR(AnswerToolCall(s, calls[i], i == 0, probe.model_latency));
    }
  }
  t.mode = "tools";
  t.stop_reason = "step_limit";
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
