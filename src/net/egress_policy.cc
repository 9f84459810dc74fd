#include "net/egress_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "base/text.h"

namespace codebox::net {
namespace {

constexpr char kPatternForms[] =
    "use a host name (example.org), a wildcard (*.example.org), an IP address (10.0.0.5, "
    "[fd00::1]), each with an optional :PORT (without one: ports 80 and 443)";

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

StatusOr<uint16_t> ParsePort(std::string_view text, std::string_view entry) {
  if (!AllDigits(text) || text.size() > 5) {
    return InvalidArgument("'" + std::string(entry) + "': the port '" + std::string(text) +
                           "' is not a number from 1 to 65535");
  }
  unsigned long value = std::stoul(std::string(text));
  if (value < 1 || value > 65535) {
    return InvalidArgument("'" + std::string(entry) + "': the port " + std::string(text) +
                           " is not from 1 to 65535");
  }
  return static_cast<uint16_t>(value);
}

std::optional<std::string> CanonicalIp(std::string_view text, bool* v6) {
  std::string s(text);
  std::array<unsigned char, 16> bytes{};
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, s.c_str(), bytes.data()) == 1) {
    *v6 = false;
    return std::string(inet_ntop(AF_INET, bytes.data(), out, sizeof out));
  }
  if (inet_pton(AF_INET6, s.c_str(), bytes.data()) == 1) {
    *v6 = true;
    return std::string(inet_ntop(AF_INET6, bytes.data(), out, sizeof out));
  }
  return std::nullopt;
}

bool InRange(uint32_t address, uint32_t network, int prefix) {
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (address & mask) == (network & mask);
}

constexpr uint32_t V4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

std::optional<std::string> ClassOfV4(uint32_t a) {  // a: host byte order
  struct Range {
    uint32_t network;
    int prefix;
    const char* what;
  };
  static constexpr Range kRanges[] = {
      {V4(255, 255, 255, 255), 32, "broadcast"},
      {V4(0, 0, 0, 0), 8, "unspecified"},
      {V4(10, 0, 0, 0), 8, "private"},
      {V4(100, 64, 0, 0), 10, "carrier-grade NAT"},
      {V4(127, 0, 0, 0), 8, "loopback"},
      {V4(169, 254, 0, 0), 16, "link-local"},  // 169.254.169.254: cloud metadata
      {V4(172, 16, 0, 0), 12, "private"},
      {V4(192, 0, 0, 0), 24, "reserved"},
      {V4(192, 0, 2, 0), 24, "documentation"},
      {V4(192, 88, 99, 0), 24, "reserved"},
      {V4(192, 168, 0, 0), 16, "private"},
      {V4(198, 18, 0, 0), 15, "benchmarking"},
      {V4(198, 51, 100, 0), 24, "documentation"},
      {V4(203, 0, 113, 0), 24, "documentation"},
      {V4(224, 0, 0, 0), 4, "multicast"},
      {V4(240, 0, 0, 0), 4, "reserved"},
  };
  for (const Range& r : kRanges) {
    if (InRange(a, r.network, r.prefix)) return std::string(r.what);
  }
  return std::nullopt;
}

uint32_t V4At(const uint8_t* b) { return V4(b[0], b[1], b[2], b[3]); }  // host order

uint32_t V4At(const in6_addr& v6, int offset) {  // 4 bytes of v6 from `offset`, host order
  return V4At(v6.s6_addr + offset);
}

bool StartsWith(const in6_addr& v6, std::initializer_list<uint8_t> prefix, int bits) {
  int i = 0;
  for (uint8_t byte : prefix) {
    int take = std::min(8, bits - i * 8);
    if (take <= 0) break;
    uint8_t mask = static_cast<uint8_t>(0xff << (8 - take));
    if ((v6.s6_addr[i] & mask) != (byte & mask)) return false;
    ++i;
  }
  return true;
}

std::string AddressText(int family, const void* address) {
  char out[INET6_ADDRSTRLEN];
  return inet_ntop(family, address, out, sizeof out);
}

}  // namespace

std::string_view NetworkModeName(NetworkMode mode) {
  switch (mode) {
    case NetworkMode::kNone:
      return "none";
    case NetworkMode::kAllow:
      return "allow";
    case NetworkMode::kOpen:
      return "open";
  }
  return "none";
}

