#include "server/api_json.h"

#include <ctime>

namespace codebox::server {

using nlohmann::json;

std::string UtcSeconds(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json CellResultJson(const CellResult& r) {
  json data = json::object();
  for (const auto& [mime, value] : r.data) data[mime] = value;
  return {{"data", std::move(data)}, {"is_main_result", r.is_main_result}};
}

json ExecutionJson(const Execution& e) {
  json results = json::array();
  for (const CellResult& r : e.results) results.push_back(CellResultJson(r));
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
          {"driver", e.driver}};
}

json BoxJson(const BoxRecord& b) {
  return {{"id", b.id},
          {"tenant", b.tenant},
          {"image", b.image},
          {"driver", b.info.driver},
          {"limits", b.info.limits},
          {"limits_not_enforced", b.info.limits_not_enforced},
          {"network", b.info.network},
          {"user", b.info.user},
          {"start", b.info.start},
          {"warnings", b.info.warnings},
          {"state", b.state},
          {"from_pool", b.from_pool},
          {"created_at", UtcSeconds(b.created_at)},
          {"last_used", UtcSeconds(b.last_used)},
          {"requests", b.requests}};
}

json PoolJson(const PoolStatus& p) {
  return {
      {"spec", p.spec},         {"image", p.image}, {"target", p.target},        {"ready", p.ready},
      {"starting", p.starting}, {"taken", p.taken}, {"last_error", p.last_error}};
}

json FileEntryJson(const FileEntry& f) {
  return {{"name", f.name}, {"path", f.path}, {"type", f.type}, {"size", f.size}, {"mode", f.mode}};
}

json EgressRecordJson(const EgressRecord& r) {
  return {{"host", r.host},
          {"port", r.port},
          {"allowed", r.allowed},
          {"reason", r.reason},
          {"address", r.address},
          {"bytes_up", r.bytes_up},
          {"bytes_down", r.bytes_down}};
}

json EgressLogJson(const std::vector<EgressRecord>& records) {
  json out = json::array();
  for (const EgressRecord& r : records) out.push_back(EgressRecordJson(r));
  return out;
}

json ErrorJson(const Status& status) {
  return {{"error",
           {{"code", std::string(StatusCodeName(status.code()))}, {"message", status.message()}}}};
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace codebox::server
