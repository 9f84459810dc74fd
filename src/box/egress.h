// The host half of a box's network (docs/security.md, "Network"), made only for a box with a
// network policy. It keeps kMaxConnections egress_accept streams open on the box's agent; each
// connection a program in the box makes to 127.0.0.1:3128 there is served on threads of its
// own: its stream is bridged to one end of a socketpair, and net::ServeEgressConnection serves
// the other end (reads the proxy request, judges it, resolves on the host, connects, relays
// within the box's budget). Every connection leaves an EgressRecord in the box's log.
//
//   ASSIGN_OR_RETURN(auto egress, box::EgressService::Start(agent, policy, limits, budget_bytes,
//                                                           net::SystemResolver(10s)));
//   ... egress->Log() ...
//   { auto scope = egress->AllowForAWhile(index_patterns); pip install ...; }
#ifndef CODEBOX_BOX_EGRESS_H_
#define CODEBOX_BOX_EGRESS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent_client/agent_client.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "net/egress_policy.h"
#include "net/egress_relay.h"

namespace codebox::box {

class EgressService {
 public:
  static constexpr int kMaxConnections = 16;      // open at once; more wait in the box's backlog
  static constexpr size_t kMaxLogRecords = 1000;  // the oldest are dropped past it
  // Log() waits at most this long for the records of connections the box closed.
  static constexpr std::chrono::milliseconds kCloseRecordWait{1000};

  // Opens the accept streams on `agent`, which must outlive the service.
  // `secrets`: null for a box without any.
  static StatusOr<std::unique_ptr<EgressService>> Start(
      protocol::AgentClient& agent, net::EgressPolicy policy, net::EgressLimits limits,
      uint64_t max_total_bytes, net::Resolver resolve,
      std::shared_ptr<const net::SecretEgress> secrets = nullptr);
  // Ends every connection and joins every thread; call before the agent client goes.
  virtual ~EgressService() = default;

  // The records, in the order the connections ended (each is recorded when it ends). Waits at
  // most kCloseRecordWait for the connections the box has closed, so that an exec's
  // connections are in a log read right after it.
  virtual std::vector<EgressRecord> Log() const = 0;
  // How many records there have been; LogSince(Recorded()) later gives those after now (as
  // many of them as the log still holds), waiting as Log does.
  virtual uint64_t Recorded() const = 0;
  virtual std::vector<EgressRecord> LogSince(uint64_t mark) const = 0;

  // While the returned scope lives, names matching `patterns` are allowed too (an install's
  // package index); connections made meanwhile keep running after it ends.
  class Allowance {
   public:
    virtual ~Allowance() = default;
  };
  virtual std::unique_ptr<Allowance> AllowForAWhile(std::vector<net::HostPattern> patterns) = 0;

  // The box's policy from now on (Box::SetNetwork): new connections are judged by it (with
  // the allowances alive now), and open ones to a host it refuses are ended.
  virtual void SetPolicy(net::EgressPolicy policy) = 0;

  // The PEM certificate of the box's CA, when it has secrets; "" otherwise.
  virtual std::string CaCertificatePem() const = 0;
};

// The policy `options` give: none, open, or the allowlist with every secret's hosts.
StatusOr<net::EgressPolicy> NetworkPolicyOf(const BoxOptions& options);

// The service of a box with a network policy (EffectiveNetwork(options) != kNone): the
// allowlist (or open), the per-connection rate and the box's byte budget from `options`.
StatusOr<std::unique_ptr<EgressService>> StartNetwork(protocol::AgentClient& agent,
                                                      const BoxOptions& options,
                                                      net::Resolver resolve);

// Where a box with secrets finds the trust its intercepted connections need (ProxyEnvironment
// points SSL_CERT_FILE and its kin there): the box's CA alone, and the image's bundle plus it.
inline constexpr std::string_view kBoxCaDir = "/tmp/codebox-ca";
inline constexpr std::string_view kBoxCaFile = "/tmp/codebox-ca/box-ca.pem";
inline constexpr std::string_view kBoxCaBundle = "/tmp/codebox-ca/ca-bundle.pem";

// Writes the box's CA and the bundle (the image's /etc/ssl/certs/ca-certificates.crt, when it
// has one, and the CA) into the box, owned by root and read-only to its user.
Status WriteBoxTrust(protocol::AgentClient& agent, const std::string& ca_pem);

// The events of the records that were refused, failed or cut (EgressRecord::rule), each with
// what to do about it.
std::vector<NetworkEvent> NetworkEventsOf(const std::vector<EgressRecord>& records);

// BoxInfo::network: "none", "allow: pypi.org, *.pythonhosted.org" or "open (any public
// address)".
std::string NetworkDescription(const BoxOptions& options);

// The environment a box with a network policy gives every exec (with secrets, each secret's
// NAME=<CODEBOX_SECRET:NAME> and the trust variables too): HTTP_PROXY, HTTPS_PROXY,
// http_proxy, https_proxy (curl reads only the lower-case http_proxy) pointing at
// http://127.0.0.1:3128, and NO_PROXY / no_proxy for the box's own loopback (without
// 127.0.0.1 or ::1 when allow_hosts names it as a literal: that means the host's).
std::map<std::string, std::string> ProxyEnvironment(const BoxOptions& options);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_EGRESS_H_
