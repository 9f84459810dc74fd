#include "e2b/sandboxes.h"

#include <cmath>
#include <limits>

#include "base/json_fields.h"
#include "base/utc_time.h"
#include "http/request.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

constexpr const char* kWhat = "sandbox create request";

// A JSON object of strings, bounded in entries and sizes.
StatusOr<std::map<std::string, std::string>> StringMap(const base::JsonFields& f, const char* key) {
  std::map<std::string, std::string> out;
  const json* value = f.Find(key);
  if (value == nullptr) return out;
  if (!value->is_object()) return f.Fault(key, "is not an object of strings");
  if (value->size() > kMaxMapEntries) {
    return f.Fault(key, "has more than " + std::to_string(kMaxMapEntries) + " entries");
  }
  for (const auto& [k, v] : value->items()) {
    if (!v.is_string()) return f.Fault(key, "has a value that is not a string");
    const auto& text = v.get_ref<const std::string&>();
    if (k.empty() || k.size() > kMaxKeyBytes) {
      return f.Fault(
          key, "has a key that is empty or longer than " + std::to_string(kMaxKeyBytes) + " bytes");
    }
    if (text.size() > kMaxValueBytes) {
      return f.Fault(key, "has a value longer than " + std::to_string(kMaxValueBytes) + " bytes");
    }
    out.emplace(k, text);
  }
  return out;
}

StatusOr<std::vector<std::string>> Hosts(const base::JsonFields& f, const char* key) {
  ASSIGN_OR_RETURN(std::vector<std::string> hosts, f.Strings(key, std::vector<std::string>{}));
  if (hosts.size() > kMaxHosts) {
    return f.Fault(key, "has more than " + std::to_string(kMaxHosts) + " entries");
  }
  for (const std::string& h : hosts) {
    if (h.empty() || h.size() > kMaxKeyBytes) {
      return f.Fault(key, "has an entry that is empty or longer than " +
                              std::to_string(kMaxKeyBytes) + " bytes");
    }
  }
  return hosts;
}

Status NotSupported(std::string_view what) {
  return InvalidArgument(std::string(what) + " is not supported by codebox");
}

}  // namespace

StatusOr<NewSandbox> NewSandboxFromJson(const json& body) {
  if (!body.is_object()) return InvalidArgument(std::string(kWhat) + " is not a JSON object");
  base::JsonFields f(body, kWhat, StatusCode::kInvalidArgument);
  NewSandbox out;
  ASSIGN_OR_RETURN(out.template_id, f.String("templateID"));
  if (out.template_id.empty() || out.template_id.size() > kMaxTemplateBytes) {
    return f.Fault("templateID",
                   "is empty or longer than " + std::to_string(kMaxTemplateBytes) + " bytes");
  }
  if (f.Find("timeout") != nullptr) {
    ASSIGN_OR_RETURN(int64_t timeout, f.Int("timeout", 1, std::numeric_limits<int32_t>::max()));
    out.timeout_s = timeout;
  }
  ASSIGN_OR_RETURN(out.metadata, StringMap(f, "metadata"));
  ASSIGN_OR_RETURN(out.env_vars, StringMap(f, "envVars"));
  if (f.Find("allow_internet_access") != nullptr) {
    ASSIGN_OR_RETURN(bool allow, f.Bool("allow_internet_access"));
    out.allow_internet_access = allow;
  }
  if (const json* network = f.Find("network"); network != nullptr) {
    if (!network->is_object()) return f.Fault("network", "is not an object");
    base::JsonFields n(*network, std::string(kWhat) + ": network", StatusCode::kInvalidArgument);
    ASSIGN_OR_RETURN(out.allow_out, Hosts(n, "allowOut"));
    ASSIGN_OR_RETURN(out.deny_out, Hosts(n, "denyOut"));
    for (const char* unsupported : {"rules", "egressProxy", "maskRequestHost"}) {
      if (n.Find(unsupported) != nullptr)
        return NotSupported(std::string("network.") + unsupported);
    }
  }
  ASSIGN_OR_RETURN(bool auto_pause, f.Bool("autoPause", false));
  if (auto_pause) return NotSupported("pausing a sandbox at its timeout (autoPause)");
  for (const char* unsupported : {"volumeMounts", "mcp", "autoResume"}) {
    const json* value = f.Find(unsupported);
    if (value != nullptr && !value->empty()) return NotSupported(unsupported);
  }
  return out;
}

