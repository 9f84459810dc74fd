#include "server/api.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "server/api_e2b.h"
#include "server/api_internal.h"
#include "server/api_origin.h"
#include "server/api_request.h"
#include "server/box_id.h"

namespace codebox::server {
namespace {

using nlohmann::json;

struct Route {
  std::string_view method;
  std::string_view pattern;  // segments; "{id}" is a box id, "{pid}" a process's pid
  void (*handle)(Call&);
};

constexpr Route kRoutes[] = {
    {"GET", "/healthz", Healthz},
    {"GET", "/metrics", MetricsText},
    {"GET", "/v1/status", ServerStatus},
    {"GET", "/v1/load", Load},
    {"GET", "/v1/openapi.json", OpenApi},
    {"POST", "/v1/run", RunOneShot},
    {"POST", "/v1/boxes", CreateBox},
    {"GET", "/v1/boxes", ListBoxes},
    {"GET", "/v1/boxes/{id}", GetBox},
    {"DELETE", "/v1/boxes/{id}", DeleteBox},
    {"POST", "/v1/boxes/{id}/exec", ExecInBox},
    {"POST", "/v1/boxes/{id}/python", PythonInBox},
    {"POST", "/v1/boxes/{id}/run_code", RunCodeInBox},
    {"POST", "/v1/boxes/{id}/restart", RestartKernel},
    {"POST", "/v1/boxes/{id}/interrupt", InterruptCode},
    {"POST", "/v1/boxes/{id}/packages", InstallPackagesInBox},
    {"PUT", "/v1/boxes/{id}/network", SetNetworkOfBox},
    {"GET", "/v1/boxes/{id}/egress", EgressLogLines},
    {"PUT", "/v1/boxes/{id}/files", PutFile},
    {"GET", "/v1/boxes/{id}/files", GetFile},
    {"DELETE", "/v1/boxes/{id}/files", DeleteFile},
    {"POST", "/v1/boxes/{id}/processes", StartProcessInBox},
    {"GET", "/v1/boxes/{id}/processes", ListProcessesInBox},
    {"DELETE", "/v1/boxes/{id}/processes/{pid}", KillProcessInBox},
    {"GET", "/v1/boxes/{id}/processes/{pid}/events", AttachToProcess},
    {"POST", "/v1/boxes/{id}/processes/{pid}/stdin", WriteProcessStdin},
    {"POST", "/v1/boxes/{id}/processes/{pid}/signal", SignalProcessInBox},
    {"POST", "/v1/ask", Ask},
    {"GET", "/", PlaygroundFile},
    {"GET", "/playground/playground.js", PlaygroundFile},
    {"GET", "/playground/playground.css", PlaygroundFile},
    {"POST", "/mcp", McpPost},
    {"DELETE", "/mcp", McpDelete},
};

// "b-<16 hex>.<node>" or "b-<16 hex>" (box_id.h): the only ids registries make.
bool IsBoxId(std::string_view s) { return ParseBoxId(s).has_value(); }

enum class Match { kNo, kBadId, kYes };

// A pid in a box: 1..2^22 (the kernel's pid_max at most), in decimal without a sign or
// leading zero; else 0.
int ParsePid(std::string_view s) {
  if (s.empty() || s.size() > 7 || s[0] == '0') return 0;
  int pid = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  return pid <= (1 << 22) ? pid : 0;
}

// Whether `path` has the shape of `pattern`; *id gets the {id} segment, *pid the {pid} one.
Match MatchPattern(std::string_view pattern, const std::vector<std::string_view>& path,
                   std::string* id, int* pid) {
  std::vector<std::string_view> want = PathSegments(pattern);
  if (want.size() != path.size()) return Match::kNo;
  Match result = Match::kYes;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "{id}") {
      if (!IsBoxId(path[i])) result = Match::kBadId;
      *id = std::string(path[i]);
    } else if (want[i] == "{pid}") {
      *pid = ParsePid(path[i]);
      if (*pid == 0) return Match::kNo;
    } else if (want[i] != path[i]) {
      return Match::kNo;
    }
  }
  return result;
}

