// One connection a box opened to its egress proxy, served on the host (docs/security.md,
// "Network"): the request read (bounded, with a deadline) and judged by the policy, the name
// resolved by the host, each address judged again, the connection made (with a deadline), then
// bytes relayed both ways within the box's budget, and an audit record of it all. The
// transport that brings the box's connection to the host (the box's channel) is not built
// yet; this works on any stream fd.
//
//   net::EgressBudget budget(limits.max_total_bytes);          // one per box
//   net::EgressRecord r = net::ServeEgressConnection(fd, policy, limits, budget);
//   log(r.host, r.port, r.allowed, r.reason, r.bytes_up, r.bytes_down);
#ifndef CODEBOX_NET_EGRESS_RELAY_H_
#define CODEBOX_NET_EGRESS_RELAY_H_

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codebox/egress.h"
#include "codebox/status.h"
#include "net/egress_policy.h"
#include "net/secrets.h"
#include "net/tls_interception.h"

namespace codebox::net {

struct EgressLimits {
  std::chrono::milliseconds head_timeout{10'000};     // the box must send its request head
  std::chrono::milliseconds resolve_timeout{10'000};  // the host's resolver
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds idle_timeout{120'000};  // no byte either way: closed
  size_t max_head_bytes = 16 << 10;
  uint64_t rate_bytes_per_second = 0;  // per connection, both directions together; 0: unlimited
};

// The bytes a box may move through its proxy, all its connections together.
class EgressBudget {
 public:
  explicit EgressBudget(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  // Takes n bytes; false (and nothing taken) when that would pass the cap.
  bool Take(uint64_t n);
  uint64_t used() const { return used_.load(); }
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  const uint64_t max_bytes_;
  std::atomic<uint64_t> used_{0};
};

// What happened to one connection: for the box's info, the --json result and the server's log.
using EgressRecord = ::codebox::EgressRecord;

// The host's resolver: the addresses for `host` (a normalized name), or an error. Tests pass
// their own (an allowed name that resolves to 127.0.0.1: rebinding).
using Resolver =
    std::function<StatusOr<std::vector<sockaddr_storage>>(const std::string& host, uint16_t port)>;
// getaddrinfo on a thread of its own, waited for at most `timeout`.
Resolver SystemResolver(std::chrono::milliseconds timeout);

// What a box with secrets adds to its proxy (docs/security.md, "Secrets"): the values and
// their hosts, the box's CA that its intercepted connections are served with, and the context
// that checks the upstreams' certificates.
struct SecretEgress {
  SecretInjector injector;
  std::shared_ptr<BoxCertificateAuthority> ca;
  std::shared_ptr<SSL_CTX> upstream;
};

// Serves the box's connection on `box_fd` (not closed here) until it ends. Never throws; every
// wait has a deadline from `limits`. With `secrets`: a plain request's placeholders are
// replaced (or the request refused), a CONNECT to a secret's host is intercepted, and a
// placeholder bound anywhere else ends the connection.
// Told the host and port a connection asks for once the policy allowed them; false refuses it
// all the same (the box's network changed meanwhile).
using AdmitTarget = std::function<bool(const std::string& host, uint16_t port)>;

EgressRecord ServeEgressConnection(int box_fd, const EgressPolicy& policy,
                                   const EgressLimits& limits, EgressBudget& budget,
                                   const Resolver& resolve, const SecretEgress* secrets = nullptr,
                                   const AdmitTarget& admit = {});

// Serves a connection on `fd` (not closed here) that a program made to `target` itself, without
// a proxy request (Go's HTTP client never sends one for a loopback address: ConfinedNetwork's
// forwards): the address judged by the policy, connected (with a deadline) and relayed as
// ServeEgressConnection does. A refused connection is closed without a byte.
EgressRecord ServeDirectConnection(int fd, const sockaddr_storage& target,
                                   const EgressPolicy& policy, const EgressLimits& limits,
                                   EgressBudget& budget);

}  // namespace codebox::net

#endif  // CODEBOX_NET_EGRESS_RELAY_H_
