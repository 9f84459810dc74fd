// Boxes (create, list, get, delete) and the server's own routes (health, status, metrics,
// the OpenAPI document).
#include <chrono>

#include "api/box_record.h"
#include "api/egress_record.h"
#include "base/text.h"
#include "server/api_internal.h"
#include "server/api_json.h"
#include "server/api_request.h"
#include "server/openapi.h"

namespace codebox::server {

using nlohmann::json;

namespace {
// This node's boxes that the caller may see.
json TenantBoxesJson(const Call& call) {
  json boxes = json::array();
  for (const BoxRecord& record : call.context.registry->List(call.caller)) {
    boxes.push_back(api::BoxToJson(record));
  }
  return boxes;
}
}  // namespace

std::string_view OpenApiDocument() { return kOpenApiJson; }

void CreateBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  const ApiOptions& options = call.context.options;
  auto box_options = DecodeBoxOptions(*body, options.defaults, options.ceilings);
  if (!box_options.ok()) return call.RespondError(box_options.status());
  if (PlaceOnPeer(call, box_options->driver)) return;
  if (Status st = EnsureImage(call, *box_options); !st.ok()) return call.RespondError(st);
  auto record = call.context.registry->Create(*box_options, call.Owner());
  if (!record.ok() && record.status().code() == StatusCode::kResourceExhausted &&
      PlaceOnPeer(call, box_options->driver, /*local_refused=*/true)) {
    return;
  }
  if (!record.ok()) return call.RespondError(record.status());
  call.box_id = record->id;
  call.RespondJson(201, api::BoxToJson(*record));
}

void ListBoxes(Call& call) {
  auto scope = call.request.query.find("scope");
  const std::string scope_text = scope == call.request.query.end() ? "cluster" : scope->second;
  if (scope_text != "cluster" && scope_text != "node") {
    return call.RespondError(InvalidArgument("scope must be cluster or node, not '" +
                                             base::TerminalSafe(scope_text, 40) + "'"));
  }
  json body = {{"boxes", TenantBoxesJson(call)}};
  if (scope_text == "cluster") AddPeerBoxes(call, &body);
  call.RespondJson(200, body);
}

void GetBox(Call& call) {
  auto record = call.context.registry->Get(call.box_id, call.caller);
  if (!record.ok()) return call.RespondError(record.status());
  auto log = call.context.registry->EgressLog(call.box_id, call.caller);
  if (!log.ok()) return call.RespondError(log.status());
  call.RespondJson(200, api::BoxToJson(*record, &*log));
}

void DeleteBox(Call& call) {
  // its last connections first
  auto log = call.context.registry->EgressLog(call.box_id, call.caller);
  if (log.ok()) ReportEgress(call.context, call.box_id, *log, true);
  Status st = call.context.registry->Destroy(call.box_id, call.caller);
  if (!st.ok()) return call.RespondError(st);
  call.RespondNoContent();
}

namespace {
json PoolsJson(const BoxRegistry& registry) {
  json pools = json::array();
  for (const PoolStatus& pool : registry.Pools()) pools.push_back(PoolJson(pool));
  return pools;
}

json PeersJson(const Peers* peers) {
  json out = json::array();
  if (peers == nullptr) return out;
  for (const Peer& peer : peers->List()) {
    json p = {{"node", peer.node},
              {"address", peer.address.ToString()},
              {"state", peer.up ? "up" : "down"},
              {"boxes", peer.load.boxes},
              {"max_boxes", peer.load.max_boxes},
              {"drivers", peer.load.drivers},
              {"full", peer.load.full()},
              {"busy", peer.load.busy()}};
    if (!peer.up) p["error"] = peer.error;
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

void Healthz(Call& call) {
  const BoxRegistry& registry = *call.context.registry;
  call.RespondJson(
      200, {{"status", "ok"}, {"boxes", registry.box_count()}, {"pools", PoolsJson(registry)}});
}

void ServerStatus(Call& call) {
  const Api::Context& context = call.context;
  json boxes = TenantBoxesJson(call);
  double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - context.started).count();
  call.RespondJson(200, {{"version", context.options.version},
                         {"boxes", std::move(boxes)},
                         {"pools", PoolsJson(*context.registry)},
                         {"max_boxes", context.options.max_boxes},
                         {"listen", context.options.listen},
                         {"node", context.registry->node()},
                         {"incarnation", context.registry->incarnation()},
                         {"drivers", context.options.drivers},
                         {"peers", PeersJson(context.options.peers)},
                         {"uptime_s", uptime}});
}

void MetricsText(Call& call) {
  const auto& render = call.context.options.hooks.metrics_text;
  if (!render) return call.RespondError(NotFound("this server keeps no metrics"));
  http::Response response;
  response.content_type = "text/plain; version=0.0.4";
  response.body = render(call.caller);
  (void)call.exchange.Respond(std::move(response));
}

void OpenApi(Call& call) {
  http::Response response;
  response.body = std::string(OpenApiDocument());
  (void)call.exchange.Respond(std::move(response));
}

}  // namespace codebox::server