// Remembers the status a route answered with, for metrics and the log.
// Also names the node that answered (X-Codebox-Node), unless a forwarded answer names the one
// that held the box.
class RecordingExchange : public http::Exchange {
 public:
  RecordingExchange(http::Exchange& inner, std::string node)
      : inner_(inner), node_(std::move(node)) {}
  Status Respond(http::Response response) override {
    status_ = response.status;
    if (!HasNode(response.headers) && !node_.empty()) {
      response.headers.emplace_back("X-Codebox-Node", node_);
    }
    return inner_.Respond(std::move(response));
  }
  Status BeginStream(int status, std::string_view content_type, const Headers& headers) override {
    status_ = status;
    Headers named = headers;
    if (!HasNode(named) && !node_.empty()) named.emplace_back("X-Codebox-Node", node_);
    return inner_.BeginStream(status, content_type, named);
  }
  Status SendChunk(std::string_view bytes) override { return inner_.SendChunk(bytes); }
  bool ClientGone() const override { return inner_.ClientGone(); }
  int status() const { return status_; }

 private:
  static bool HasNode(const Headers& headers) {
    return std::any_of(headers.begin(), headers.end(),
                       [](const auto& h) { return h.first == "x-codebox-node"; });
  }

  http::Exchange& inner_;
  std::string node_;
  int status_ = 0;
};

// Who sent `request`: the tenant of the token it carried.
Caller CallerOf(const Api::Context& context, const http::Request& request) {
  const ApiOptions& o = context.options;
  if (!o.tokens_required || o.grants.empty()) return {std::string(kLocalTenant), true};
  if (request.token >= 0 && static_cast<size_t>(request.token) < o.grants.size()) {
    const TokenGrant& grant = o.grants[request.token];
    return {grant.tenant, grant.admin};
  }
  return {};  // a public path without a token: no tenant's
}

// Routes that answer no tenant's data and cost nearly nothing: not counted in a tenant's
// requests in flight (a peer's load probe carries the replica's token).
// E2B's in-sandbox requests are counted once their sandbox says whose they are (api_e2b_envd.cc).
bool IsUncounted(std::string_view route, const http::Request& request) {
  return route == "/healthz" || route == "/v1/load" || IsE2bSandboxRequest(request);
}

// E2B's routes (api_e2b.cc) are matched there: none of them starts with /v1.
constexpr Route kE2bRoute = {"*", "e2b", E2bRoute};

}  // namespace

std::vector<std::string_view> PathSegments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > pos) out.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

std::shared_ptr<void> HoldRequest(Api::Context& context, const std::string& tenant) {
  return context.in_flight.TryHold(tenant, context.quotas.For(tenant).max_requests);
}

Status RequestsExhausted(const Api::Context& context, const std::string& tenant) {
  return ResourceExhausted("tenant " + tenant + " has " +
                           std::to_string(context.quotas.For(tenant).max_requests) +
                           " requests in flight, its quota (--tenant-max-requests, or "
                           "max-requests= in the token file); retry when one has finished");
}

BoxOwner Call::Owner() const {
  const Api::Context& c = context;
  BoxOwner owner{.tenant = caller.tenant};
  // A server without tokens has one tenant: nothing to share out.
  if (c.options.tokens_required) owner.max_boxes = c.quotas.For(caller.tenant).max_boxes;
  return owner;
}

void Call::RespondJson(int status, const json& body) {
  http::Response response;
  response.status = status;
  response.body = base::JsonText(body);
  (void)exchange.Respond(std::move(response));
}

void Call::RespondNoContent() {
  http::Response response;
  response.status = 204;
  response.content_type.clear();
  (void)exchange.Respond(std::move(response));
}

void Call::RespondError(const Status& status) {
  http::Response response = http::ErrorResponse(status);
  if (response.status == 429) {
    bool has_retry = std::any_of(response.headers.begin(), response.headers.end(),
                                 [](const auto& h) { return h.first == "Retry-After"; });
    if (!has_retry) response.headers.emplace_back("Retry-After", "1");
  }
  NoteError(status);
  (void)exchange.Respond(std::move(response));
}

void Call::NoteError(const Status& status) {
  error = status;
  const ApiHooks& hooks = context.options.hooks;
  if (hooks.on_error) hooks.on_error(StatusCodeName(status.code()));
}

void Call::ObserveExec(std::string_view kind, std::chrono::steady_clock::time_point since) {
  const ApiHooks& hooks = context.options.hooks;
  if (!hooks.on_exec) return;
  hooks.on_exec(kind,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count());
}

