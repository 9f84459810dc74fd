// E2B's face (docs/e2b.md): its control plane (/v2/sandboxes, /sandboxes/{id}/...) on the
// registry, and the dispatch of its in-sandbox requests (E2b-Sandbox-Id) to envd's services
// (api_e2b_envd.cc). A sandbox is a box: its id is the box's, its tenant the key's, and it
// lives until its timeout (E2B's lifetime, moved by setTimeout) within the server's ceiling.
#include "server/api_e2b.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/json.h"
#include "base/text.h"
#include "box/image_run.h"
#include "e2b/sandboxes.h"
#include "image/recipe.h"
#include "server/api_request.h"
#include "server/box_id.h"

namespace codebox::server {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// What the SDK is told envd is: the version decides which calls it makes (docs/e2b.md).
constexpr std::string_view kEnvdVersion = "0.5.7";
// E2B's own default lifetime of a sandbox created without a timeout.
constexpr seconds kDefaultTimeout{300};

Status SandboxNotFound(std::string_view id) {
  return NotFound("sandbox " + base::Excerpt(id) +
                  " not found (destroyed, past its timeout, or "
                  "never made)");
}

// The registry's box as E2B's sandbox, for the caller; kNotFound in E2B's words.
StatusOr<E2bSandbox> FindSandbox(Call& call, std::string_view id) {
  if (!ParseBoxId(id).has_value()) return SandboxNotFound(id);
  auto record = call.context.registry->Get(id, call.caller);
  if (!record.ok()) {
    // Forgotten only when its box is gone for everyone: another tenant's probe must not end
    // a sandbox it cannot see.
    if (!call.context.registry->Get(id).ok()) call.context.e2b.Remove(id);
    return SandboxNotFound(id);
  }
  if (auto found = call.context.e2b.Find(id)) {
    if (!found->gone) return *found;
  }
  // A box made through /v1 becomes a sandbox when first connected.
  return call.context.e2b.Add(E2bSandbox{.id = record->id,
                                         .tenant = record->tenant,
                                         .access_token = {},
                                         .template_id = record->image,
                                         .metadata = {},
                                         .cpus = record->cpus,
                                         .memory_mib = record->memory_mib,
                                         .disk_mib = record->disk_mib});
}

json Answer(const E2bSandbox& s) {
  json answer = e2b::SandboxAnswerToJson({.sandbox_id = s.id,
                                          .template_id = s.template_id,
                                          .envd_version = std::string(kEnvdVersion),
                                          .envd_access_token = s.access_token});
  // The code interpreter's routes carry this one instead of the access token.
  answer["trafficAccessToken"] = s.access_token;
  return answer;
}

StatusOr<e2b::ListedSandbox> Listed(Call& call, const E2bSandbox& s) {
  ASSIGN_OR_RETURN(api::BoxRecord record, call.context.registry->Get(s.id, call.caller));
  ASSIGN_OR_RETURN(auto end, call.context.registry->LifetimeEnd(s.id, call.caller));
  return e2b::ListedSandbox{
      .sandbox_id = s.id,
      .template_id = s.template_id,
      .envd_version = std::string(kEnvdVersion),
      .started_at = record.created_at,
      // A box without an end lives as long as the server: a year is E2B's "far away".
      .end_at = end.value_or(std::chrono::system_clock::now() + std::chrono::hours(24 * 365)),
      .cpus = s.cpus,
      .memory_mib = s.memory_mib,
      .disk_mib = s.disk_mib,
      .metadata = s.metadata};
}

// E2B's network options as codebox's: no way out unless asked (unlike E2B, whose sandboxes
// are open by default), the hosts of allowOut, or any public address for
// allow_internet_access. codebox's proxy has no deny list: denyOut may only say "all"
// (the form the SDK uses with allowOut).
Status AddNetwork(const e2b::NewSandbox& request, json* box) {
  for (const std::string& deny : request.deny_out) {
    if (deny != "0.0.0.0/0" && deny != "::/0") {
      return InvalidArgument(
          "network.denyOut other than 0.0.0.0/0 is not supported by codebox: "
          "list the hosts a sandbox may reach in network.allowOut");
    }
  }
  if (!request.allow_out.empty()) {
    (*box)["allow_hosts"] = request.allow_out;
  } else if (request.allow_internet_access.value_or(false) && request.deny_out.empty()) {
    (*box)["network"] = "open";
  }
  return Status::Ok();
}

// Forgets the sandboxes whose boxes the registry no longer holds (reaped, or destroyed
// through /v1), so that the table never outgrows the registry for long.
void ForgetGone(Call& call) {
  for (const E2bSandbox& s : call.context.e2b.All()) {
    if (!call.context.registry->Get(s.id).ok()) call.context.e2b.Remove(s.id);
  }
}

void CreateSandbox(Call& call) {
  ForgetGone(call);
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return RespondE2bError(call, body.status());
  auto request = e2b::NewSandboxFromJson(*body);
  if (!request.ok()) return RespondE2bError(call, request.status());
  const ApiOptions& o = call.context.options;
  auto mapped = o.e2b_templates.find(request->template_id);
  std::map<std::string, std::string> env = {{"HOME", std::string(kE2bHome)}};
  for (const auto& [k, v] : request->env_vars) env[k] = v;
  json box = {{"image", mapped == o.e2b_templates.end() ? request->template_id : mapped->second},
              {"workdir", kE2bHome},
              {"env", env},
              // The box lives as long as the server allows; the sandbox's timeout ends it
              // sooner (the registry's lifetime, which setTimeout moves).
              {"box_timeout", "none"}};
  if (Status st = AddNetwork(*request, &box); !st.ok()) return RespondE2bError(call, st);
  auto options = DecodeBoxOptions(box, o.defaults, o.ceilings);
  if (!options.ok()) return RespondE2bError(call, options.status());
  if (Status st = EnsureImage(call, *options); !st.ok()) return RespondE2bError(call, st);
  // Code runs as E2B's `user`, which every recipe image holds; an image without that account
  // (someone's OCI image) runs as its own user.
  if (box::ImageHasUser(*options, image::kBoxUserName)) options->user = image::kBoxUserName;
  auto record = call.context.registry->Create(*options, call.Owner());
  if (!record.ok()) return RespondE2bError(call, record.status());
  call.box_id = record->id;
  const seconds timeout = request->timeout_s ? seconds(*request->timeout_s) : kDefaultTimeout;
  if (auto moved = call.context.registry->SetLifetime(record->id, timeout, call.caller);
      !moved.ok()) {
    return RespondE2bError(call, moved.status());
  }
  E2bSandbox sandbox = call.context.e2b.Add(E2bSandbox{.id = record->id,
                                                       .tenant = record->tenant,
                                                       .access_token = {},
                                                       .template_id = request->template_id,
                                                       .metadata = request->metadata,
                                                       .cpus = options->cpus,
                                                       .memory_mib = options->memory_mib,
                                                       .disk_mib = options->disk_mib});
  call.RespondJson(201, Answer(sandbox));
}

// Connect: a running sandbox's timeout is only ever extended (E2B's rule).
void ConnectSandbox(Call& call, std::string_view id) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return RespondE2bError(call, body.status());
  auto timeout = e2b::TimeoutFromJson(*body, /*required=*/false);
  if (!timeout.ok()) return RespondE2bError(call, timeout.status());
  auto sandbox = FindSandbox(call, id);
  if (!sandbox.ok()) return RespondE2bError(call, sandbox.status());
  call.box_id = sandbox->id;
  if (*timeout) {
    auto end = call.context.registry->LifetimeEnd(sandbox->id, call.caller);
    const auto wanted = std::chrono::system_clock::now() + seconds(**timeout);
    if (end.ok() && end->has_value() && **end < wanted) {
      (void)call.context.registry->SetLifetime(sandbox->id, seconds(**timeout), call.caller);
    }
  }
  call.RespondJson(200, Answer(*sandbox));
}

