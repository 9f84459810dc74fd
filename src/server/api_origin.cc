#include "server/api_origin.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "base/json.h"
#include "base/text.h"

namespace codebox::server {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// The host of "name", "name:port", "[v6]" or "[v6]:port"; "" when malformed.
std::string HostPart(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && AllDigits(rest.substr(1)))) return "";
    return std::string(host.substr(1, close - 1));
  }
  size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) {
    if (!AllDigits(host.substr(colon + 1))) return "";
    host = host.substr(0, colon);
  }
  return std::string(host);
}

}  // namespace

bool IsLoopbackNameOrIpLiteral(std::string_view host) {
  std::string name = base::AsciiLower(HostPart(host));
  if (name.empty()) return false;
  if (name == "localhost") return true;
  // An IP literal names no one's DNS: a rebinding attack needs a name.
  unsigned char addr[16];
  return inet_pton(AF_INET, name.c_str(), addr) == 1 ||
         inet_pton(AF_INET6, name.c_str(), addr) == 1;
}

std::string RefusedOrigin(const http::Request& request, bool tokens_required) {
  const std::string& host = request.Header("host");
  const std::string& origin = request.Header("origin");
  if (!origin.empty()) {
    std::string o = base::AsciiLower(origin), h = base::AsciiLower(host);
    if (h.empty() || (o != "http://" + h && o != "https://" + h)) {
      return "Origin " + base::Excerpt(origin) + " is not this server's own (http://" +
             base::Excerpt(host) + "): a page of another site may not use this API";
    }
  }
  if (!tokens_required && !host.empty() && !IsLoopbackNameOrIpLiteral(host)) {
    return "Host " + base::Excerpt(host) +
           " is not a loopback name or an IP address, and this server has no tokens: use "
           "http://127.0.0.1:PORT or http://localhost:PORT, or start it with --token-file";
  }
  return "";
}

}  // namespace codebox::server
