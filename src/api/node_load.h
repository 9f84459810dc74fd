// How loaded one `codebox serve` node is, as GET /v1/load tells its peers (server/node_load.h
// measures it; server/peers.h asks for it). A peer's answer is decoded with checked types: a
// peer is trusted more than a box, but not so far that a wrong answer may crash or mislead the
// node.
#ifndef CODEBOX_API_NODE_LOAD_H_
#define CODEBOX_API_NODE_LOAD_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codebox/status.h"

namespace codebox::api {

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
};

// {"node", "incarnation", "boxes", "max_boxes", "pool_ready", "cpu_pressure",
//  "memory_pressure", "memory_available_bytes", "drivers", and what follows from them: "full",
//  "busy", "score"}.
nlohmann::json NodeLoadToJson(const NodeLoad& load);
// Every field checked for type and range (pressures 0..100, the incarnation at most 16
// characters, at most 8 drivers); "full", "busy" and "score" are not read (they follow from
// the rest). The node name and the drivers are the caller's to judge (server/node_load.h).
StatusOr<NodeLoad> NodeLoadFromJson(const nlohmann::json& j);

}  // namespace codebox::api

#endif  // CODEBOX_API_NODE_LOAD_H_
