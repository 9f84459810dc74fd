// A network namespace whose only way out is the host's egress proxy: the network of the image
// pulls `codebox serve` makes for its clients (docs/images.md, "Pulls for a server's
// clients"). A program started in it (base::Command::net_namespace_fd) has loopback and no
// other interface, route or resolver; in the namespace's 127.0.0.1 listens an HTTP proxy (its
// proxy_url()) whose every connection the host serves with ServeEgressConnection under the
// given EgressPolicy, as it serves a box's (docs/security.md, "Network"): names checked, then
// resolved by the host, and every address judged right before the host connects to it. Only
// programs in the namespace can reach the proxy.
//
// Go's HTTP client (skopeo) never uses a proxy for a loopback address or "localhost": a
// connection to one stays in the namespace and finds nothing there, unless `forwards` names
// that address and port, whose connections the host relays to its own same address
// (ServeDirectConnection), again only when the policy allows the address.
//
//   auto network = net::ConfinedNetwork::Start({.policy = net::EgressPolicy::Open()});
//   command.net_namespace_fd = (*network)->namespace_fd();
//   command.env.push_back("HTTPS_PROXY=" + (*network)->proxy_url());
//   ... run it; then (*network)->Stop() gives every connection's record.
//
// Needs CAP_SYS_ADMIN (a new network namespace): root.
#ifndef CODEBOX_NET_CONFINED_NETWORK_H_
#define CODEBOX_NET_CONFINED_NETWORK_H_

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codebox/status.h"
#include "net/egress_policy.h"
#include "net/egress_relay.h"

namespace codebox::net {

struct ConfinedNetworkOptions {
  EgressPolicy policy = EgressPolicy::Open();
  EgressLimits limits = {};
  uint64_t max_bytes = UINT64_MAX;  // every connection together
  uint32_t max_connections = 32;    // at once; more are closed as they come
  // Loopback addresses with their ports (127.0.0.1:5000, [::1]:5000) that programs in the
  // namespace connect to directly, relayed to the host's own same address.
  std::vector<sockaddr_storage> forwards = {};
};

class ConfinedNetwork {
 public:
  // The namespace, its loopback up, the proxy and the forwards listening in it, and a thread
  // that serves them. An error says which step failed (EPERM without CAP_SYS_ADMIN).
  static StatusOr<std::unique_ptr<ConfinedNetwork>> Start(ConfinedNetworkOptions options);
  ~ConfinedNetwork();  // Stop()

  int namespace_fd() const;
  std::string proxy_url() const;  // "http://127.0.0.1:PORT", in the namespace
  // What a program in the namespace gets for the proxy: HTTPS_PROXY, HTTP_PROXY and their
  // lower-case forms set to proxy_url(), and NO_PROXY empty.
  std::vector<std::string> ProxyEnvironment() const;

  // Stops accepting, ends the connections still open, waits for them, and returns the record
  // of every connection served (in the order they ended). Idempotent: later calls return the
  // same records.
  std::vector<EgressRecord> Stop();

  struct State;

 private:
  explicit ConfinedNetwork(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace codebox::net

#endif  // CODEBOX_NET_CONFINED_NETWORK_H_
