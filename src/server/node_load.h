// How loaded one `codebox serve` node is, as GET /v1/load tells its peers: cheap to measure
// (counters and two /proc reads), so placement can ask two random peers before each create
// it does not keep. A peer's answer is decoded with checked types: a peer is trusted more
// than a box, but not so far that a wrong answer may crash or mislead the node.
#ifndef CODEBOX_SERVER_NODE_LOAD_H_
#define CODEBOX_SERVER_NODE_LOAD_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"
#include "server/box_registry.h"

namespace codebox::server {

// A node is busy past these: its boxes would run slowly, so new ones go elsewhere when a peer
// is less loaded.
inline constexpr double kBusyCpuPressure = 80;     // percent of the last 10 s stalled on CPU
inline constexpr double kBusyMemoryPressure = 20;  // percent stalled on memory
inline constexpr uint64_t kBusyMemoryAvailable = 256ull << 20;

struct NodeLoad {
  std::string node;
  std::string incarnation;
  uint32_t boxes = 0;  // registered, pool and one-shot
  uint32_t max_boxes = 0;
  uint32_t pool_ready = 0;  // pool boxes waiting to be taken
  double cpu_pressure = 0;  // /proc/pressure/cpu "some avg10", percent (0 without PSI)
  double memory_pressure = 0;
  uint64_t memory_available_bytes = 0;  // MemAvailable
  std::vector<std::string> drivers;     // what the node runs for placement: "jail", "vm"

  bool full() const { return boxes >= max_boxes; }
  bool busy() const;
  // Lower is better: the share of box slots used plus the pressures, less a little per ready
  // pool box (a box from a pool starts in milliseconds).
  double score() const;
  // Whether a box asking for `driver` can go here (kAuto: any node).
  bool Offers(DriverKind driver) const;
};

// This node's load now.
NodeLoad MeasureLoad(const BoxRegistry& registry, const std::vector<std::string>& drivers);

// The "some avg10=" figure of a /proc/pressure file's text; 0 when absent or malformed.
double ParsePressure(std::string_view text);
// MemAvailable of /proc/meminfo's text in bytes; 0 when absent.
uint64_t ParseMemAvailable(std::string_view text);

nlohmann::json LoadJson(const NodeLoad& load);
// A peer's answer: every field checked for type and range; the node name must be a node name.
StatusOr<NodeLoad> LoadFromJson(const nlohmann::json& json);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_NODE_LOAD_H_
