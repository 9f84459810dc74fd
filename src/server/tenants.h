// Who a request is, for `codebox serve`: each bearer token belongs to a tenant; a tenant sees and
// touches only its own boxes, sessions and logs (another tenant's box answers exactly as an
// unknown one), an admin sees every tenant, and each tenant has quotas (boxes held, requests in
// flight) so that one cannot starve the rest.
//
// The token file, one token a line, its fields after it (blank lines and # comments skipped):
//   3f9c...e1                              a tenant of its own (t-<8 hex of its sha256>)
//   a81d...90 tenant=analytics             tokens with the same tenant share their boxes
//   77b0...c2 tenant=analytics max-boxes=8 max-requests=16
//   0d4e...5a admin                        sees every tenant
#ifndef CODEBOX_SERVER_TENANTS_H_
#define CODEBOX_SERVER_TENANTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::server {

// The one tenant of a server without tokens (the unix socket's owner, a loopback user).
inline constexpr std::string_view kLocalTenant = "local";

struct TokenGrant {
  std::string token;
  std::string tenant;
  bool admin = false;
  std::optional<uint32_t> max_boxes;     // this tenant's quotas, over the server's defaults
  std::optional<uint32_t> max_requests;
};

// The lines of a token file; errors name the line (never the token).
StatusOr<std::vector<TokenGrant>> ParseTokenLines(std::string_view text, std::string_view source);
// The file at `path`: must not be readable by group or others while it holds tokens.
StatusOr<std::vector<TokenGrant>> ReadTokenFile(const std::string& path);

// Who sent a request.
struct Caller {
  std::string tenant;
  bool admin = false;
  // Whether this caller may see and touch what belongs to `owner`.
  bool Sees(std::string_view owner) const { return admin || owner == tenant; }
  // The server itself (reaper, MCP session bookkeeping): sees everything.
  static Caller System() { return {std::string(kLocalTenant), true}; }
};

struct TenantLimits {
  uint32_t max_boxes = 64;
  uint32_t max_requests = 64;
};

// How many of something each tenant holds (boxes, requests in flight), with a ceiling per
// hold. Thread-safe; a hold may be dropped on any thread.
class TenantCounter {
 public:
  // One more of `tenant`'s while the returned hold lives; null when it holds `max` already.
  std::shared_ptr<void> TryHold(const std::string& tenant, uint32_t max);
  uint32_t Count(std::string_view tenant) const;
  // Every tenant that holds any, with its count.
  std::map<std::string, uint32_t, std::less<>> Counts() const;

 private:
  struct State {
    mutable std::mutex mu;
    std::map<std::string, uint32_t, std::less<>> counts;
  };
  // Shared with the holds, which may outlive the counter (a box dropped after its registry).
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// Quotas per tenant: the server's defaults, overridden per tenant by the token file.
class TenantQuotas {
 public:
  TenantQuotas() = default;
  TenantQuotas(TenantLimits defaults, const std::vector<TokenGrant>& grants);
  TenantLimits For(std::string_view tenant) const;

 private:
  TenantLimits defaults_;
  std::map<std::string, TenantLimits, std::less<>> limits_;
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_TENANTS_H_
