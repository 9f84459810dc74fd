// POST /v1/ask as JSON: its answer (the transcript: the model's answer, why it stopped, every
// step), and the events it streams: `box` (run_result.h's OneShotBox), `text`, `thinking` and
// `notice` ({"text"}, text_event.h), `code` before a step runs, `result` (a step) after it ran,
// `answer`, and `done` (the transcript without its steps) or `error` (error.h). The model's
// words and the box's output are as they came: whoever prints them makes them terminal-safe.
#ifndef CODEBOX_API_ASK_H_
#define CODEBOX_API_ASK_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codebox/execution.h"
#include "codebox/status.h"

namespace codebox::api {

// One model turn, and the code it ran if any.
struct AskStep {
  int index = 0;     // 1-based
  std::string kind;  // "tool", "oneshot", "repair", "answer"
  std::string code;  // empty when the turn ran nothing
  std::optional<Execution> result;
  std::string error;     // why the code could not run
  std::string thinking;  // what the model thought before this turn's code or answer
};
// {"step", "kind"}, and "code", "result" (ExecutionToJson: images as the box sent them, in
// base64), "error", "thinking" when the step has them: the `result` event, and one of "steps".
nlohmann::json AskStepToJson(const AskStep& step);
StatusOr<AskStep> AskStepFromJson(const nlohmann::json& j);

struct AskResult {
  std::string answer;
  std::string stop_reason;  // "answer", "step_limit", "code_failed", "no_answer"
  std::string stop_detail;  // for a stop_reason other than "answer": what happened
  std::string mode;         // "tools" or "oneshot"
  std::string model;
  std::string driver;
  std::vector<AskStep> steps;
  std::chrono::milliseconds duration{0};
};
// {"answer", "stop_reason", "stop_detail", "mode", "model", "driver", "steps", "duration_ms"}:
// the JSON answer. Without "steps" (`with_steps` false) it is the `done` event, whose steps
// went out one by one.
nlohmann::json AskResultToJson(const AskResult& result, bool with_steps = true);
// "steps" may be absent (a `done` event): none.
StatusOr<AskResult> AskResultFromJson(const nlohmann::json& j);

// The `code` event: a step's code, before it runs.
struct AskCode {
  int step = 0;
  std::string code;
};
// {"step", "code"}.
nlohmann::json AskCodeToJson(const AskCode& code);
StatusOr<AskCode> AskCodeFromJson(const nlohmann::json& j);

// The `answer` event: the model's answer and why the ask stopped.
struct AskAnswer {
  std::string text;
  std::string stop_reason;
  std::string stop_detail;
};
// {"text", "stop_reason", "stop_detail"}.
nlohmann::json AskAnswerToJson(const AskAnswer& answer);
StatusOr<AskAnswer> AskAnswerFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_ASK_H_