void ListSandboxes(Call& call) {
  const auto& query = call.request.query;
  std::map<std::string, std::string> filter;
  if (auto it = query.find("metadata"); it != query.end()) {
    auto parsed = e2b::MetadataFilterFromQuery(it->second);
    if (!parsed.ok()) return RespondE2bError(call, parsed.status());
    filter = std::move(*parsed);
  }
  // Every sandbox runs: one asked for only in other states (paused) lists none.
  if (auto it = query.find("state");
      it != query.end() && it->second.find("running") == std::string::npos) {
    call.RespondJson(200, json::array());
    return;
  }
  size_t limit = 100;
  if (auto it = query.find("limit"); it != query.end()) {
    const std::optional<uint64_t> n = base::ParseDecimal(it->second, 1000);
    if (!n || *n < 1) return RespondE2bError(call, InvalidArgument("limit must be 1..1000"));
    limit = static_cast<size_t>(*n);
  }
  const std::string next = query.contains("nextToken") ? query.at("nextToken") : "";
  json page = json::array();
  std::string next_token;
  for (const E2bSandbox& s : call.context.e2b.All()) {  // ordered by id: pages are stable
    if (s.id <= next && !next.empty()) continue;
    if (!call.caller.Sees(s.tenant)) continue;
    bool matches = std::all_of(filter.begin(), filter.end(), [&](const auto& kv) {
      auto it = s.metadata.find(kv.first);
      return it != s.metadata.end() && it->second == kv.second;
    });
    if (!matches) continue;
    auto listed = Listed(call, s);
    if (!listed.ok()) {
      if (!call.context.registry->Get(s.id).ok()) call.context.e2b.Remove(s.id);  // gone
      continue;
    }
    if (page.size() == limit) {
      next_token = page.back()["sandboxID"].get<std::string>();
      break;
    }
    page.push_back(e2b::ListedSandboxToJson(*listed));
  }
  http::Response response;
  response.body = base::JsonText(page);
  if (!next_token.empty()) response.headers.emplace_back("X-Next-Token", next_token);
  (void)call.exchange.Respond(std::move(response));
}

