#include "api/server_status.h"

#include <cstdint>
#include <string>

#include "base/json_fields.h"

namespace codebox::api {
namespace {

using nlohmann::json;

constexpr size_t kMaxPools = 1 << 12;
constexpr size_t kMaxPeers = 1 << 12;
constexpr double kMaxUptimeSeconds = 1e12;  // ~30,000 years: a number, not a bug

StatusOr<uint32_t> Count(const base::JsonFields& f, const char* key) {
  ASSIGN_OR_RETURN(int64_t n, f.Int(key, 0, UINT32_MAX));
  return static_cast<uint32_t>(n);
}

json PoolsJson(const std::vector<PoolStatus>& pools) {
  json out = json::array();
  for (const PoolStatus& pool : pools) out.push_back(PoolStatusToJson(pool));
  return out;
}

}  // namespace

json PoolStatusToJson(const PoolStatus& p) {
  return {
      {"spec", p.spec},         {"image", p.image}, {"target", p.target},        {"ready", p.ready},
      {"starting", p.starting}, {"taken", p.taken}, {"last_error", p.last_error}};
}

StatusOr<PoolStatus> PoolStatusFromJson(const json& j) {
  base::JsonFields f(j, "the server's pool");
  PoolStatus p;
  ASSIGN_OR_RETURN(p.spec, f.String("spec"));
  ASSIGN_OR_RETURN(p.image, f.String("image"));
  ASSIGN_OR_RETURN(p.target, Count(f, "target"));
  ASSIGN_OR_RETURN(p.ready, Count(f, "ready"));
  ASSIGN_OR_RETURN(p.starting, Count(f, "starting"));
  ASSIGN_OR_RETURN(int64_t taken, f.Int("taken", 0, INT64_MAX));
  p.taken = static_cast<uint64_t>(taken);
  ASSIGN_OR_RETURN(p.last_error, f.String("last_error", ""));
  return p;
}

json HealthToJson(const Health& h) {
  return {{"status", "ok"}, {"boxes", h.boxes}, {"pools", PoolsJson(h.pools)}};
}

StatusOr<Health> HealthFromJson(const json& j) {
  base::JsonFields f(j, "the server's health");
  ASSIGN_OR_RETURN(std::string status, f.String("status"));
  if (status != "ok") return f.Fault("status", "is not \"ok\"");
  Health h;
  ASSIGN_OR_RETURN(h.boxes, Count(f, "boxes"));
  ASSIGN_OR_RETURN(h.pools, f.ObjectsOf("pools", kMaxPools, true, PoolStatusFromJson));
  return h;
}

json PeerStatusToJson(const PeerStatus& p) {
  json j = {{"node", p.node},
            {"address", p.address},
            {"state", p.up ? "up" : "down"},
            {"boxes", p.boxes},
            {"max_boxes", p.max_boxes},
            {"drivers", p.drivers},
            {"full", p.full},
            {"busy", p.busy}};
  if (!p.up) j["error"] = p.error;
  return j;
}

StatusOr<PeerStatus> PeerStatusFromJson(const json& j) {
  base::JsonFields f(j, "the server's peer");
  PeerStatus p;
  ASSIGN_OR_RETURN(p.node, f.String("node"));
  ASSIGN_OR_RETURN(p.address, f.String("address"));
  ASSIGN_OR_RETURN(std::string state, f.String("state"));
  if (state != "up" && state != "down") return f.Fault("state", "is neither \"up\" nor \"down\"");
  p.up = state == "up";
  ASSIGN_OR_RETURN(p.error, f.String("error", ""));
  ASSIGN_OR_RETURN(p.boxes, Count(f, "boxes"));
  ASSIGN_OR_RETURN(p.max_boxes, Count(f, "max_boxes"));
  ASSIGN_OR_RETURN(p.drivers, f.Strings("drivers"));
  ASSIGN_OR_RETURN(p.full, f.Bool("full"));
  ASSIGN_OR_RETURN(p.busy, f.Bool("busy"));
  return p;
}

json ServerStatusToJson(const ServerStatus& s) {
  json boxes = json::array();
  for (const BoxRecord& b : s.boxes) boxes.push_back(BoxToJson(b));
  json peers = json::array();
  for (const PeerStatus& p : s.peers) peers.push_back(PeerStatusToJson(p));
  return {{"version", s.version},         {"boxes", std::move(boxes)},
          {"pools", PoolsJson(s.pools)},  {"max_boxes", s.max_boxes},
          {"listen", s.listen},           {"node", s.node},
          {"incarnation", s.incarnation}, {"drivers", s.drivers},
          {"peers", std::move(peers)},    {"uptime_s", s.uptime.count()}};
}

StatusOr<ServerStatus> ServerStatusFromJson(const json& j) {
  base::JsonFields f(j, "the server's status");
  ServerStatus s;
  ASSIGN_OR_RETURN(s.version, f.String("version"));
  ASSIGN_OR_RETURN(s.boxes, f.ObjectsOf("boxes", kMaxListedBoxes, true, BoxFromJson));
  ASSIGN_OR_RETURN(s.pools, f.ObjectsOf("pools", kMaxPools, true, PoolStatusFromJson));
  ASSIGN_OR_RETURN(s.max_boxes, Count(f, "max_boxes"));
  ASSIGN_OR_RETURN(s.listen, f.Strings("listen"));
  ASSIGN_OR_RETURN(s.node, f.String("node", ""));
  ASSIGN_OR_RETURN(s.incarnation, f.String("incarnation", ""));
  ASSIGN_OR_RETURN(s.drivers, f.Strings("drivers", std::vector<std::string>{}));
  ASSIGN_OR_RETURN(s.peers, f.ObjectsOf("peers", kMaxPeers, false, PeerStatusFromJson));
  ASSIGN_OR_RETURN(double uptime, f.Number("uptime_s", 0, kMaxUptimeSeconds));
  s.uptime = std::chrono::duration<double>(uptime);
  return s;
}

}  // namespace codebox::api