StatusOr<NetworkMode> ParseNetworkMode(std::string_view text) {
  for (NetworkMode m : {NetworkMode::kNone, NetworkMode::kAllow, NetworkMode::kOpen}) {
    if (text == NetworkModeName(m)) return m;
  }
  return InvalidArgument("network '" + std::string(text) +
                         "' is not one of none (no way out, the default), allow (the hosts "
                         "of the allowlist) and open (any public address)");
}

StatusOr<std::string> NormalizeHost(std::string_view host) {
  const std::string shown(host.substr(0, 300));
  if (!host.empty() && host.front() == '[') {
    bool v6 = false;
    auto ip = host.back() == ']' ? CanonicalIp(host.substr(1, host.size() - 2), &v6) : std::nullopt;
    if (!ip || !v6) return InvalidArgument("'" + shown + "' is not an IPv6 address in brackets");
    return *ip;
  }
  bool v6 = false;
  if (auto ip = CanonicalIp(host, &v6)) return *ip;
  std::string name = base::AsciiLower(host);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (name.empty()) return InvalidArgument("the host name is empty");
  if (name.size() > 253) return InvalidArgument("the host name is longer than 253 bytes");
  size_t start = 0;
  std::string_view last_label;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    std::string_view label = std::string_view(name).substr(start, dot - start);
    if (label.empty() || label.size() > 63) {
      return InvalidArgument("'" + shown +
                             "' is not a host name: each dot-separated label "
                             "has 1 to 63 characters");
    }
    for (char c : label) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) {
        return InvalidArgument("'" + base::TerminalSafe(shown, 300) +
                               "' is not a host name: only letters, digits, '-' and '_' "
                               "(internationalized names in their xn-- form)");
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return InvalidArgument("'" + shown +
                             "' is not a host name: a label starts or ends "
                             "with '-'");
    }
    last_label = label;
    start = dot + 1;
  }
  // A resolver reads "2130706433", "0x7f.1" or "127.1" as addresses; no real name ends in a
  // numeric label, so such text is refused rather than left to a resolver's reading.
  if (AllDigits(last_label) || last_label.rfind("0x", 0) == 0) {
    return InvalidArgument("'" + shown +
                           "' looks like a numeric address but is not written "
                           "a.b.c.d; write IPv4 addresses as four decimal numbers");
  }
  return name;
}

StatusOr<HostPort> SplitHostPort(std::string_view text) {
  const std::string shown(text.substr(0, 300));
  HostPort out;
  std::string_view host = text;
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("'" + shown + "': no ']' after the IPv6 address");
    }
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':')
        return InvalidArgument("'" + shown + "': expected :PORT after ']'");
      ASSIGN_OR_RETURN(out.port, ParsePort(host.substr(close + 2), shown));
    }
    host = host.substr(0, close + 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    size_t colon = host.find(':');
    ASSIGN_OR_RETURN(out.port, ParsePort(host.substr(colon + 1), shown));
    host = host.substr(0, colon);
  }
  out.host = std::string(host);
  return out;
}

std::string HostPattern::ToString() const {
  std::string out = wildcard ? "*." + host : host;
  if (ip_literal && host.find(':') != std::string::npos) out = "[" + host + "]";
  if (port) out += ":" + std::to_string(*port);
  return out;
}

bool HostPattern::MatchesPort(uint16_t p) const {
  return port ? *port == p : (p == 80 || p == 443);
}

bool HostPattern::MatchesName(std::string_view name, uint16_t p) const {
  if (!MatchesPort(p)) return false;
  if (!wildcard) return name == host;
  return name.size() > host.size() + 1 && name.substr(name.size() - host.size()) == host &&
         name[name.size() - host.size() - 1] == '.';
}