Api::Api(ApiOptions options, BoxRegistry* registry) : context_(std::make_unique<Context>()) {
  context_->options = std::move(options);
  context_->registry = registry;
  const ApiOptions& o = context_->options;
  context_->quotas = TenantQuotas(o.tenant_limits, o.grants);
  McpSessionsOptions mcp;
  // An MCP session's box is the box POST /v1/boxes {} makes: the server's defaults, checked.
  auto box_options = DecodeBoxOptions(nlohmann::json::object(), o.defaults, o.ceilings);
  mcp.box_options = box_options.ok() ? *box_options : o.defaults;  // else Create says why
  mcp.max_sessions = o.max_boxes;
  mcp.idle_timeout = o.idle_timeout;
  mcp.session.server_version = o.version;
  mcp.node = registry->node();
  context_->mcp = std::make_unique<McpSessions>(std::move(mcp), registry);
}

Api::~Api() = default;

void Api::Handle(const http::Request& request, http::Exchange& exchange) {
  auto start = std::chrono::steady_clock::now();
  RecordingExchange recording(exchange, context_->registry->node());
  std::vector<std::string_view> path = PathSegments(request.path);
  const Route* found = IsE2bRequest(request) ? &kE2bRoute : nullptr;
  bool path_known = false;
  bool bad_id = false;
  std::string id;
  int pid = 0;
  std::string allowed;
  for (const Route& route : kRoutes) {
    if (found) break;  // E2B's, or the route matched below
    Match m = MatchPattern(route.pattern, path, &id, &pid);
    if (m == Match::kNo) continue;
    if (m == Match::kBadId) {
      bad_id = true;
      continue;
    }
    path_known = true;
    allowed += (allowed.empty() ? "" : ", ") + std::string(route.method);
    if (route.method == request.method) {
      found = &route;
      break;
    }
  }
  std::string_view route_name = found ? found->pattern : "unmatched";
  Call call{*context_,      request,
            recording,      found ? id : std::string(),
            Status::Ok(),   CallerOf(*context_, request),
            found ? pid : 0};
  // A tenant's share of the requests in flight (only where there are tenants to share among).
  std::shared_ptr<void> in_flight;
  if (found && context_->options.tokens_required && !IsUncounted(found->pattern, request)) {
    in_flight = HoldRequest(*context_, call.caller.tenant);
  }
  // Before any route: a page of another site, or a rebound DNS name, gets nothing.
  std::string refused = RefusedOrigin(request, context_->options.tokens_required);
  if (!refused.empty()) {
    call.NoteError(PermissionDenied(refused));
    (void)recording.Respond(http::ErrorResponse(403, "forbidden", refused));
  } else if (found && context_->options.tokens_required && !IsUncounted(found->pattern, request) &&
             !in_flight) {
    call.RespondError(RequestsExhausted(*context_, call.caller.tenant));
  } else if (found) {
    if (!RouteToBoxNode(call)) found->handle(call);
  } else if (path_known) {
    // 405 names the methods the path takes (Allow, RFC 9110).
    http::Response response =
        http::ErrorResponse(405, "method_not_allowed",
                            base::Excerpt(request.method) + " is not allowed on " +
                                base::Excerpt(request.path) + "; allowed: " + allowed);
    response.headers.emplace_back("Allow", allowed);
    call.error = Status(StatusCode::kInvalidArgument, "method not allowed");
    if (context_->options.hooks.on_error) context_->options.hooks.on_error("method_not_allowed");
    (void)recording.Respond(std::move(response));
  } else {
    // The client's path and id quoted only in part: they may be as long as the header limit.
    std::string why =
        bad_id ? "no box '" + base::Excerpt(id) + "': box ids look like b-<16 hex digits>.<node>"
               : "no route " + base::Excerpt(request.path) + " (see GET /v1/openapi.json)";
    call.RespondError(NotFound(why));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ApiHooks& hooks = context_->options.hooks;
  // What the box's proxy did during (or since) this request; DELETE reported it already.
  if (hooks.on_egress && !call.box_id.empty() && request.method != "DELETE") {
    auto log = context_->registry->EgressLog(call.box_id, call.caller);
    if (log.ok()) ReportEgress(*context_, call.box_id, *log, false);
  }
  if (hooks.on_request) {
    hooks.on_request(RequestReport{.request = request,
                                   .route = route_name,
                                   .status = recording.status(),
                                   .seconds = seconds,
                                   .box_id = call.box_id,
                                   .tenant = call.caller.tenant,
                                   .error = call.error});
  }
}

}  // namespace codebox::server
