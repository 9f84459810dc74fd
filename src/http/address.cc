#include "http/address.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace codebox::http {
namespace {

constexpr std::string_view kForms =
    "use unix:/abs/path.sock, HOST:PORT, http://HOST:PORT or [IPv6]:PORT";

Status Bad(std::string_view text, std::string_view why) {
  return InvalidArgument("bad server address '" + std::string(text) + "': " + std::string(why) +
                         " (" + std::string(kForms) + ")");
}

}  // namespace

std::string Address::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool Address::IsLoopback() const {
  if (kind == Kind::kUnix) return true;
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z, an IPv4 loopback address written as IPv6.
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

StatusOr<Address> ParseAddress(std::string_view text) {
  Address a;
  if (text.empty()) return Bad(text, "empty");
  if (text.substr(0, 5) == "unix:") {
    std::string_view path = text.substr(5);
    // "unix:///run/x.sock" as some tools write it.
    while (path.size() > 1 && path.substr(0, 2) == "//") path.remove_prefix(1);
    if (path.empty() || path[0] != '/') return Bad(text, "a unix socket path must be absolute");
    if (path.find('\0') != std::string_view::npos) return Bad(text, "NUL in the path");
    if (path.size() >= 108) return Bad(text, "a unix socket path must be under 108 bytes");
    a.kind = Address::Kind::kUnix;
    a.path = std::string(path);
    return a;
  }
  std::string_view rest = text;
  if (rest.substr(0, 7) == "http://") rest.remove_prefix(7);
  if (rest.substr(0, 8) == "https://") return Bad(text, "https is not supported");
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::string_view host, port;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return Bad(text, "missing ']'");
    host = rest.substr(1, close - 1);
    if (rest.substr(close + 1, 1) != ":") return Bad(text, "missing ':PORT' after ']'");
    port = rest.substr(close + 2);
    in6_addr v6{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &v6) != 1) {
      return Bad(text, "not an IPv6 address in brackets");
    }
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return Bad(text, "missing ':PORT'");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Bad(text, "an IPv6 address needs brackets");
    }
  }
  if (host.empty()) return Bad(text, "missing host");
  for (char c : host) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
              c == '_' || c == '%';
    if (!ok) return Bad(text, "the host has a character other than letters, digits, '.', '-'");
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return Bad(text, "the port must be a number from 0 to 65535");
  }
  a.kind = Address::Kind::kTcp;
  a.host = std::string(host);
  a.port = static_cast<uint16_t>(value);
  return a;
}

std::string DefaultSocketPath() {
  if (geteuid() == 0) return "/run/codebox/codebox.sock";
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/codebox.sock";
  return "/tmp/codebox-" + std::to_string(geteuid()) + "/codebox.sock";
}

}  // namespace codebox::http