StatusOr<HostPattern> ParseHostPattern(std::string_view text) {
  const std::string entry(text.substr(0, 300));
  if (text.empty())
    return InvalidArgument(std::string("an allowlist entry is empty: ") + kPatternForms);
  HostPattern pattern;
  std::string_view host = text;
  if (host.rfind("*.", 0) == 0) {
    pattern.wildcard = true;
    host.remove_prefix(2);
  }
  auto split = SplitHostPort(host);
  if (!split.ok()) {
    return InvalidArgument("allowlist entry '" + entry + "': " + split.status().message() + "; " +
                           kPatternForms);
  }
  pattern.port = split->port;
  host = split->host;
  auto normalized = NormalizeHost(host);
  if (!normalized.ok()) {
    return InvalidArgument("allowlist entry '" + entry + "': " + normalized.status().message() +
                           "; " + kPatternForms);
  }
  pattern.host = *normalized;
  bool v6 = false;
  pattern.ip_literal = CanonicalIp(pattern.host, &v6).has_value();
  if (pattern.wildcard && pattern.ip_literal) {
    return InvalidArgument("'" + entry + "': a wildcard takes a name, not an address");
  }
  if (pattern.wildcard && pattern.host.find('.') == std::string::npos) {
    return InvalidArgument("'" + entry +
                           "' is too wide: a wildcard needs a name with a dot "
                           "below it (*.example.org, not *.org)");
  }
  return pattern;
}

std::optional<std::string> ForbiddenAddressClass(const in_addr& v4) {
  return ClassOfV4(ntohl(v4.s_addr));
}

std::optional<std::string> ForbiddenAddressClass(const in6_addr& v6) {
  static const in6_addr kAny = IN6ADDR_ANY_INIT;
  static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
  if (std::memcmp(&v6, &kAny, sizeof v6) == 0) return "unspecified";
  if (std::memcmp(&v6, &kLoopback, sizeof v6) == 0) return "loopback";
  // Addresses that carry an IPv4 address are judged by it: ::ffff:a.b.c.d (mapped),
  // 64:ff9b::a.b.c.d (NAT64), 2002:AABB:CCDD::/48 (6to4).
  if (IN6_IS_ADDR_V4MAPPED(&v6) ||
      StartsWith(v6, {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96)) {
    return ClassOfV4(V4At(v6, 12));
  }
  if (StartsWith(v6, {0x20, 0x02}, 16)) return ClassOfV4(V4At(v6, 2));
  if (StartsWith(v6, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48)) return "private";  // local NAT64
  if (StartsWith(v6, {0x00}, 8)) return "reserved";  // ::/8: IPv4-compatible and the rest
  if (StartsWith(v6, {0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64)) return "reserved";  // discard
  if (StartsWith(v6, {0x20, 0x01, 0x00, 0x00}, 32)) return "reserved";        // Teredo
  if (StartsWith(v6, {0x20, 0x01, 0x0d, 0xb8}, 32)) return "documentation";
  if (StartsWith(v6, {0xfc}, 7)) return "unique local";
  if (StartsWith(v6, {0xfe, 0x80}, 10)) return "link-local";
  if (StartsWith(v6, {0xfe, 0xc0}, 10)) return "private";  // site-local, deprecated
  if (StartsWith(v6, {0xff}, 8)) return "multicast";
  return std::nullopt;
}

std::string AddressRange::ToString() const {
  return AddressText(family, bytes.data()) + "/" + std::to_string(prefix);
}

bool AddressRange::Contains(const in_addr& address) const {
  if (family != AF_INET) return false;
  return InRange(ntohl(address.s_addr), V4At(bytes.data()), prefix);
}

bool AddressRange::Contains(const in6_addr& address) const {
  if (family == AF_INET) {
    return IN6_IS_ADDR_V4MAPPED(&address) &&
           InRange(V4At(address.s6_addr + 12), V4At(bytes.data()), prefix);
  }
  for (int bit = 0; bit < prefix; bit += 8) {
    const int take = std::min(8, prefix - bit);
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - take));
    if ((address.s6_addr[bit / 8] & mask) != (bytes[bit / 8] & mask)) return false;
  }
  return true;
}