void GetSandbox(Call& call, std::string_view id) {
  auto sandbox = FindSandbox(call, id);
  if (!sandbox.ok()) return RespondE2bError(call, sandbox.status());
  call.box_id = sandbox->id;
  auto listed = Listed(call, *sandbox);
  if (!listed.ok()) return RespondE2bError(call, SandboxNotFound(id));
  json detail = e2b::ListedSandboxToJson(*listed);
  detail["lifecycle"] = {{"onTimeout", "kill"}, {"autoResume", false}};
  call.RespondJson(200, detail);
}

void SetSandboxTimeout(Call& call, std::string_view id) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return RespondE2bError(call, body.status());
  auto timeout = e2b::TimeoutFromJson(*body, /*required=*/true);
  if (!timeout.ok()) return RespondE2bError(call, timeout.status());
  auto sandbox = FindSandbox(call, id);
  if (!sandbox.ok()) return RespondE2bError(call, sandbox.status());
  call.box_id = sandbox->id;
  auto moved = call.context.registry->SetLifetime(sandbox->id, seconds(**timeout), call.caller);
  if (!moved.ok()) return RespondE2bError(call, SandboxNotFound(id));
  call.RespondNoContent();
}

void KillSandbox(Call& call, std::string_view id) {
  if (!ParseBoxId(id).has_value()) return RespondE2bError(call, SandboxNotFound(id));
  call.box_id = std::string(id);
  Status st = call.context.registry->Destroy(id, call.caller);
  if (!st.ok()) return RespondE2bError(call, SandboxNotFound(id));
  call.context.e2b.Remove(id);
  call.RespondNoContent();
}

// One sample, now, of what the box's boundary measures on the host (Box::Usage: a jail's
// cgroup, a vm's QEMU process); its CPU figure is the average since the previous call (the
// first: since the box started). A box whose driver measures nothing answers an empty series,
// which the SDK takes as such. start and end are not read: there is no history to choose from.
void SandboxMetrics(Call& call, std::string_view id) {
  auto sandbox = FindSandbox(call, id);
  if (!sandbox.ok()) return RespondE2bError(call, sandbox.status());
  auto record = call.context.registry->Get(sandbox->id, call.caller);
  auto lease = call.context.registry->Acquire(sandbox->id, call.caller);
  if (!record.ok() || !lease.ok()) return RespondE2bError(call, SandboxNotFound(id));
  auto usage = lease->box().Usage();
  if (!usage.ok()) return call.RespondJson(200, json::array());
  const auto now = std::chrono::system_clock::now();
  const E2bCpuSample before =
      call.context.e2b.SwapCpuSample(sandbox->id, {usage->cpu_time, now})
          .value_or(E2bCpuSample{std::chrono::microseconds(0), record->created_at});
  const double wall_us = std::chrono::duration<double, std::micro>(now - before.at).count();
  const double cpu_us = static_cast<double>((usage->cpu_time - before.cpu_time).count());
  const double pct = wall_us > 0 ? 100.0 * cpu_us / wall_us / std::max(sandbox->cpus, 0.01) : 0.0;
  const e2b::SandboxMetric metric{
      .at = now,
      .cpu_count = std::max(1, static_cast<int>(std::ceil(sandbox->cpus))),
      .cpu_used_pct = std::clamp(pct, 0.0, 100.0),
      .mem_used = usage->memory_bytes,
      .mem_cache = usage->disk_bytes,  // the scratch files: the kernel counts them as cache
      .mem_total = sandbox->memory_mib << 20,
      .disk_used = usage->disk_bytes,
      .disk_total = sandbox->disk_mib << 20};
  call.RespondJson(200, json::array({e2b::SandboxMetricToJson(metric)}));
}

