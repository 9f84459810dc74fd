#include "server/api_json.h"

namespace codebox::server {

using nlohmann::json;

json PoolJson(const PoolStatus& p) {
  return {
      {"spec", p.spec},         {"image", p.image}, {"target", p.target},        {"ready", p.ready},
      {"starting", p.starting}, {"taken", p.taken}, {"last_error", p.last_error}};
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace codebox::server
