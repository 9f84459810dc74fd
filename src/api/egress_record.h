// A box's egress log as JSON (the "egress" of GET /v1/boxes/{id}, and `codebox run --json`'s):
// one record per connection the box's egress proxy saw. Hosts, reasons and addresses are the
// box's text.
#ifndef CODEBOX_API_EGRESS_RECORD_H_
#define CODEBOX_API_EGRESS_RECORD_H_

#include <nlohmann/json.hpp>
#include <vector>

#include "base/json_fields.h"
#include "codebox/egress.h"
#include "codebox/status.h"

namespace codebox::api {

// {"host", "port", "allowed", "reason", "address", "bytes_up", "bytes_down"}.
nlohmann::json EgressRecordToJson(const EgressRecord& record);
// The whole log: an array of EgressRecordToJson.
nlohmann::json EgressLogToJson(const std::vector<EgressRecord>& records);
// The "egress" field of a box's JSON (absent: none): each field checked, the box's text made
// terminal-safe, at most the last 1000 records (a box keeps no more).
StatusOr<std::vector<EgressRecord>> EgressLogFromJson(const nlohmann::json& box);

// {"host", "port", "rule", "message", "hint"} each: an exec's or a cell's "network_events".
nlohmann::json NetworkEventsToJson(const std::vector<NetworkEvent>& events);
// The "network_events" field of `result` (absent: none): each field checked, the box's text
// made terminal-safe, at most the first 100 events.
StatusOr<std::vector<NetworkEvent>> NetworkEventsFromJson(const base::JsonFields& result);

}  // namespace codebox::api

#endif  // CODEBOX_API_EGRESS_RECORD_H_
