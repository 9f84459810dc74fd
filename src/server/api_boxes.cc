// Boxes (create, list, get, delete) and the server's own routes (health, status, metrics,
// the OpenAPI document).
#include <chrono>

#include "api/box_record.h"
#include "api/egress_record.h"
#include "api/server_status.h"
#include "base/text.h"
#include "server/api_internal.h"
#include "server/api_request.h"
#include "server/openapi.h"
#include "server/peers.h"

namespace codebox::server {

using nlohmann::json;

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
  api::BoxList list{.boxes = call.context.registry->List(call.caller), .unreachable = {}};
  if (scope_text == "cluster") AddPeerBoxes(call, &list);
  call.RespondJson(200, api::BoxListToJson(list));
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
std::vector<api::PeerStatus> PeerStatuses(const Peers* peers) {
  std::vector<api::PeerStatus> out;
  if (peers == nullptr) return out;
  for (const Peer& peer : peers->List()) {
    out.push_back({.node = peer.node,
                   .address = peer.address.ToString(),
                   .up = peer.up,
                   .error = peer.up ? "" : peer.error,
                   .boxes = peer.load.boxes,
                   .max_boxes = peer.load.max_boxes,
                   .drivers = peer.load.drivers,
                   .full = peer.load.full(),
                   .busy = peer.load.busy()});
  }
  return out;
}
}  // namespace

void Healthz(Call& call) {
  const BoxRegistry& registry = *call.context.registry;
  call.RespondJson(200,
                   api::HealthToJson({.boxes = registry.box_count(), .pools = registry.Pools()}));
}

void ServerStatus(Call& call) {
  const Api::Context& context = call.context;
  api::ServerStatus status;
  status.version = context.options.version;
  status.boxes = context.registry->List(call.caller);
  status.pools = context.registry->Pools();
  status.max_boxes = context.options.max_boxes;
  status.listen = context.options.listen;
  status.node = context.registry->node();
  status.incarnation = context.registry->incarnation();
  status.drivers = context.options.drivers;
  status.peers = PeerStatuses(context.options.peers);
  status.uptime = std::chrono::steady_clock::now() - context.started;
  call.RespondJson(200, api::ServerStatusToJson(status));
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
