// A box's network over the API: POST /v1/boxes/{id}/packages (pip install through the box's
// egress proxy, Box::InstallPackages), and each egress record of a box once to the server's
// log and metrics (hooks.on_egress).
#include <chrono>

#include "api/egress_record.h"
#include "api/exec_result.h"
#include "api/requests.h"
#include "base/json.h"
#include "server/api_internal.h"
#include "server/api_request.h"

namespace codebox::server {

void InstallPackagesInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = api::PackagesRequestFromJson(*body);
  if (!request.ok()) return call.RespondError(request.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  const auto start = std::chrono::steady_clock::now();
  auto result = lease->box().InstallPackages(request->packages, request->options);
  call.ObserveExec("install", start);
  if (!result.ok()) return call.RespondError(result.status());
  call.RespondJson(200, api::ExecResultToJson(*result));
}

void SetNetworkOfBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = api::NetworkRequestFromJson(*body);
  if (!request.ok()) return call.RespondError(request.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  Status st = lease->box().SetNetwork(request->network, request->allow_hosts);
  if (!st.ok()) return call.RespondError(st);
  call.RespondJson(200, {{"network", lease->box().info().network}});
}

// The box's egress log as JSON lines, one record a line (an audit export: `> box.jsonl`).
void EgressLogLines(Call& call) {
  auto log = call.context.registry->EgressLog(call.box_id, call.caller);
  if (!log.ok()) return call.RespondError(log.status());
  http::Response response;
  response.status = 200;
  response.content_type = "application/x-ndjson";
  for (const EgressRecord& r : *log)
    response.body += base::JsonText(api::EgressRecordToJson(r)) + "\n";
  (void)call.exchange.Respond(std::move(response));
}

void ReportEgress(Api::Context& context, const std::string& box_id,
                  const std::vector<EgressRecord>& log, bool gone) {
  const auto& on_egress = context.options.hooks.on_egress;
  if (on_egress) {
    for (const EgressRecord& r : context.egress.NewRecords(box_id, log)) on_egress(box_id, r);
  }
  if (gone) context.egress.Forget(box_id);
}

}  // namespace codebox::server
