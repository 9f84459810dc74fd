#include "api/ask.h"

#include <cstdint>
#include <string>

#include "api/execution.h"
#include "base/json_fields.h"

namespace codebox::api {
namespace {

using nlohmann::json;

constexpr int64_t kMaxMillis = int64_t{1} << 50;  // ~35,000 years: a number, not a bug
constexpr int64_t kMaxStep = INT32_MAX;
constexpr size_t kMaxSteps = 1 << 16;  // far past any server's --max-steps

StatusOr<int> StepNumber(const base::JsonFields& f) {
  ASSIGN_OR_RETURN(int64_t step, f.Int("step", 0, kMaxStep));
  return static_cast<int>(step);
}

}  // namespace

json AskStepToJson(const AskStep& step) {
  json j = {{"step", step.index}, {"kind", step.kind}};
  if (!step.code.empty()) j["code"] = step.code;
  if (step.result) j["result"] = ExecutionToJson(*step.result);
  if (!step.error.empty()) j["error"] = step.error;
  if (!step.thinking.empty()) j["thinking"] = step.thinking;
  return j;
}

StatusOr<AskStep> AskStepFromJson(const json& j) {
  base::JsonFields f(j, "the ask's step");
  AskStep step;
  ASSIGN_OR_RETURN(step.index, StepNumber(f));
  ASSIGN_OR_RETURN(step.kind, f.String("kind"));
  ASSIGN_OR_RETURN(step.code, f.String("code", ""));
  if (const json* result = f.Find("result")) {
    if (!result->is_object()) return f.Fault("result", "is not an object");
    ASSIGN_OR_RETURN(step.result, ExecutionFromJson(*result));
  }
  ASSIGN_OR_RETURN(step.error, f.String("error", ""));
  ASSIGN_OR_RETURN(step.thinking, f.String("thinking", ""));
  return step;
}

json AskResultToJson(const AskResult& r, bool with_steps) {
  json j = {{"answer", r.answer},
            {"stop_reason", r.stop_reason},
            {"stop_detail", r.stop_detail},
            {"mode", r.mode},
            {"model", r.model},
            {"driver", r.driver},
            {"duration_ms", r.duration.count()}};
  if (with_steps) {
    json steps = json::array();
    for (const AskStep& step : r.steps) steps.push_back(AskStepToJson(step));
    j["steps"] = std::move(steps);
  }
  return j;
}

StatusOr<AskResult> AskResultFromJson(const json& j) {
  base::JsonFields f(j, "the ask's result");
  AskResult r;
  ASSIGN_OR_RETURN(r.answer, f.String("answer"));
  ASSIGN_OR_RETURN(r.stop_reason, f.String("stop_reason"));
  ASSIGN_OR_RETURN(r.stop_detail, f.String("stop_detail", ""));
  ASSIGN_OR_RETURN(r.mode, f.String("mode", ""));
  ASSIGN_OR_RETURN(r.model, f.String("model"));
  ASSIGN_OR_RETURN(r.driver, f.String("driver"));
  ASSIGN_OR_RETURN(r.steps, f.ObjectsOf("steps", kMaxSteps, false, AskStepFromJson));
  ASSIGN_OR_RETURN(int64_t ms, f.Int("duration_ms", 0, kMaxMillis));
  r.duration = std::chrono::milliseconds(ms);
  return r;
}

json AskCodeToJson(const AskCode& code) { return {{"step", code.step}, {"code", code.code}}; }

StatusOr<AskCode> AskCodeFromJson(const json& j) {
  base::JsonFields f(j, "the ask's code event");
  AskCode code;
  ASSIGN_OR_RETURN(code.step, StepNumber(f));
  ASSIGN_OR_RETURN(code.code, f.String("code"));
  return code;
}

json AskAnswerToJson(const AskAnswer& a) {
  return {{"text", a.text}, {"stop_reason", a.stop_reason}, {"stop_detail", a.stop_detail}};
}

StatusOr<AskAnswer> AskAnswerFromJson(const json& j) {
  base::JsonFields f(j, "the ask's answer event");
  AskAnswer a;
  ASSIGN_OR_RETURN(a.text, f.String("text"));
  ASSIGN_OR_RETURN(a.stop_reason, f.String("stop_reason"));
  ASSIGN_OR_RETURN(a.stop_detail, f.String("stop_detail", ""));
  return a;
}

}  // namespace codebox::api
