// Transcript as JSON, for `codebox ask --json` and for the Python module.
#include <nlohmann/json.hpp>

#include "llm/interpreter.h"
#include "llm/tools.h"

namespace codebox::llm {
namespace {

using nlohmann::json;

bool IsImage(const std::string& mime) { return mime.rfind("image/", 0) == 0; }

// A cell's result. Image data stays out (it is in the files the step lists under "images");
// every format a result had is named in its "formats".
json ResultJson(const Execution& e) {
  json results = json::array();
  for (const CellResult& r : e.results) {
    json data = json::object();
    json formats = json::array();
    for (const auto& [mime, value] : r.data) {
      formats.push_back(mime);
      if (!IsImage(mime)) data[mime] = value;
    }
    results.push_back(
        {{"is_main_result", r.is_main_result}, {"formats", formats}, {"data", std::move(data)}});
  }
  json error = nullptr;
  if (e.error) {
    error = {{"name", e.error->name}, {"value", e.error->value}, {"traceback", e.error->traceback}};
  }
  std::string text = e.text();
  return {{"stdout", JoinChunks(e.stdout_chunks)},
          {"stderr", JoinChunks(e.stderr_chunks)},
          {"text", text.empty() ? json(nullptr) : json(text)},
          {"results", std::move(results)},
          {"error", std::move(error)},
          {"execution_count", e.execution_count},
          {"timed_out", e.timed_out},
          {"kernel_restarted", e.kernel_restarted},
          {"out_of_memory", e.out_of_memory},
          {"output_truncated", e.output_truncated},
          {"duration_ms", e.duration.count()},
          {"driver", e.driver}};
}

json ImageJson(const cell_images::SavedImage& image) {
  json j = {{"mime", image.mime},
            {"path", image.saved() ? json(image.path) : json(nullptr)},
            {"width", image.size ? json(image.size->width) : json(nullptr)},
            {"height", image.size ? json(image.size->height) : json(nullptr)},
            {"bytes", image.bytes}};
  if (!image.note.empty()) j["note"] = image.note;
  return j;
}

json StepJson(const Step& s) {
  json j = {{"step", s.index},
            {"kind", s.kind},
            {"model_ms", s.model_latency.count()},
            {"box_ms", s.box_latency.count()}};
  if (!s.code.empty()) j["code"] = s.code;
  if (s.result) j["result"] = ResultJson(*s.result);
  if (s.result || !s.images.empty()) {
    json images = json::array();
    for (const cell_images::SavedImage& image : s.images) images.push_back(ImageJson(image));
    j["images"] = std::move(images);
  }
  if (!s.error.empty()) j["error"] = s.error;
  if (!s.thinking.empty()) j["thinking"] = s.thinking;
  return j;
}

std::string Dump(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string StepToJson(const Step& step) { return Dump(StepJson(step), -1); }

std::string Transcript::ToJson() const {
  json steps_json = json::array();
  long long model_ms = 0;
  long long box_ms = 0;
  for (const Step& s : steps) {
    steps_json.push_back(StepJson(s));
    model_ms += s.model_latency.count();
    box_ms += s.box_latency.count();
  }
  json messages_json = json::parse(MessagesToJson(messages), nullptr, false);
  json j = {
      {"task", task},
      {"model", model},
      {"base_url", base_url},
      {"mode", mode},
      {"driver", driver},
      {"answer", answer},
      {"stop_reason", stop_reason},
      {"stop_detail", stop_detail},
      {"steps", std::move(steps_json)},
      {"messages", std::move(messages_json)},
      {"files_out", files_out},
      {"image_dir", image_dir},
      {"timings_ms", {{"total", total_latency.count()}, {"model", model_ms}, {"box", box_ms}}}};
  return Dump(j, 2);
}

}  // namespace codebox::llm
