#include "api/exec_result.h"

#include <string>
#include <string_view>

#include "api/egress_record.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {
namespace {

using nlohmann::json;

constexpr int64_t kMaxMillis = int64_t{1} << 50;  // ~35,000 years: a number, not a bug
constexpr int64_t kMaxBytes = int64_t{1} << 62;

void PutOutput(const char* name, std::string_view bytes, json* out) {
  const bool text = base::IsValidUtf8(bytes);
  (*out)[name] = text ? std::string(bytes) : base::EncodeBase64(bytes);
  (*out)[std::string(name) + "_encoding"] = text ? "utf-8" : "base64";
}

StatusOr<std::string> GetOutput(const base::JsonFields& f, const char* name) {
  ASSIGN_OR_RETURN(std::string value, f.String(name));
  const std::string encoding_field = std::string(name) + "_encoding";
  ASSIGN_OR_RETURN(std::string encoding, f.String(encoding_field.c_str(), ""));
  if (encoding.empty() || encoding == "utf-8") return value;
  if (encoding != "base64") {
    return f.Fault(encoding_field, "is neither \"utf-8\" nor \"base64\"");
  }
  auto bytes = base::DecodeBase64(value, value.size());
  if (!bytes.ok())
    return f.Fault(name, "is not the base64 its encoding says: " + bytes.status().message());
  return std::move(*bytes);
}

}  // namespace

json ExecResultToJson(const ExecResult& r) {
  json j = {{"exit_code", r.exit_code}, {"signal", r.signal}};
  PutOutput("stdout", r.stdout_data, &j);
  PutOutput("stderr", r.stderr_data, &j);
  j["timed_out"] = r.timed_out;
  j["out_of_memory"] = r.out_of_memory;
  j["output_truncated"] = r.output_truncated;
  j["duration_ms"] = r.duration.count();
  j["driver"] = r.driver;
  if (r.dropped_stdout > 0) j["dropped_stdout"] = r.dropped_stdout;
  if (r.dropped_stderr > 0) j["dropped_stderr"] = r.dropped_stderr;
  j["network_events"] = NetworkEventsToJson(r.network_events);
  return j;
}

StatusOr<ExecResult> ExecResultFromJson(const json& j) {
  base::JsonFields f(j, "the exec result");
  ExecResult r;
  ASSIGN_OR_RETURN(int64_t exit_code, f.Int("exit_code", -1, 255));
  ASSIGN_OR_RETURN(int64_t signal, f.Int("signal", 0, 64, 0));
  r.exit_code = static_cast<int>(exit_code);
  r.signal = static_cast<int>(signal);
  ASSIGN_OR_RETURN(r.stdout_data, GetOutput(f, "stdout"));
  ASSIGN_OR_RETURN(r.stderr_data, GetOutput(f, "stderr"));
  ASSIGN_OR_RETURN(r.timed_out, f.Bool("timed_out"));
  ASSIGN_OR_RETURN(r.out_of_memory, f.Bool("out_of_memory", false));
  ASSIGN_OR_RETURN(r.output_truncated, f.Bool("output_truncated", false));
  ASSIGN_OR_RETURN(int64_t ms, f.Int("duration_ms", 0, kMaxMillis, 0));
  r.duration = std::chrono::milliseconds(ms);
  ASSIGN_OR_RETURN(r.driver, f.String("driver", ""));
  r.driver = base::TerminalSafe(r.driver, 64);
  ASSIGN_OR_RETURN(int64_t dropped_out, f.Int("dropped_stdout", 0, kMaxBytes, 0));
  ASSIGN_OR_RETURN(int64_t dropped_err, f.Int("dropped_stderr", 0, kMaxBytes, 0));
  r.dropped_stdout = static_cast<uint64_t>(dropped_out);
  r.dropped_stderr = static_cast<uint64_t>(dropped_err);
  ASSIGN_OR_RETURN(r.network_events, NetworkEventsFromJson(f));
  return r;
}

}  // namespace codebox::api
