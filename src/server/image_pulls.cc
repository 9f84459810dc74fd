#include "server/image_pulls.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "base/paths.h"
#include "box/image_lookup.h"
#include "image/oci_import.h"
#include "net/confined_network.h"
#include "server/json_log.h"

namespace codebox::server {
namespace {

using base::LogLevel;

constexpr uint16_t kDefaultRegistryPort = 443;

// The registry's host, normalized as the egress policy writes it, and its port.
struct RegistryHost {
  std::string host;
  uint16_t port = kDefaultRegistryPort;
};

StatusOr<RegistryHost> SplitRegistry(const std::string& registry) {
  ASSIGN_OR_RETURN(net::HostPort split, net::SplitHostPort(registry));
  ASSIGN_OR_RETURN(std::string host, net::NormalizeHost(split.host));
  return RegistryHost{host, split.port.value_or(kDefaultRegistryPort)};
}

// The addresses a connection to `host` goes to without asking a resolver: an IP literal, or
// "localhost" (which Go's HTTP client, like /etc/hosts, takes for 127.0.0.1 and ::1); none for
// other names, which the proxy resolves and judges when it connects.
std::vector<sockaddr_storage> KnownAddresses(const RegistryHost& r) {
  std::vector<std::string> texts;
  if (r.host == "localhost") {
    texts = {"127.0.0.1", "::1"};
  } else {
    texts = {r.host};
  }
  std::vector<sockaddr_storage> out;
  for (const std::string& text : texts) {
    sockaddr_storage a{};
    auto& v4 = reinterpret_cast<sockaddr_in&>(a);
    auto& v6 = reinterpret_cast<sockaddr_in6&>(a);
    if (inet_pton(AF_INET, text.c_str(), &v4.sin_addr) == 1) {
      v4.sin_family = AF_INET;
      v4.sin_port = htons(r.port);
    } else if (inet_pton(AF_INET6, text.c_str(), &v6.sin6_addr) == 1) {
      v6.sin6_family = AF_INET6;
      v6.sin6_port = htons(r.port);
    } else {
      continue;
    }
    out.push_back(a);
  }
  return out;
}

net::Decision Judge(const net::EgressPolicy& policy, const sockaddr_storage& a, uint16_t port) {
  if (a.ss_family == AF_INET) {
    return policy.CheckAddress(reinterpret_cast<const sockaddr_in&>(a).sin_addr, port);
  }
  return policy.CheckAddress(reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, port);
}

std::optional<std::string> ClassOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    return net::ForbiddenAddressClass(reinterpret_cast<const sockaddr_in&>(a).sin_addr);
  }
  return net::ForbiddenAddressClass(reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
}

// What a program in the pull's namespace reaches directly (Go's HTTP client uses no proxy for
// a loopback address or "localhost"): the registry's own loopback address, relayed to the
// host's when the address policy allows it; the host's same IPv4 address for an IPv4-mapped
// one, as Go dials it.
std::vector<sockaddr_storage> LoopbackForwards(const RegistryHost& r) {
  std::vector<sockaddr_storage> out;
  for (sockaddr_storage a : KnownAddresses(r)) {
    if (ClassOf(a) != "loopback") continue;
    if (a.ss_family == AF_INET6) {
      const in6_addr v6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
      if (IN6_IS_ADDR_V4MAPPED(&v6)) {
        sockaddr_storage inner{};
        auto& v4 = reinterpret_cast<sockaddr_in&>(inner);
        v4.sin_family = AF_INET;
        v4.sin_port = htons(r.port);
        std::copy(v6.s6_addr + 12, v6.s6_addr + 16, reinterpret_cast<uint8_t*>(&v4.sin_addr));
        a = inner;
      }
    }
    out.push_back(a);
  }
  return out;
}

std::string BeforehandHint(const image::ImageReference& ref) {
  return "or pull the image beforehand (codebox image pull " + ref.Familiar() + ")";
}

// A pull that failed after it started, as a client may see it: the registry's "no such image"
// (or "not yours") as not found, anything else as one message whatever the network answered.
Status ClientError(const image::ImageReference& ref, const Status& detail) {
  static constexpr const char* kNotFound[] = {"manifest unknown", "name unknown", "unauthorized",
                                              "authentication required",
                                              "requested access to the resource is denied"};
  for (const char* says : kNotFound) {
    if (detail.message().find(says) != std::string::npos) {
      return NotFound("image " + ref.Familiar() + " is not in this server's store and was not " +
                      "found at the registry " + ref.registry +
                      " (or this server may not read it)");
    }
  }
  return Unavailable("image " + ref.Familiar() + " is not in this server's store and could not " +
                     "be pulled: the registry " + ref.registry +
                     " could not be reached or did not serve it, or a connection the pull "
                     "needed is not allowed on this server (the server's log has the details)");
}

}  // namespace

StatusOr<net::HostPattern> ParseAllowedRegistry(std::string_view text) {
  auto pattern = net::ParseHostPattern(text);
  if (!pattern.ok()) return pattern.status().WithContext("--allow-registry");
  return pattern;
}

StatusOr<net::AddressRange> ParseAllowedRegistryAddress(std::string_view text) {
  auto range = net::ParseAddressRange(text);
  if (!range.ok()) return range.status().WithContext("--allow-registry-address");
  return range;
}

