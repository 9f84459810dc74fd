// How loaded one `codebox serve` node is, as GET /v1/load tells its peers (api/node_load.h):
// cheap to measure (counters and two /proc reads), so placement can ask two random peers before
// each create it does not keep. A peer's answer is decoded with checked types: a peer is
// trusted more than a box, but not so far that a wrong answer may crash or mislead the node.
#ifndef CODEBOX_SERVER_NODE_LOAD_H_
#define CODEBOX_SERVER_NODE_LOAD_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/node_load.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "server/box_registry.h"

namespace codebox::server {

// The load as GET /v1/load tells it: an API message (api/node_load.h).
using api::NodeLoad;

// Whether a box asking for `driver` can go to a node of this load (kAuto: any node that offers
// a driver).
bool Offers(const NodeLoad& load, DriverKind driver);

// This node's load now.
NodeLoad MeasureLoad(const BoxRegistry& registry, const std::vector<std::string>& drivers);

// The "some avg10=" figure of a /proc/pressure file's text; 0 when absent or malformed.
double ParsePressure(std::string_view text);
// MemAvailable of /proc/meminfo's text in bytes; 0 when absent.
uint64_t ParseMemAvailable(std::string_view text);

// A peer's answer: api::NodeLoadFromJson's checks, and the node name must be a node name
// (box_id.h); drivers this build does not know are left out, not trusted.
StatusOr<NodeLoad> LoadFromJson(const nlohmann::json& json);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_NODE_LOAD_H_
