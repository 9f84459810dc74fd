#include "api/node_load.h"

#include <algorithm>

#include "base/json_fields.h"

namespace codebox::api {

using nlohmann::json;

bool NodeLoad::busy() const {
  return cpu_pressure >= kBusyCpuPressure || memory_pressure >= kBusyMemoryPressure ||
         (memory_available_bytes > 0 && memory_available_bytes < kBusyMemoryAvailable);
}

double NodeLoad::score() const {
  double used = max_boxes == 0 ? 1.0 : static_cast<double>(boxes) / max_boxes;
  return used + (cpu_pressure + memory_pressure) / 100.0 - 0.01 * std::min(pool_ready, 10u);
}

json NodeLoadToJson(const NodeLoad& load) {
  return {{"node", load.node},
          {"incarnation", load.incarnation},
          {"boxes", load.boxes},
          {"max_boxes", load.max_boxes},
          {"pool_ready", load.pool_ready},
          {"cpu_pressure", load.cpu_pressure},
          {"memory_pressure", load.memory_pressure},
          {"memory_available_bytes", load.memory_available_bytes},
          {"drivers", load.drivers},
          {"full", load.full()},
          {"busy", load.busy()},
          {"score", load.score()}};
}

StatusOr<NodeLoad> NodeLoadFromJson(const json& j) {
  if (!j.is_object()) return ProtocolError("a load answer is not a JSON object");
  base::JsonFields f(j, "a load answer");
  NodeLoad load;
  ASSIGN_OR_RETURN(load.node, f.String("node"));
  ASSIGN_OR_RETURN(load.incarnation, f.String("incarnation", ""));
  if (load.incarnation.size() > 16) return f.Fault("incarnation", "is over 16 characters");
  auto count = [&](const char* key, uint32_t* out) -> Status {
    ASSIGN_OR_RETURN(int64_t n, f.Int(key, 0, UINT32_MAX));
    *out = static_cast<uint32_t>(n);
    return Status::Ok();
  };
  RETURN_IF_ERROR(count("boxes", &load.boxes));
  RETURN_IF_ERROR(count("max_boxes", &load.max_boxes));
  RETURN_IF_ERROR(count("pool_ready", &load.pool_ready));
  ASSIGN_OR_RETURN(int64_t available, f.Int("memory_available_bytes", 0, INT64_MAX));
  load.memory_available_bytes = static_cast<uint64_t>(available);
  ASSIGN_OR_RETURN(load.cpu_pressure, f.Number("cpu_pressure", 0, 100));
  ASSIGN_OR_RETURN(load.memory_pressure, f.Number("memory_pressure", 0, 100));
  ASSIGN_OR_RETURN(load.drivers, f.Strings("drivers"));
  if (load.drivers.size() > 8) return f.Fault("drivers", "has more than 8 entries");
  return load;
}

}  // namespace codebox::api
