// A box's network from its options: the service's policy and limits, BoxInfo::network, and
// the environment every exec of such a box gets (src/box/egress.h).
#include "box/egress.h"
#include "protocol/messages.h"

namespace codebox::box {

StatusOr<std::unique_ptr<EgressService>> StartNetwork(protocol::AgentClient& agent,
                                                      const BoxOptions& options,
                                                      net::Resolver resolve) {
  net::EgressPolicy policy = net::EgressPolicy::None();
  switch (EffectiveNetwork(options)) {
    case NetworkMode::kNone:
      return FailedPrecondition("the box has no network policy");
    case NetworkMode::kOpen:
      policy = net::EgressPolicy::Open();
      break;
    case NetworkMode::kAllow: {
      auto allow = net::EgressPolicy::Allow(options.allow_hosts);
      if (!allow.ok()) return allow.status().WithContext("allow_hosts");
      policy = std::move(*allow);
      break;
    }
  }
  net::EgressLimits limits;
  limits.rate_bytes_per_second = options.network_rate_bytes;
  return EgressService::Start(agent, std::move(policy), limits, options.network_max_bytes,
                              std::move(resolve));
}

std::string NetworkDescription(const BoxOptions& options) {
  switch (EffectiveNetwork(options)) {
    case NetworkMode::kNone:
      return "none";
    case NetworkMode::kOpen:
      return "open (any public address)";
    case NetworkMode::kAllow:
      break;
  }
  if (options.allow_hosts.empty()) return "allow: no hosts (only an install's package index)";
  std::string text = "allow: ";
  for (size_t i = 0; i < options.allow_hosts.size(); ++i) {
    text += (i > 0 ? ", " : "") + options.allow_hosts[i];
  }
  return text;
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
  return {{"HTTP_PROXY", proxy},  {"HTTPS_PROXY", proxy}, {"http_proxy", proxy},
          {"https_proxy", proxy}, {"NO_PROXY", no_proxy}, {"no_proxy", no_proxy}};
}

}  // namespace codebox::box
