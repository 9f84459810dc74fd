// Box ids that route themselves: "b-<16 hex>.<node>". The node is the `codebox serve` replica
// that holds the box (--node), so any replica can send a request for it to the right one
// without a shared catalog. The first 4 hex digits are that replica's incarnation (random at
// each start): a restarted node tells a box of its former life (box_lost) from one it never
// had (not_found). The other 12 are random. "b-<16 hex>" without a node (a single server, or
// the library's registry) means "this node".
#ifndef CODEBOX_SERVER_BOX_ID_H_
#define CODEBOX_SERVER_BOX_ID_H_

#include <optional>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::server {

inline constexpr size_t kIncarnationHexDigits = 4;
inline constexpr size_t kMaxNodeNameBytes = 63;

// Views into the id given to ParseBoxId, which must outlive them.
struct BoxIdParts {
  std::string_view incarnation;  // 4 hex digits
  std::string_view node;         // "" when the id names none
};

// The parts of a well-formed id, or nullopt: "b-", 16 lower-case hex digits, and optionally
// "." and a node name.
std::optional<BoxIdParts> ParseBoxId(std::string_view id);

// 1..63 characters of [a-z0-9.-] starting and ending with a letter or digit: a DNS label, a
// host name or an IP address fit; nothing that needs escaping in a URL path or a log line.
bool IsNodeName(std::string_view name);
// InvalidArgument naming `flag` and the rule when `name` is not a node name.
Status CheckNodeName(std::string_view name, std::string_view flag);

// The node name when --node is not given: $POD_IP in a Kubernetes pod (set from the downward
// API; $KUBERNETES_SERVICE_HOST tells a pod), else this host's name, lower-cased, with any
// other character turned into '-'.
std::string DefaultNodeName();

// 4 random hex digits.
std::string NewIncarnation();
// A new id for a box of `node` ("" for none) in `incarnation`.
std::string NewBoxId(std::string_view incarnation, std::string_view node);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_BOX_ID_H_
