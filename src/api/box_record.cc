#include "api/box_record.h"

#include <cctype>
#include <ctime>

#include "api/egress_record.h"
#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {

namespace {

using nlohmann::json;

// RFC 3339 UTC with seconds: "2026-12-03T12:00:00Z".
std::string UtcSeconds(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

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
            {"created_at", UtcSeconds(b.created_at)},
            {"last_used", UtcSeconds(b.last_used)},
            {"requests", b.requests}};
  if (egress != nullptr) j["egress"] = EgressLogToJson(*egress);
  return j;
}

StatusOr<CreatedBox> CreatedBoxFromJson(const json& j) {
  base::JsonFields f(j, "the server's answer to create box");
  CreatedBox box;
  ASSIGN_OR_RETURN(box.id, f.String("id"));
  // The id goes into every later request's path: only the characters the API makes
  // ("b-<16 hex>.<node>", the node up to 63 of [a-z0-9.-]), and never a ".." segment.
  bool ok =
      box.id.starts_with("b-") && box.id.size() <= 82 && box.id.find("..") == std::string::npos;
  for (char c : box.id) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
  }
  if (!ok) return f.Fault("id", "is not a box id: " + base::TerminalSafe(box.id, 80));
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

}  // namespace codebox::api
