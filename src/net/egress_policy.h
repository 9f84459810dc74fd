// The host's decisions for a box's way out (docs/security.md, "Network"): which host names and
// ports a box may reach, and which resolved addresses it never may. This is the policy half of
// the egress proxy; the relay that applies it is not built yet, and no box has a network.
//
//   auto policy = net::EgressPolicy::Allow({"pypi.org", "*.pythonhosted.org", "10.0.0.5:8080"});
//   net::Decision d = policy->CheckName("files.pythonhosted.org", 443);   // allowed
//   ... resolve the name on the host, then for each address:
//   d = policy->CheckAddress(address, 443);   // refused: loopback, private, link-local, ...
//
// Everything here judges text a box sent (a CONNECT authority, a Host header): names are
// checked character by character, never passed to a resolver unchecked.
#ifndef CODEBOX_NET_EGRESS_POLICY_H_
#define CODEBOX_NET_EGRESS_POLICY_H_

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::net {

// none, allow, open: the public enum (codebox/options.h).
using NetworkMode = ::codebox::NetworkMode;
std::string_view NetworkModeName(NetworkMode mode);
StatusOr<NetworkMode> ParseNetworkMode(std::string_view text);

// One allowlist entry: "example.org", "*.example.org" (any name below it, not the name itself),
// an IP literal ("10.0.0.5", "[fd00::1]"), each with an optional ":port". Without a port it
// allows 80 and 443.
struct HostPattern {
  std::string host;         // lower case; without "*." and brackets
  bool wildcard = false;    // "*.host"
  bool ip_literal = false;  // host is an IPv4 or IPv6 address
  std::optional<uint16_t> port;

  std::string ToString() const;                                  // as it would be written
  bool MatchesName(std::string_view name, uint16_t port) const;  // name: already normalized
  bool MatchesPort(uint16_t port) const;
};

// Errors name the entry and show the accepted forms.
StatusOr<HostPattern> ParseHostPattern(std::string_view text);

// A host name as a box may ask for it, checked and normalized: lower case, no trailing dot,
// labels of letters, digits, '-' and '_' of 1-63 bytes, at most 253 bytes in all. An IP literal
// comes back as written by inet_ntop (IPv6 without brackets). Anything else is an error that
// says what is wrong.
StatusOr<std::string> NormalizeHost(std::string_view host);

// "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 address, split; the host as written
// (NormalizeHost checks it). Errors name the text.
struct HostPort {
  std::string host;
  std::optional<uint16_t> port;
};
StatusOr<HostPort> SplitHostPort(std::string_view text);

// Why an address may never be reached from a box unless the allowlist names it as a literal:
// "loopback", "private", "link-local" (with the cloud metadata address 169.254.169.254),
// "unspecified", "multicast", "broadcast", "carrier-grade NAT", "reserved", "documentation",
// "unique local", "benchmarking"; an IPv4-mapped or NAT64 IPv6 address is judged by its IPv4
// address. nullopt: a public address.
std::optional<std::string> ForbiddenAddressClass(const in_addr& v4);
std::optional<std::string> ForbiddenAddressClass(const in6_addr& v6);

// An address range an operator names ("10.0.0.0/8", "fd00::/8", "192.168.1.5" for one address):
// addresses in it may be reached though their class is forbidden (the server's image pulls:
// `codebox serve --allow-registry-address`). A range of IPv4 addresses also holds their
// IPv4-mapped IPv6 form (::ffff:a.b.c.d).
struct AddressRange {
  int family = AF_INET;             // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // the network, host bits cleared (IPv4 in the first 4)
  int prefix = 32;

  std::string ToString() const;  // "10.0.0.0/8", "fd00::/8"
  bool Contains(const in_addr& address) const;
  bool Contains(const in6_addr& address) const;
};

// ADDR or ADDR/PREFIX; host bits below the prefix are cleared ("192.168.1.5/24" is
// 192.168.1.0/24). Errors name the text and show the forms.
StatusOr<AddressRange> ParseAddressRange(std::string_view text);

struct Decision {
  bool allowed = false;
  std::string reason;  // for the audit log and the box's error: why (not) allowed
};

class EgressPolicy {
 public:
  static EgressPolicy None();
  // Any name and port; addresses of a forbidden class only within `ranges`.
  static EgressPolicy Open(std::vector<AddressRange> ranges = {});
  // Each entry as ParseHostPattern takes it; an error names the first bad one.
  static StatusOr<EgressPolicy> Allow(const std::vector<std::string>& entries);

  NetworkMode mode() const { return mode_; }
  const std::vector<HostPattern>& patterns() const { return patterns_; }
  const std::vector<AddressRange>& ranges() const { return ranges_; }

  // Before resolving: may a box ask for `host` (as it sent it) on `port`?
  Decision CheckName(std::string_view host, uint16_t port) const;
  // After resolving, for each address the host would connect to. An address of a forbidden
  // class is refused unless an allowlist entry names it as a literal (with the port), or it is
  // in one of the policy's ranges (any port).
  Decision CheckAddress(const in_addr& address, uint16_t port) const;
  Decision CheckAddress(const in6_addr& address, uint16_t port) const;

 private:
  EgressPolicy(NetworkMode mode, std::vector<HostPattern> patterns,
               std::vector<AddressRange> ranges = {})
      : mode_(mode), patterns_(std::move(patterns)), ranges_(std::move(ranges)) {}
  Decision CheckAddressText(const std::string& text, std::optional<std::string> forbidden,
                            const AddressRange* in_range, uint16_t port) const;

  NetworkMode mode_;
  std::vector<HostPattern> patterns_;
  std::vector<AddressRange> ranges_;
};

}  // namespace codebox::net

#endif  // CODEBOX_NET_EGRESS_POLICY_H_