json SandboxAnswerToJson(const SandboxAnswer& a) {
  return {{"sandboxID", a.sandbox_id},
          {"templateID", a.template_id},
          {"clientID", "codebox"},
          {"envdVersion", a.envd_version},
          {"envdAccessToken", a.envd_access_token}};
}

StatusOr<std::optional<int64_t>> TimeoutFromJson(const json& body, bool required) {
  if (!body.is_object()) return InvalidArgument("the timeout request is not a JSON object");
  base::JsonFields f(body, "timeout request", StatusCode::kInvalidArgument);
  if (f.Find("timeout") == nullptr) {
    if (required) return f.Missing("timeout");
    return std::optional<int64_t>();
  }
  ASSIGN_OR_RETURN(int64_t timeout, f.Int("timeout", 1, std::numeric_limits<int32_t>::max()));
  return std::optional<int64_t>(timeout);
}

json SandboxMetricToJson(const SandboxMetric& m) {
  const auto unix_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(m.at.time_since_epoch()).count();
  return {{"timestamp", base::Rfc3339(m.at)},
          {"timestampUnix", unix_seconds},
          {"cpuCount", m.cpu_count},
          {"cpuUsedPct", m.cpu_used_pct},
          {"memUsed", m.mem_used},
          {"memCache", m.mem_cache},
          {"memTotal", m.mem_total},
          {"diskUsed", m.disk_used},
          {"diskTotal", m.disk_total}};
}

json ListedSandboxToJson(const ListedSandbox& s) {
  return {{"sandboxID", s.sandbox_id},
          {"templateID", s.template_id},
          {"clientID", "codebox"},
          {"startedAt", base::Rfc3339(s.started_at)},
          {"endAt", base::Rfc3339(s.end_at)},
          {"state", "running"},
          {"cpuCount", static_cast<int64_t>(std::ceil(s.cpus))},
          {"memoryMB", s.memory_mib},
          {"diskSizeMB", s.disk_mib},
          {"envdVersion", s.envd_version},
          {"metadata", s.metadata}};
}

json ErrorBody(int http_status, std::string_view message) {
  return {{"code", http_status}, {"message", std::string(message)}};
}

StatusOr<std::map<std::string, std::string>> MetadataFilterFromQuery(std::string_view value) {
  std::map<std::string, std::string> out;
  // Two more decodings: the form's own, then the SDK's encodeURIComponent of each part.
  auto decode = [](std::string_view part) -> StatusOr<std::string> {
    ASSIGN_OR_RETURN(std::string once, http::PercentDecode(part, /*plus_is_space=*/true));
    return http::PercentDecode(once, /*plus_is_space=*/false);
  };
  for (size_t start = 0; start < value.size();) {
    const size_t end = std::min(value.find('&', start), value.size());
    const std::string_view pair = value.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("metadata filter: \"" + std::string(pair.substr(0, 64)) +
                             "\" is not key=value");
    }
    ASSIGN_OR_RETURN(std::string k, decode(pair.substr(0, eq)));
    ASSIGN_OR_RETURN(std::string v, decode(pair.substr(eq + 1)));
    if (k.empty() || k.size() > kMaxKeyBytes || v.size() > kMaxValueBytes) {
      return InvalidArgument("metadata filter: a key is empty or a key or value is too long");
    }
    if (out.size() >= kMaxMapEntries) {
      return InvalidArgument("metadata filter: more than " + std::to_string(kMaxMapEntries) +
                             " pairs");
    }
    out[std::move(k)] = std::move(v);
  }
  return out;
}

}  // namespace codebox::e2b
