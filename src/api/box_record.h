// A box as JSON (POST /v1/boxes, GET /v1/boxes and /v1/boxes/{id}): the server's record of a
// box and its encoder, and the clients' checked decoder of what they need of a created box.
#ifndef CODEBOX_API_BOX_RECORD_H_
#define CODEBOX_API_BOX_RECORD_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codebox/box.h"
#include "codebox/egress.h"
#include "codebox/status.h"

namespace codebox::api {

// What `GET /v1/boxes/{id}` shows.
struct BoxRecord {
  std::string id;      // "b-<16 hex>.<node>" (server/box_id.h; not guessable, never reused)
  std::string tenant;  // whose box it is (server/tenants.h)
  std::string image;
  BoxInfo info;       // driver, limits, limits_not_enforced
  std::string state;  // "idle", "busy"
  bool from_pool = false;
  std::chrono::system_clock::time_point created_at;
  std::chrono::system_clock::time_point last_used;
  uint64_t requests = 0;
};

// {"id", "tenant", "image", "driver", "limits", "limits_not_enforced", "network", "user",
//  "start", "warnings", "state", "from_pool", "created_at", "last_used" (RFC 3339 UTC to the
//  second), "requests"}; and "egress" (EgressLogToJson) when `egress` is given, as
// GET /v1/boxes/{id} gives it.
nlohmann::json BoxToJson(const BoxRecord& record,
                         const std::vector<EgressRecord>* egress = nullptr);

// What a client keeps of BoxToJson's answer to POST /v1/boxes: the id and what the box
// enforces.
struct CreatedBox {
  std::string id;
  BoxInfo info;
};
// The id must look like one the API makes (it goes into every later request's path); the
// box's text (driver, network, user, start, warnings) is made terminal-safe.
StatusOr<CreatedBox> CreatedBoxFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_BOX_RECORD_H_
