#include "api/box_record.h"

#include <cctype>
#include <cstdio>
#include <ctime>

#include "api/egress_record.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {

namespace {

using nlohmann::json;

// The id goes into every later request's path: only the characters the API makes
// ("b-<16 hex>.<node>", the node up to 63 of [a-z0-9.-]), and never a ".." segment.
Status CheckBoxId(const base::JsonFields& f, const std::string& id) {
  bool ok = id.starts_with("b-") && id.size() <= 82 && id.find("..") == std::string::npos;
  for (char c : id) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
  }
  if (!ok) return f.Fault("id", "is not a box id: " + base::TerminalSafe(id, 80));
  return Status::Ok();
}

// UtcSecondsText's form back, exactly.
StatusOr<std::chrono::system_clock::time_point> UtcSecondsField(const base::JsonFields& f,
                                                                const char* key) {
  ASSIGN_OR_RETURN(std::string text, f.String(key));
  std::tm tm{};
  char z = 0;
  int n = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon,
                      &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z);
  if (n == 7 && z == 'Z' && text.size() == 20) {
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    auto t = std::chrono::system_clock::from_time_t(timegm(&tm));
    if (UtcSecondsText(t) == text) return t;
  }
  return f.Fault(key, "is not an RFC 3339 UTC time to the second: " + base::TerminalSafe(text, 40));
}

}  // namespace

std::string UtcSecondsText(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json BoxToJson(const BoxRecord& b, const std::vector<EgressRecord>* egress) {
  json j = {{"id", b.id},
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
            {"cpus", b.cpus},
            {"memory_mib", b.memory_mib},
            {"disk_mib", b.disk_mib},
            {"created_at", UtcSecondsText(b.created_at)},
            {"last_used", UtcSecondsText(b.last_used)},
            {"requests", b.requests}};
  if (egress != nullptr) j["egress"] = EgressLogToJson(*egress);
  return j;
}

StatusOr<CreatedBox> CreatedBoxFromJson(const json& j) {
  base::JsonFields f(j, "the server's answer to create box");
  CreatedBox box;
  ASSIGN_OR_RETURN(box.id, f.String("id"));
  RETURN_IF_ERROR(CheckBoxId(f, box.id));
  ASSIGN_OR_RETURN(box.info.driver, f.String("driver"));
  box.info.driver = base::TerminalSafe(box.info.driver, 64);
  ASSIGN_OR_RETURN(box.info.limits, f.Strings("limits", std::vector<std::string>{}));
  ASSIGN_OR_RETURN(box.info.limits_not_enforced,
                   f.Strings("limits_not_enforced", std::vector<std::string>{}));
  ASSIGN_OR_RETURN(std::string network, f.String("network", ""));
  if (!network.empty()) box.info.network = base::TerminalSafe(network, 4096);
  ASSIGN_OR_RETURN(std::string user, f.String("user", ""));
  if (!user.empty()) box.info.user = base::TerminalSafe(user, 4096);
  ASSIGN_OR_RETURN(std::string start, f.String("start", ""));
  box.info.start = base::TerminalSafe(start, 128);
  ASSIGN_OR_RETURN(box.info.warnings, f.Strings("warnings", std::vector<std::string>{}));
  for (std::string& w : box.info.warnings) w = base::TerminalSafe(w, 4096);
  return box;
}

StatusOr<BoxRecord> BoxFromJson(const json& j) {
  base::JsonFields f(j, "the server's box");
  BoxRecord b;
  ASSIGN_OR_RETURN(b.id, f.String("id"));
  RETURN_IF_ERROR(CheckBoxId(f, b.id));
  ASSIGN_OR_RETURN(b.tenant, f.String("tenant"));
  ASSIGN_OR_RETURN(b.image, f.String("image"));
  ASSIGN_OR_RETURN(b.info.driver, f.String("driver"));
  ASSIGN_OR_RETURN(b.info.limits, f.Strings("limits"));
  ASSIGN_OR_RETURN(b.info.limits_not_enforced, f.Strings("limits_not_enforced"));
  ASSIGN_OR_RETURN(b.info.network, f.String("network"));
  ASSIGN_OR_RETURN(b.info.user, f.String("user"));
  ASSIGN_OR_RETURN(b.info.start, f.String("start"));
  ASSIGN_OR_RETURN(b.info.warnings, f.Strings("warnings"));
  ASSIGN_OR_RETURN(b.state, f.String("state"));
  if (b.state != "idle" && b.state != "busy") {
    return f.Fault("state", "is neither \"idle\" nor \"busy\"");
  }
  ASSIGN_OR_RETURN(b.from_pool, f.Bool("from_pool"));
  // Absent from an older server's answer: 0, "not said".
  ASSIGN_OR_RETURN(b.cpus, f.Number("cpus", 0, 1 << 20, 0));
  ASSIGN_OR_RETURN(int64_t memory_mib, f.Int("memory_mib", 0, int64_t{1} << 40, 0));
  ASSIGN_OR_RETURN(int64_t disk_mib, f.Int("disk_mib", 0, int64_t{1} << 40, 0));
  b.memory_mib = static_cast<uint64_t>(memory_mib);
  b.disk_mib = static_cast<uint64_t>(disk_mib);
  ASSIGN_OR_RETURN(b.created_at, UtcSecondsField(f, "created_at"));
  ASSIGN_OR_RETURN(b.last_used, UtcSecondsField(f, "last_used"));
  ASSIGN_OR_RETURN(int64_t requests, f.Int("requests", 0, INT64_MAX));
  b.requests = static_cast<uint64_t>(requests);
  return b;
}

json BoxListToJson(const BoxList& list) {
  json boxes = json::array();
  for (const BoxRecord& b : list.boxes) boxes.push_back(BoxToJson(b));
  json j = {{"boxes", std::move(boxes)}};
  if (!list.unreachable.empty()) j["unreachable"] = list.unreachable;
  return j;
}

StatusOr<BoxList> BoxListFromJson(const json& j) {
  base::JsonFields f(j, "the server's box list");
  BoxList list;
  ASSIGN_OR_RETURN(list.boxes, f.ObjectsOf("boxes", kMaxListedBoxes, true, BoxFromJson));
  ASSIGN_OR_RETURN(list.unreachable, f.Strings("unreachable", std::vector<std::string>{}));
  return list;
}

}  // namespace codebox::api
