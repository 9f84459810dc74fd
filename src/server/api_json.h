// What the server's handlers share of JSON beyond the API's messages (those are src/api): a
// pool's status and the dump of a body. Output text is the box's: Dump() turns bytes that are
// not UTF-8 into U+FFFD instead of failing (files are the way to move bytes exactly).
#ifndef CODEBOX_SERVER_API_JSON_H_
#define CODEBOX_SERVER_API_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "server/box_registry.h"

namespace codebox::server {

// A warm pool in /v1/health and /v1/status: spec, image, target, ready, starting, taken,
// last_error.
nlohmann::json PoolJson(const PoolStatus& pool);

// j.dump() with invalid UTF-8 replaced (never throws for text from a box).
std::string Dump(const nlohmann::json& j);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_JSON_H_
