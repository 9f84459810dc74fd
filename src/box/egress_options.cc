// A box's network from its options: the service's policy and limits, BoxInfo::network, and
// the environment every exec of such a box gets (src/box/egress.h).
#include <cstdlib>

#include "base/text.h"
#include "box/egress.h"
#include "protocol/messages.h"

namespace codebox::box {
namespace {

// The injector, a CA of the box's own (its key stays in this process) and the upstream check:
// the host's trust store, or $CODEBOX_UPSTREAM_CA_FILE (an operator's private upstream).
StatusOr<std::shared_ptr<const net::SecretEgress>> MakeSecretEgress(
    const std::vector<Secret>& secrets) {
  auto out = std::make_shared<net::SecretEgress>();
  ASSIGN_OR_RETURN(out->injector, net::SecretInjector::Make(secrets));
  ASSIGN_OR_RETURN(out->ca, net::BoxCertificateAuthority::Create("secrets"));
  net::UpstreamTrust trust;
  if (const char* file = std::getenv("CODEBOX_UPSTREAM_CA_FILE"); file != nullptr) {
    trust.ca_file = file;
  }
  auto upstream = net::MakeUpstreamContext(trust);
  if (!upstream.ok()) return upstream.status().WithContext("secrets: the upstreams' trust");
  out->upstream = std::move(*upstream);
  return std::shared_ptr<const net::SecretEgress>(std::move(out));
}

}  // namespace

StatusOr<net::EgressPolicy> NetworkPolicyOf(const BoxOptions& options) {
  switch (EffectiveNetwork(options)) {
    case NetworkMode::kNone:
      return net::EgressPolicy::None();
    case NetworkMode::kOpen:
      return net::EgressPolicy::Open();
    case NetworkMode::kAllow:
      break;
  }
  std::vector<std::string> hosts = options.allow_hosts;  // and every secret's
  for (const Secret& secret : options.secrets) {
    hosts.insert(hosts.end(), secret.hosts.begin(), secret.hosts.end());
  }
  auto allow = net::EgressPolicy::Allow(hosts);
  if (!allow.ok()) return allow.status().WithContext("allow_hosts");
  return std::move(*allow);
}

StatusOr<std::unique_ptr<EgressService>> StartNetwork(protocol::AgentClient& agent,
                                                      const BoxOptions& options,
                                                      net::Resolver resolve) {
  if (EffectiveNetwork(options) == NetworkMode::kNone) {
    return FailedPrecondition("the box has no network policy");
  }
  ASSIGN_OR_RETURN(net::EgressPolicy policy, NetworkPolicyOf(options));
  net::EgressLimits limits;
  limits.rate_bytes_per_second = options.network_rate_bytes;
  std::shared_ptr<const net::SecretEgress> secrets;
  if (!options.secrets.empty()) {
    ASSIGN_OR_RETURN(secrets, MakeSecretEgress(options.secrets));
  }
  return EgressService::Start(agent, std::move(policy), limits, options.network_max_bytes,
                              std::move(resolve), std::move(secrets));
}

Status WriteBoxTrust(protocol::AgentClient& agent, const std::string& ca_pem) {
  // The image's bundle is the box's text: bounded, and only certificates are taken from it (a
  // box that breaks its own bundle breaks only its own TLS).
  std::string bundle;
  auto image_bundle = agent.ReadFile("/etc/ssl/certs/ca-certificates.crt", 4u << 20);
  if (image_bundle.ok()) bundle = std::move(*image_bundle);
  if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
  bundle += ca_pem;
  const std::string dir(kBoxCaDir);
  RETURN_IF_ERROR(agent.MakeDir(dir, 0755).WithContext("write the box's CA"));
  RETURN_IF_ERROR(
      agent.WriteFile(std::string(kBoxCaFile), ca_pem, 0444).WithContext("write the box's CA"));
  return agent.WriteFile(std::string(kBoxCaBundle), bundle, 0444)
      .WithContext("write the box's CA bundle");
}

namespace {

std::string HintFor(const EgressRecord& r) {
  // The box asked for it: made terminal-safe, as its record is wherever it is shown.
  const std::string host = r.host.empty() ? "that host" : base::TerminalSafe(r.host, 300);
  if (r.rule == "not_allowed") {
    return "the box may reach only the hosts it was given; ask for " + host +
           " to be allowed (allow_hosts, --allow-host), or do without it: retrying will not help";
  }
  if (r.rule == "internal_address") {
    return host +
           " leads to an internal address, which a box never reaches unless the "
           "allowlist names that address itself: retrying will not help";
  }
  if (r.rule == "resolve") return "the host's resolver does not know " + host + "; check the name";
  if (r.rule == "connect") return host + " did not answer; it may be down: retry later";
  if (r.rule == "budget") {
    return "the box has moved all the bytes it may (network_max_bytes): nothing more will pass";
  }
  if (r.rule == "secret_elsewhere") {
    return "a secret's placeholder goes only to that secret's hosts; nothing was sent to " + host;
  }
  if (r.rule == "request") {
    return "send proxied HTTP: HTTP_PROXY and HTTPS_PROXY in the box say where";
  }
  if (r.rule == "tls") {
    return "make TLS to the host the CONNECT named, trusting $SSL_CERT_FILE (the box's CA)";
  }
  if (r.rule == "upstream_tls") {
    return "the host does not trust " + host + "'s certificate; nothing was sent to it";
  }
  return "";
}

}  // namespace

std::vector<NetworkEvent> NetworkEventsOf(const std::vector<EgressRecord>& records) {
  std::vector<NetworkEvent> out;
  for (const EgressRecord& r : records) {
    if (r.rule.empty()) continue;
    out.push_back(
        {.host = r.host, .port = r.port, .rule = r.rule, .message = r.reason, .hint = HintFor(r)});
  }
  return out;
}

std::string NetworkDescription(const BoxOptions& options) {
  std::string secrets;  // names and hosts only: never a value
  for (const Secret& secret : options.secrets) {
    std::string hosts;
    for (const std::string& host : secret.hosts) hosts += (hosts.empty() ? "" : ", ") + host;
    secrets += (secrets.empty() ? "; secrets: " : "; ") + secret.name + " for " + hosts;
  }
  switch (EffectiveNetwork(options)) {
    case NetworkMode::kNone:
      return "none";
    case NetworkMode::kOpen:
      return "open (any public address)" + secrets;
    case NetworkMode::kAllow:
      break;
  }
  if (options.allow_hosts.empty()) {
    return secrets.empty() ? "allow: no hosts (only an install's package index)"
                           : "allow: only the secrets' hosts" + secrets;
  }
  std::string text = "allow: ";
  for (size_t i = 0; i < options.allow_hosts.size(); ++i) {
    text += (i > 0 ? ", " : "") + options.allow_hosts[i];
  }
  return text + secrets;
}

std::map<std::string, std::string> ProxyEnvironment(const BoxOptions& options) {
  const std::string proxy = "http://127.0.0.1:" + std::to_string(protocol::msg::kEgressPort);
  // The box's own loopback bypasses the proxy, unless the allowlist names the host's loopback
  // address as a literal: then that address means the host's (a service the user exposes to
  // the box on purpose), and requests for it must reach the proxy.
  bool host_v4_loopback = false, host_v6_loopback = false;
  for (const std::string& entry : options.allow_hosts) {
    auto pattern = net::ParseHostPattern(entry);
    if (!pattern.ok() || !pattern->ip_literal) continue;
    host_v4_loopback |= pattern->host == "127.0.0.1";
    host_v6_loopback |= pattern->host == "::1";
  }
  std::string no_proxy = "localhost";
  if (!host_v4_loopback) no_proxy += ",127.0.0.1";
  if (!host_v6_loopback) no_proxy += ",::1";
  std::map<std::string, std::string> env = {{"HTTP_PROXY", proxy},  {"HTTPS_PROXY", proxy},
                                            {"http_proxy", proxy},  {"https_proxy", proxy},
                                            {"NO_PROXY", no_proxy}, {"no_proxy", no_proxy}};
  if (!options.secrets.empty()) {
    for (const Secret& secret : options.secrets) env[secret.name] = SecretPlaceholder(secret.name);
    for (const char* name : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}) {
      env[name] = std::string(kBoxCaBundle);
    }
    env["NODE_EXTRA_CA_CERTS"] = std::string(kBoxCaFile);
  }
  return env;
}

}  // namespace codebox::box