StatusOr<AddressRange> ParseAddressRange(std::string_view text) {
  const std::string shown = base::TerminalSafe(std::string(text.substr(0, 100)), 100);
  const std::string forms =
      "; write an address or a range: 10.0.0.5, 10.0.0.0/8, fd00::1, fd00::/8";
  const size_t slash = text.find('/');
  std::string address(text.substr(0, slash));
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  AddressRange range;
  if (inet_pton(AF_INET, address.c_str(), range.bytes.data()) == 1) {
    range.family = AF_INET;
    range.prefix = 32;
  } else if (inet_pton(AF_INET6, address.c_str(), range.bytes.data()) == 1) {
    range.family = AF_INET6;
    range.prefix = 128;
  } else {
    return InvalidArgument("'" + shown + "' is not an IP address or range" + forms);
  }
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    const int most = range.prefix;
    if (!AllDigits(digits) || digits.size() > 3 || std::stoi(std::string(digits)) > most) {
      return InvalidArgument("'" + shown + "': the prefix length is not a number from 0 to " +
                             std::to_string(most) + forms);
    }
    range.prefix = std::stoi(std::string(digits));
  }
  for (int bit = range.prefix; bit < (range.family == AF_INET ? 32 : 128); ++bit) {
    range.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  }
  return range;
}

EgressPolicy EgressPolicy::None() { return EgressPolicy(NetworkMode::kNone, {}); }
EgressPolicy EgressPolicy::Open(std::vector<AddressRange> ranges) {
  return EgressPolicy(NetworkMode::kOpen, {}, std::move(ranges));
}

StatusOr<EgressPolicy> EgressPolicy::Allow(const std::vector<std::string>& entries) {
  std::vector<HostPattern> patterns;
  for (const std::string& entry : entries) {
    ASSIGN_OR_RETURN(HostPattern p, ParseHostPattern(entry));
    patterns.push_back(std::move(p));
  }
  return EgressPolicy(NetworkMode::kAllow, std::move(patterns));
}

Decision EgressPolicy::CheckName(std::string_view host, uint16_t port) const {
  if (mode_ == NetworkMode::kNone) {
    return {false, "this box has no network (network: none); allow hosts to reach them"};
  }
  auto name = NormalizeHost(host);
  if (!name.ok()) return {false, name.status().message()};
  const std::string where = *name + ":" + std::to_string(port);
  if (port == 0) return {false, where + ": port 0 is not a port"};
  if (mode_ == NetworkMode::kOpen) return {true, where + ": network is open"};
  for (const HostPattern& p : patterns_) {
    if (p.MatchesName(*name, port)) return {true, where + ": allowed by " + p.ToString()};
  }
  std::string allowed;
  for (const HostPattern& p : patterns_) allowed += (allowed.empty() ? "" : ", ") + p.ToString();
  return {false, where + " is not in this box's allowlist (" +
                     (allowed.empty() ? std::string("empty") : allowed) + ")"};
}

Decision EgressPolicy::CheckAddressText(const std::string& text,
                                        std::optional<std::string> forbidden,
                                        const AddressRange* in_range, uint16_t port) const {
  const std::string where = text + " port " + std::to_string(port);
  if (mode_ == NetworkMode::kNone) return {false, "this box has no network (network: none)"};
  if (!forbidden) return {true, where + " is a public address"};
  if (in_range != nullptr) {
    return {true, where + " (" + *forbidden + ") is allowed by the range " + in_range->ToString()};
  }
  for (const HostPattern& p : patterns_) {
    if (p.ip_literal && p.host == text && p.MatchesPort(port)) {
      return {true, where + " (" + *forbidden + ") is allowed by its literal " + p.ToString()};
    }
  }
  return {false, where + ": a " + *forbidden +
                     " address, which a box may not reach (unless the allowlist names it as "
                     "an address)"};
}

Decision EgressPolicy::CheckAddress(const in_addr& address, uint16_t port) const {
  auto range = std::find_if(ranges_.begin(), ranges_.end(),
                            [&](const AddressRange& r) { return r.Contains(address); });
  return CheckAddressText(AddressText(AF_INET, &address), ForbiddenAddressClass(address),
                          range == ranges_.end() ? nullptr : &*range, port);
}

Decision EgressPolicy::CheckAddress(const in6_addr& address, uint16_t port) const {
  auto range = std::find_if(ranges_.begin(), ranges_.end(),
                            [&](const AddressRange& r) { return r.Contains(address); });
  return CheckAddressText(AddressText(AF_INET6, &address), ForbiddenAddressClass(address),
                          range == ranges_.end() ? nullptr : &*range, port);
}

}  // namespace codebox::net
