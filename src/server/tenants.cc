#include "server/tenants.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "base/sha256.h"

namespace codebox::server {
namespace {

constexpr size_t kMaxTenantName = 64;

bool IsTenantName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTenantName) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

StatusOr<uint32_t> ParseQuota(std::string_view text, std::string_view where) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != text.npos) {
    return InvalidArgument(std::string(where) + " is not a whole number");
  }
  uint32_t n = static_cast<uint32_t>(std::stoul(std::string(text)));
  if (n == 0) return InvalidArgument(std::string(where) + " must be at least 1");
  return n;
}

}  // namespace

StatusOr<std::vector<TokenGrant>> ParseTokenLines(std::string_view text, std::string_view source) {
  std::vector<TokenGrant> grants;
  std::istringstream in{std::string(text)};
  size_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    std::istringstream words(line);
    std::string token;
    if (!(words >> token) || token[0] == '#') continue;
    const std::string where = std::string(source) + " line " + std::to_string(line_number);
    TokenGrant grant;
    grant.token = token;
    for (std::string field; words >> field;) {
      if (field[0] == '#') break;  // a comment after the fields
      size_t eq = field.find('=');
      std::string key = field.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
      if (field == "admin") {
        grant.admin = true;
      } else if (key == "tenant" && eq != std::string::npos) {
        if (!IsTenantName(value)) {
          return InvalidArgument(where + ": tenant '" + value.substr(0, kMaxTenantName) +
                                 "' is not 1-64 letters, digits, '-', '_' or '.'");
        }
        grant.tenant = value;
      } else if (key == "max-boxes" && eq != std::string::npos) {
        ASSIGN_OR_RETURN(grant.max_boxes, ParseQuota(value, where + ": max-boxes"));
      } else if (key == "max-requests" && eq != std::string::npos) {
        ASSIGN_OR_RETURN(grant.max_requests, ParseQuota(value, where + ": max-requests"));
      } else {
        // Not echoed: a mistyped line may hold a second token.
        return InvalidArgument(where + ": unknown field after the token; a line is TOKEN "
                                       "[tenant=NAME] [admin] [max-boxes=N] [max-requests=N]");
      }
    }
    // A token of its own: named by its hash, so logs and metrics never carry the token.
    if (grant.tenant.empty()) grant.tenant = "t-" + base::Sha256Hex(token).substr(0, 8);
    for (const TokenGrant& other : grants) {
      if (other.token == token) return InvalidArgument(where + ": the token is given twice");
    }
    grants.push_back(std::move(grant));
  }
  // Quotas are the tenant's: two lines of one tenant must not disagree.
  for (const TokenGrant& a : grants) {
    for (const TokenGrant& b : grants) {
      if (a.tenant != b.tenant) continue;
      if ((a.max_boxes && b.max_boxes && *a.max_boxes != *b.max_boxes) ||
          (a.max_requests && b.max_requests && *a.max_requests != *b.max_requests)) {
        return InvalidArgument(std::string(source) + ": tenant " + a.tenant +
                               " is given two different quotas");
      }
    }
  }
  return grants;
}

StatusOr<std::vector<TokenGrant>> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("--token-file " + path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(std::vector<TokenGrant> grants,
                   ParseTokenLines(text.str(), "--token-file " + path));
  // A token anyone on the host can read guards nothing: refuse rather than warn.
  struct stat st {};
  if (!grants.empty() && stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return PermissionDenied("--token-file " + path +
                            " is readable by group or others; run chmod 600 " + path);
  }
  if (grants.empty()) return InvalidArgument("--token-file " + path + " holds no token");
  return grants;
}

TenantQuotas::TenantQuotas(TenantLimits defaults, const std::vector<TokenGrant>& grants)
    : defaults_(defaults) {
  for (const TokenGrant& g : grants) {
    TenantLimits& limits = limits_.try_emplace(g.tenant, defaults).first->second;
    if (g.max_boxes) limits.max_boxes = *g.max_boxes;
    if (g.max_requests) limits.max_requests = *g.max_requests;
  }
}

TenantLimits TenantQuotas::For(std::string_view tenant) const {
  auto it = limits_.find(tenant);
  return it == limits_.end() ? defaults_ : it->second;
}

std::shared_ptr<void> TenantCounter::TryHold(const std::string& tenant, uint32_t max) {
  {
    std::lock_guard lock(state_->mu);
    uint32_t& n = state_->counts[tenant];
    if (n >= max) {
      if (n == 0) state_->counts.erase(tenant);
      return nullptr;
    }
    ++n;
  }
  // A non-null pointer (callers test it), whose deleter gives the count back.
  static char token;
  return std::shared_ptr<void>(&token, [state = state_, tenant](void*) {
    std::lock_guard lock(state->mu);
    auto it = state->counts.find(tenant);
    if (it != state->counts.end() && --it->second == 0) state->counts.erase(it);
  });
}

uint32_t TenantCounter::Count(std::string_view tenant) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->counts.find(tenant);
  return it == state_->counts.end() ? 0 : it->second;
}

std::map<std::string, uint32_t, std::less<>> TenantCounter::Counts() const {
  std::lock_guard lock(state_->mu);
  return state_->counts;
}

}  // namespace codebox::server
