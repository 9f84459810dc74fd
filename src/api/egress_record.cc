#include "api/egress_record.h"

#include <cstdint>
#include <string>

#include "base/json_fields.h"
#include "base/text.h"
#include "codebox/options.h"

namespace codebox::api {

using nlohmann::json;

json EgressRecordToJson(const EgressRecord& r) {
  return {{"host", r.host},
          {"port", r.port},
          {"allowed", r.allowed},
          {"reason", r.reason},
          {"address", r.address},
          {"bytes_up", r.bytes_up},
          {"bytes_down", r.bytes_down},
          {"secrets", r.secrets}};  // names only
}

json EgressLogToJson(const std::vector<EgressRecord>& records) {
  json out = json::array();
  for (const EgressRecord& r : records) out.push_back(EgressRecordToJson(r));
  return out;
}

StatusOr<std::vector<EgressRecord>> EgressLogFromJson(const json& j) {
  base::JsonFields box(j, "the server's box info");
  const json* log = box.Find("egress");
  if (log == nullptr) return std::vector<EgressRecord>{};
  if (!log->is_array()) return box.Fault("egress", "is not an array");
  constexpr size_t kMaxRecords = 1000;  // a box keeps no more (Box::EgressLog)
  const size_t skip = log->size() > kMaxRecords ? log->size() - kMaxRecords : 0;
  std::vector<EgressRecord> out;
  for (size_t i = skip; i < log->size(); ++i) {
    if (!(*log)[i].is_object()) return box.Fault("egress", "holds a record that is not an object");
    base::JsonFields f((*log)[i], "the server's egress record");
    EgressRecord r;
    ASSIGN_OR_RETURN(std::string host, f.String("host"));
    r.host = base::TerminalSafe(host, 300);
    ASSIGN_OR_RETURN(int64_t port, f.Int("port", 0, 65535));
    r.port = static_cast<uint16_t>(port);
    ASSIGN_OR_RETURN(r.allowed, f.Bool("allowed"));
    ASSIGN_OR_RETURN(std::string reason, f.String("reason", ""));
    r.reason = base::TerminalSafe(reason, 1000);
    ASSIGN_OR_RETURN(std::string address, f.String("address", ""));
    r.address = base::TerminalSafe(address, 100);
    ASSIGN_OR_RETURN(int64_t up, f.Int("bytes_up", 0, INT64_MAX, 0));
    ASSIGN_OR_RETURN(int64_t down, f.Int("bytes_down", 0, INT64_MAX, 0));
    r.bytes_up = static_cast<uint64_t>(up);
    r.bytes_down = static_cast<uint64_t>(down);
    if (const json* names = f.Find("secrets"); names != nullptr && names->is_array()) {
      for (const json& name : *names) {
        if (name.is_string() && r.secrets.size() < kMaxSecrets) {
          r.secrets.push_back(base::TerminalSafe(name.get<std::string>(), 64));
        }
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

json NetworkEventsToJson(const std::vector<NetworkEvent>& events) {
  json out = json::array();
  for (const NetworkEvent& e : events) {
    out.push_back({{"host", e.host},
                   {"port", e.port},
                   {"rule", e.rule},
                   {"message", e.message},
                   {"hint", e.hint}});
  }
  return out;
}

StatusOr<std::vector<NetworkEvent>> NetworkEventsFromJson(const base::JsonFields& result) {
  const json* events = result.Find("network_events");
  if (events == nullptr) return std::vector<NetworkEvent>{};
  if (!events->is_array()) return result.Fault("network_events", "is not an array");
  constexpr size_t kMaxEvents = 100;
  std::vector<NetworkEvent> out;
  for (size_t i = 0; i < events->size() && i < kMaxEvents; ++i) {
    if (!(*events)[i].is_object()) {
      return result.Fault("network_events", "holds an event that is not an object");
    }
    base::JsonFields f((*events)[i], "the server's network event");
    NetworkEvent e;
    ASSIGN_OR_RETURN(std::string host, f.String("host", ""));
    e.host = base::TerminalSafe(host, 300);
    ASSIGN_OR_RETURN(int64_t port, f.Int("port", 0, 65535, 0));
    e.port = static_cast<uint16_t>(port);
    ASSIGN_OR_RETURN(std::string rule, f.String("rule"));
    e.rule = base::TerminalSafe(rule, 32);
    ASSIGN_OR_RETURN(std::string message, f.String("message", ""));
    e.message = base::TerminalSafe(message, 1000);
    ASSIGN_OR_RETURN(std::string hint, f.String("hint", ""));
    e.hint = base::TerminalSafe(hint, 1000);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace codebox::api
