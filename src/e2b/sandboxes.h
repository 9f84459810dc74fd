// The control plane's messages of E2B's API (issue 35) that `codebox serve` reads and writes:
// a create request, the sandbox it answers with, an error body, and the list's metadata
// filter. Each is decoded with checked types and bounded sizes; the server applies its own
// ceilings (a box's lifetime, its tenant's box count) after decoding.
//
// Unknown fields of a request are ignored, not refused: E2B's SDKs add fields from version to
// version, and a field codebox does not know cannot ask for anything. A known field that asks
// for what codebox does not do (pausing, volumes, an egress proxy) is refused, saying so.
#ifndef CODEBOX_E2B_SANDBOXES_H_
#define CODEBOX_E2B_SANDBOXES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::e2b {

// Bounds on what a client may send in one request's maps and names.
inline constexpr size_t kMaxMapEntries = 256;
inline constexpr size_t kMaxKeyBytes = 256;
inline constexpr size_t kMaxValueBytes = 4096;
inline constexpr size_t kMaxTemplateBytes = 512;
inline constexpr size_t kMaxHosts = 256;

// POST /v2/sandboxes (the SDK's Sandbox.create).
struct NewSandbox {
  std::string template_id;
  std::optional<int64_t> timeout_s;  // the box's lifetime; absent: the server's default
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> env_vars;  // every command and cell of the box gets these
  std::optional<bool> allow_internet_access;
  std::vector<std::string> allow_out;  // network.allowOut: hosts or CIDRs
  std::vector<std::string> deny_out;   // network.denyOut
};

// kInvalidArgument naming the field for a wrong type, a size past the bounds above, a
// non-positive timeout, or a field that asks for what codebox does not do.
StatusOr<NewSandbox> NewSandboxFromJson(const nlohmann::json& body);

// The answer to a create or a connect.
struct SandboxAnswer {
  std::string sandbox_id;
  std::string template_id;
  std::string envd_version;       // plain semver: the SDK compares it and throws on others
  std::string envd_access_token;  // this box's own token for its in-sandbox routes
};
nlohmann::json SandboxAnswerToJson(const SandboxAnswer& answer);

// The `timeout` (seconds) of POST /sandboxes/{id}/timeout (required) and of a connect's body
// (optional: nullopt when absent). kInvalidArgument for a wrong type or a value out of
// 1..2^31-1.
StatusOr<std::optional<int64_t>> TimeoutFromJson(const nlohmann::json& body, bool required);

// One sandbox of the list, and the detail of GET /sandboxes/{id} (the same fields).
struct ListedSandbox {
  std::string sandbox_id;
  std::string template_id;
  std::string envd_version;
  std::chrono::system_clock::time_point started_at;
  std::chrono::system_clock::time_point end_at;
  double cpus = 1;
  uint64_t memory_mib = 0;
  uint64_t disk_mib = 0;
  std::map<std::string, std::string> metadata;
};
// {sandboxID, templateID, clientID, startedAt, endAt (RFC 3339), state "running", cpuCount,
//  memoryMB, diskSizeMB, envdVersion, metadata}.
nlohmann::json ListedSandboxToJson(const ListedSandbox& sandbox);

// One sample of GET /sandboxes/{id}/metrics (E2B's SandboxMetric). Bytes throughout.
struct SandboxMetric {
  std::chrono::system_clock::time_point at;
  int cpu_count = 1;
  double cpu_used_pct = 0;  // of cpu_count cores, over the time since the previous sample
  uint64_t mem_used = 0;
  uint64_t mem_cache = 0;
  uint64_t mem_total = 0;
  uint64_t disk_used = 0;
  uint64_t disk_total = 0;
};
nlohmann::json SandboxMetricToJson(const SandboxMetric& metric);

// A control-plane error body: {"code": http_status, "message": message}. The SDK reads the
// number in the body (a 404 there is its "sandbox not found"), not only the HTTP status.
nlohmann::json ErrorBody(int http_status, std::string_view message);

// The list's `metadata` query value, as the HTTP layer decoded it once: pairs "k=v" joined
// by '&', each key and value percent-encoded twice more by the SDK. kInvalidArgument for a
// pair without '=', a bad escape, or sizes past the bounds.
StatusOr<std::map<std::string, std::string>> MetadataFilterFromQuery(std::string_view value);

}  // namespace codebox::e2b

#endif  // CODEBOX_E2B_SANDBOXES_H_
