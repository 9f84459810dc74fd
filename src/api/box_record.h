// A box as JSON (POST /v1/boxes, GET /v1/boxes and /v1/boxes/{id}): the server's record of a
// box and its encoder; the clients' checked decoders of a whole record, of what they need of a
// created box, and of a box list.
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
  // Its size as created (BoxOptions cpus, memory_mib, disk_mib); 0 from a server that did not
  // say.
  double cpus = 0;
  uint64_t memory_mib = 0;
  uint64_t disk_mib = 0;
  std::chrono::system_clock::time_point created_at;
  std::chrono::system_clock::time_point last_used;
  uint64_t requests = 0;
};

// {"id", "tenant", "image", "driver", "limits", "limits_not_enforced", "network", "user",
//  "start", "warnings", "state", "from_pool", "cpus", "memory_mib", "disk_mib", "created_at",
//  "last_used" (RFC 3339 UTC to the second), "requests"}; and "egress" (EgressLogToJson) when `egress` is given, as
// GET /v1/boxes/{id} gives it.
nlohmann::json BoxToJson(const BoxRecord& record,
                         const std::vector<EgressRecord>* egress = nullptr);
// The checked decoder of BoxToJson's shape, every field but "egress" (EgressLogFromJson reads
// that). The id must look like one the API makes; the text is as the server sent it (a box's
// image, network, warnings): whoever prints it makes it terminal-safe.
StatusOr<BoxRecord> BoxFromJson(const nlohmann::json& j);

// created_at and last_used as they go on the wire: RFC 3339 UTC to the second
// ("2026-12-03T12:00:00Z").
std::string UtcSecondsText(std::chrono::system_clock::time_point t);

// What a client keeps of BoxToJson's answer to POST /v1/boxes: the id and what the box
// enforces.
struct CreatedBox {
  std::string id;
  BoxInfo info;
};
// The id must look like one the API makes (it goes into every later request's path); the
// box's text (driver, network, user, start, warnings) is made terminal-safe.
StatusOr<CreatedBox> CreatedBoxFromJson(const nlohmann::json& j);

// GET /v1/boxes: the boxes the caller may see; on a replica with peers, every node's, and the
// peers that did not answer, each "<node>: <why>".
struct BoxList {
  std::vector<BoxRecord> boxes;
  std::vector<std::string> unreachable;
};
// {"boxes": [BoxToJson...]}, and "unreachable" when a peer did not answer.
nlohmann::json BoxListToJson(const BoxList& list);
// Each box by BoxFromJson; at most kMaxListedBoxes of them.
StatusOr<BoxList> BoxListFromJson(const nlohmann::json& j);
inline constexpr size_t kMaxListedBoxes = 1 << 20;

}  // namespace codebox::api

#endif  // CODEBOX_API_BOX_RECORD_H_