Status CheckServerPull(const PullPolicy& policy, const image::ImageReference& ref, bool admin) {
  const std::string refused = "image " + ref.Familiar() +
                              " is not in this server's store, and pulling it from " +
                              ref.registry + " is not allowed on this server";
  auto registry = SplitRegistry(ref.registry);
  if (!registry.ok()) return PermissionDenied(refused + ": it is not a host name or address");
  if (!admin) {
    bool allowed = std::any_of(
        policy.registries.begin(), policy.registries.end(),
        [&](const net::HostPattern& p) { return p.MatchesName(registry->host, registry->port); });
    if (!allowed) {
      return PermissionDenied(refused + ": its operator may allow the registry (codebox serve " +
                              "--allow-registry " + ref.registry + ") " + BeforehandHint(ref));
    }
  }
  // A registry named by its address (or "localhost") is judged before any connection; names
  // are judged by the proxy, at each connection, after the host resolved them.
  const std::vector<sockaddr_storage> known = KnownAddresses(*registry);
  if (known.empty()) return Status::Ok();
  const net::EgressPolicy addresses = net::EgressPolicy::Open(policy.addresses);
  for (const sockaddr_storage& a : known) {
    if (Judge(addresses, a, registry->port).allowed) return Status::Ok();
  }
  return PermissionDenied(refused + ": " + registry->host + " is a " +
                          ClassOf(known.front()).value_or("forbidden") +
                          " address, which this server's pulls may not reach unless its "
                          "operator names it (codebox serve --allow-registry-address "
                          "ADDR[/PREFIX]), " +
                          BeforehandHint(ref));
}

ImagePulls::ImagePulls(PullPolicy policy) : policy_(std::move(policy)) {
  box::SetFirstUsePull([this](const BoxOptions& options) { return Pull(options, false); });
  std::vector<std::string> registries, addresses;
  for (const auto& p : policy_.registries) registries.push_back(p.ToString());
  for (const auto& r : policy_.addresses) addresses.push_back(r.ToString());
  JsonLog::Write(LogLevel::kInfo, "image pulls for clients",
                 {{"allow_registry", registries},
                  {"allow_registry_address", addresses},
                  {"operator_images", policy_.operator_images}});
}

ImagePulls::~ImagePulls() { box::SetFirstUsePull(nullptr); }

bool ImagePulls::IsOperatorImage(const std::string& image) const {
  auto ref = image::ParseImageReference(image);
  if (!ref.ok()) return false;
  return std::any_of(policy_.operator_images.begin(), policy_.operator_images.end(),
                     [&](const std::string& named) {
                       auto other = image::ParseImageReference(named);
                       return other.ok() && other->Canonical() == ref->Canonical();
                     });
}

Status ImagePulls::Ensure(const BoxOptions& options, bool admin) {
  if (options.image.empty() || !image::IsOciImageName(options.image)) return Status::Ok();
  auto found = image::FindImage(base::ImageStores(options.home), options.image);
  if (found.ok() || found.status().code() != StatusCode::kNotFound) return Status::Ok();
  if (::geteuid() != 0) {  // no pull here; the box start says how to pull as root
    ASSIGN_OR_RETURN(image::ImageReference ref, image::ParseImageReference(options.image));
    return CheckServerPull(policy_, ref, admin || IsOperatorImage(options.image));
  }
  return Pull(options, admin).status();
}

StatusOr<image::ImageInfo> ImagePulls::Pull(const BoxOptions& options, bool admin) {
  ASSIGN_OR_RETURN(image::ImageReference ref, image::ParseImageReference(options.image));
  RETURN_IF_ERROR(CheckServerPull(policy_, ref, admin || IsOperatorImage(options.image)));
  const std::string store = base::ImageStores(options.home).front().path;
  image::PullOptions pull;
  net::ConfinedNetworkOptions confined;
  confined.policy = net::EgressPolicy::Open(policy_.addresses);
  confined.max_bytes = 2 * pull.max_bytes + (1ull << 30);  // the layers, with room for retries
  if (auto registry = SplitRegistry(ref.registry); registry.ok()) {
    confined.forwards = LoopbackForwards(*registry);
  }
  auto network = net::ConfinedNetwork::Start(std::move(confined));
  if (!network.ok()) {
    JsonLog::Write(LogLevel::kWarn, "image pull failed",
                   {{"image", ref.Familiar()},
                    {"error", network.status().ToString()},
                    {"why",
                     "the pull's confined network could not be made (needs root with "
                     "CAP_SYS_ADMIN); pre-pull images with codebox image pull"}});
    return ClientError(ref, network.status());
  }
  pull.net_namespace_fd = (*network)->namespace_fd();
  pull.network_env = (*network)->ProxyEnvironment();
  CODEBOX_LOG(kWarn, "image " << ref.Familiar() << " is not in " << store
                              << "; pulling it for a client (first use)");
  auto pulled = image::PullImage(store, options.image, pull, [](const std::string& line) {
    CODEBOX_LOG(kWarn, "image pull: " << line);
  });
  for (const EgressRecord& r : (*network)->Stop()) {
    JsonLog::Write(r.allowed ? LogLevel::kInfo : LogLevel::kWarn, "image pull connection",
                   {{"image", ref.Familiar()},
                    {"host", r.host},
                    {"port", r.port},
                    {"allowed", r.allowed},
                    {"reason", r.reason},
                    {"address", r.address},
                    {"bytes_up", r.bytes_up},
                    {"bytes_down", r.bytes_down}});
  }
  if (!pulled.ok()) {
    JsonLog::Write(LogLevel::kWarn, "image pull failed",
                   {{"image", ref.Familiar()}, {"error", pulled.status().ToString()}});
    return ClientError(ref, pulled.status());
  }
  return pulled;
}

}  // namespace codebox::server
