#include "api/execution.h"

#include <limits>
#include <string>
#include <utility>

#include "api/egress_record.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {

namespace {

using nlohmann::json;

constexpr int64_t kMaxMillis = int64_t{1} << 50;  // ~35,000 years: a number, not a bug

std::string TypeOf(const json& j) { return j.type_name(); }

}  // namespace

json CellResultToJson(const CellResult& r) {
  json data = json::object();
  for (const auto& [mime, value] : r.data) data[mime] = value;
  return {{"data", std::move(data)}, {"is_main_result", r.is_main_result}};
}

StatusOr<CellResult> CellResultFromJson(const json& j, std::string_view what) {
  if (!j.is_object()) {
    return ProtocolError(std::string(what) + " is a JSON " + TypeOf(j) + ", not an object");
  }
  base::JsonFields f(j, std::string(what));
  CellResult r;
  const json* data = f.Find("data");
  if (data == nullptr) return f.Missing("data");
  if (!data->is_object()) return f.Fault("data", "is a " + TypeOf(*data) + ", expected an object");
  for (const auto& [mime, value] : data->items()) {
    if (!value.is_string()) {
      return f.Fault("data", "holds " + base::TerminalSafe(mime, 80) + " as a " + TypeOf(value) +
                                 ", expected a string");
    }
    r.data.emplace(mime, value.get<std::string>());
  }
  ASSIGN_OR_RETURN(r.is_main_result, f.Bool("is_main_result", false));
  return r;
}

json ExecutionToJson(const Execution& e) {
  json results = json::array();
  for (const CellResult& r : e.results) results.push_back(CellResultToJson(r));
  json error = nullptr;
  if (e.error) {
    error = {{"name", e.error->name}, {"value", e.error->value}, {"traceback", e.error->traceback}};
  }
  return {{"logs", {{"stdout", e.stdout_chunks}, {"stderr", e.stderr_chunks}}},
          {"results", std::move(results)},
          {"error", std::move(error)},
          {"execution_count", e.execution_count},
          {"duration_ms", e.duration.count()},
          {"timed_out", e.timed_out},
          {"kernel_restarted", e.kernel_restarted},
          {"out_of_memory", e.out_of_memory},
          {"output_truncated", e.output_truncated},
          {"driver", e.driver},
          {"network_events", NetworkEventsToJson(e.network_events)}};
}

StatusOr<Execution> ExecutionFromJson(const json& j) {
  base::JsonFields f(j, "the server's cell result");
  Execution e;
  if (const json* logs = f.Find("logs")) {
    if (!logs->is_object())
      return f.Fault("logs", "is a " + TypeOf(*logs) + ", expected an object");
    base::JsonFields l(*logs, f.what() + ": logs");
    ASSIGN_OR_RETURN(e.stdout_chunks, l.Strings("stdout", std::vector<std::string>{}));
    ASSIGN_OR_RETURN(e.stderr_chunks, l.Strings("stderr", std::vector<std::string>{}));
  }
  if (const json* results = f.Find("results")) {
    if (!results->is_array()) {
      return f.Fault("results", "is a " + TypeOf(*results) + ", expected a list");
    }
    bool have_main = false;
    for (const json& r : *results) {
      ASSIGN_OR_RETURN(CellResult cell, CellResultFromJson(r, f.what() + ": a result"));
      if (cell.is_main_result && std::exchange(have_main, true)) {
        return f.Fault("results", "holds more than one main result");
      }
      e.results.push_back(std::move(cell));
    }
  }
  if (const json* error = f.Find("error")) {
    if (!error->is_object())
      return f.Fault("error", "is a " + TypeOf(*error) + ", expected an object");
    base::JsonFields ef(*error, f.what() + ": error");
    CellError ce;
    ASSIGN_OR_RETURN(ce.name, ef.String("name"));
    ASSIGN_OR_RETURN(ce.value, ef.String("value", ""));
    ASSIGN_OR_RETURN(ce.traceback, ef.String("traceback", ""));
    e.error = std::move(ce);
  }
  ASSIGN_OR_RETURN(e.execution_count,
                   f.Int("execution_count", 0, std::numeric_limits<int64_t>::max(), 0));
  ASSIGN_OR_RETURN(int64_t ms, f.Int("duration_ms", 0, kMaxMillis, 0));
  e.duration = std::chrono::milliseconds(ms);
  ASSIGN_OR_RETURN(e.timed_out, f.Bool("timed_out", false));
  ASSIGN_OR_RETURN(e.kernel_restarted, f.Bool("kernel_restarted", false));
  ASSIGN_OR_RETURN(e.out_of_memory, f.Bool("out_of_memory", false));
  ASSIGN_OR_RETURN(e.output_truncated, f.Bool("output_truncated", false));
  ASSIGN_OR_RETURN(e.driver, f.String("driver", ""));
  e.driver = base::TerminalSafe(e.driver, 64);
  ASSIGN_OR_RETURN(e.network_events, NetworkEventsFromJson(f));
  return e;
}

}  // namespace codebox::api
