// The server's own answers as JSON: GET /healthz (Health) and GET /v1/status (ServerStatus),
// with the warm pools and the peer replicas they list. The server's encoders and the clients'
// checked decoders (`codebox status`). Text in them (an image, a pool's last error, a peer's
// error) is as the server sent it: whoever prints it makes it terminal-safe.
#ifndef CODEBOX_API_SERVER_STATUS_H_
#define CODEBOX_API_SERVER_STATUS_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/box_record.h"
#include "codebox/status.h"

namespace codebox::api {

// A warm pool (serve --pool).
struct PoolStatus {
  std::string spec;  // PoolSpec::text
  std::string image;
  uint32_t target = 0;
  uint32_t ready = 0;  // started, prewarmed, waiting
  uint32_t starting = 0;
  uint64_t taken = 0;      // handed out since start
  std::string last_error;  // why the last start failed, or ""
};
// {"spec", "image", "target", "ready", "starting", "taken", "last_error"}.
nlohmann::json PoolStatusToJson(const PoolStatus& pool);
StatusOr<PoolStatus> PoolStatusFromJson(const nlohmann::json& j);

// GET /healthz.
struct Health {
  uint32_t boxes = 0;  // registered, pool and one-shot
  std::vector<PoolStatus> pools;
};
// {"status": "ok", "boxes", "pools"}.
nlohmann::json HealthToJson(const Health& health);
// "status" must be "ok".
StatusOr<Health> HealthFromJson(const nlohmann::json& j);

// Another replica of the cluster, as of this node's last look at it.
struct PeerStatus {
  std::string node;
  std::string address;
  bool up = false;
  std::string error;  // why it is down
  // Its load when last asked (NodeLoad's).
  uint32_t boxes = 0;
  uint32_t max_boxes = 0;
  std::vector<std::string> drivers;
  bool full = false;
  bool busy = false;
};
// {"node", "address", "state": "up"|"down", "boxes", "max_boxes", "drivers", "full", "busy"},
// and "error" when it is down.
nlohmann::json PeerStatusToJson(const PeerStatus& peer);
StatusOr<PeerStatus> PeerStatusFromJson(const nlohmann::json& j);

// GET /v1/status.
struct ServerStatus {
  std::string version;
  std::vector<BoxRecord> boxes;  // the caller's (this node's)
  std::vector<PoolStatus> pools;
  uint32_t max_boxes = 0;
  std::vector<std::string> listen;
  std::string node;
  std::string incarnation;
  std::vector<std::string> drivers;  // what this node offers placement
  std::vector<PeerStatus> peers;
  std::chrono::duration<double> uptime{0};
};
// {"version", "boxes": [BoxToJson...], "pools", "max_boxes", "listen", "node", "incarnation",
//  "drivers", "peers", "uptime_s"}.
nlohmann::json ServerStatusToJson(const ServerStatus& status);
StatusOr<ServerStatus> ServerStatusFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_SERVER_STATUS_H_
