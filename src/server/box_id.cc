#include "server/box_id.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/random.h"
#include "base/text.h"

namespace codebox::server {
namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsAlnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }

}  // namespace

bool IsNodeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNodeNameBytes) return false;
  if (!IsAlnum(name.front()) || !IsAlnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlnum(c) || c == '.' || c == '-'; });
}

Status CheckNodeName(std::string_view name, std::string_view flag) {
  if (IsNodeName(name)) return Status::Ok();
  return InvalidArgument(std::string(flag) + ": '" + base::TerminalSafe(name) +
                         "' is not a node name: 1 to 63 characters of a-z, 0-9, '.' and '-', "
                         "starting and ending with a letter or digit");
}

std::optional<BoxIdParts> ParseBoxId(std::string_view id) {
  if (id.size() < 18 || id.substr(0, 2) != "b-") return std::nullopt;
  if (!std::all_of(id.begin() + 2, id.begin() + 18, IsLowerHex)) return std::nullopt;
  BoxIdParts parts{.incarnation = id.substr(2, kIncarnationHexDigits), .node = {}};
  if (id.size() == 18) return parts;
  if (id[18] != '.' || !IsNodeName(id.substr(19))) return std::nullopt;
  parts.node = id.substr(19);
  return parts;
}

std::string DefaultNodeName() {
  const char* in_kubernetes = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* pod_ip = std::getenv("POD_IP");
  if (in_kubernetes && *in_kubernetes && pod_ip && IsNodeName(pod_ip)) return pod_ip;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  std::string name;
  for (const char* p = host; *p && name.size() < kMaxNodeNameBytes; ++p) {
    char c = (*p >= 'A' && *p <= 'Z') ? static_cast<char>(*p - 'A' + 'a') : *p;
    name += (IsAlnum(c) || c == '.' || c == '-') ? c : '-';
  }
  while (!name.empty() && !IsAlnum(name.back())) name.pop_back();
  while (!name.empty() && !IsAlnum(name.front())) name.erase(0, 1);
  return name.empty() ? "localhost" : name;
}

std::string NewIncarnation() {
  return base::HexEncode(base::RandomBytes(kIncarnationHexDigits / 2));
}

std::string NewBoxId(std::string_view incarnation, std::string_view node) {
  std::string id = "b-" + std::string(incarnation) + base::HexEncode(base::RandomBytes(6));
  if (!node.empty()) id += "." + std::string(node);
  return id;
}

}  // namespace codebox::server
