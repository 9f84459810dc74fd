// Transcript as JSON, for `codebox ask --json` and for the Python module.
#include <nlohmann/json.hpp>

#include "llm/interpreter.h"

namespace codebox::llm {
namespace {

using nlohmann::json;

json ResultJson(const ExecResult& r) {
  return {{"exit_code", r.exit_code},       {"signal", r.signal},
          {"stdout", r.stdout_data},        {"stderr", r.stderr_data},
          {"timed_out", r.timed_out},       {"out_of_memory", r.out_of_memory},
          {"output_truncated", r.output_truncated}, {"duration_ms", r.duration.count()},
          {"driver", r.driver}};
}

}  // namespace

std::string Transcript::ToJson() const {
  json steps_json = json::array();
  long long model_ms = 0;
  long long box_ms = 0;
  for (const Step& s : steps) {
    json j = {{"step", s.index},
              {"kind", s.kind},
              {"model_ms", s.model_latency.count()},
              {"box_ms", s.box_latency.count()}};
    if (!s.code.empty()) j["code"] = s.code;
    if (s.result) j["result"] = ResultJson(*s.result);
    if (!s.error.empty()) j["error"] = s.error;
    model_ms += s.model_latency.count();
    box_ms += s.box_latency.count();
    steps_json.push_back(std::move(j));
  }
  json messages_json = json::parse(MessagesToJson(messages), nullptr, false);
  json j = {{"task", task},
            {"model", model},
            {"base_url", base_url},
            {"mode", mode},
            {"driver", driver},
            {"answer", answer},
            {"stop_reason", stop_reason},
            {"steps", std::move(steps_json)},
            {"messages", std::move(messages_json)},
            {"files_out", files_out},
            {"timings_ms", {{"total", total_latency.count()}, {"model", model_ms}, {"box", box_ms}}}};
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace codebox::llm