// 501: the SDK raises its SandboxError with this message (never 409: pause() would take that
// for "already paused" and return false).
void Unsupported(Call& call, std::string_view what) {
  RespondE2bStatus(
      call, 501, InvalidArgument(std::string(what) + " is not supported by codebox (docs/e2b.md)"));
}

void ControlPlane(Call& call) {
  std::vector<std::string_view> p = PathSegments(call.request.path);
  const std::string& method = call.request.method;
  if (!p.empty() && (p[0] == "v2" || p[0] == "v3")) {
    p.erase(p.begin());  // v2 of create, connect and list: the same bodies codebox reads
  }
  if (p.empty()) return RespondE2bError(call, NotFound("no such E2B route"));
  if (p[0] != "sandboxes") {
    // snapshots, templates (and their builds), volumes, secrets
    return Unsupported(call, std::string(p[0]));
  }
  if (p.size() == 1) {
    if (method == "POST") return CreateSandbox(call);
    if (method == "GET") return ListSandboxes(call);
  } else if (p.size() == 2) {
    if (method == "GET") return GetSandbox(call, p[1]);
    if (method == "DELETE") return KillSandbox(call, p[1]);
  } else if (p.size() == 3) {
    if (p[2] == "connect" && method == "POST") return ConnectSandbox(call, p[1]);
    if (p[2] == "timeout" && method == "POST") return SetSandboxTimeout(call, p[1]);
    if (p[2] == "metrics" && method == "GET") return SandboxMetrics(call, p[1]);
    if (p[2] == "pause" || p[2] == "resume") return Unsupported(call, "pausing a sandbox");
    if (p[2] == "fork") return Unsupported(call, "forking a sandbox");
    if (p[2] == "snapshots") return Unsupported(call, "snapshots");
    if (p[2] == "network") return Unsupported(call, "changing a running sandbox's network");
    if (p[2] == "refreshes") return SetSandboxTimeout(call, p[1]);
  }
  RespondE2bError(call, NotFound("no E2B route " + base::Excerpt(method) + " " +
                                 base::Excerpt(call.request.path)));
}

}  // namespace

bool IsE2bSandboxRequest(const http::Request& request) {
  return request.headers.contains("e2b-sandbox-id") || IsSignedFilesRequest(request);
}

bool IsSignedFilesRequest(const http::Request& request) {
  return request.path == "/files" && !request.headers.contains("e2b-sandbox-id") &&
         request.query.contains("signature");
}

bool IsE2bRequest(const http::Request& request) {
  if (IsE2bSandboxRequest(request)) return true;
  std::vector<std::string_view> p = PathSegments(request.path);
  if (p.empty()) return false;
  if (p[0] == "v2" || p[0] == "v3") {
    return p.size() >= 2 && (p[1] == "sandboxes" || p[1] == "templates");
  }
  return p[0] == "sandboxes" || p[0] == "snapshots" || p[0] == "templates" || p[0] == "volumes" ||
         p[0] == "secrets";
}

void RespondE2bStatus(Call& call, int http_status, const Status& status) {
  // The status line and headers (Retry-After for 429 and 503) as codebox's own errors have them.
  http::Response response = http::ErrorResponse(http_status, "", "");
  response.body = base::JsonText(e2b::ErrorBody(http_status, status.message()));
  call.NoteError(status);
  (void)call.exchange.Respond(std::move(response));
}

void RespondE2bError(Call& call, const Status& status) {
  RespondE2bStatus(call, http::ErrorResponse(status).status, status);
}

void E2bRoute(Call& call) {
  if (IsE2bSandboxRequest(call.request)) return E2bSandboxRoute(call);
  ControlPlane(call);
}

}  // namespace codebox::server
