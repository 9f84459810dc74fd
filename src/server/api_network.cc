// A box's network over the API: POST /v1/boxes/{id}/packages (pip install through the box's
// egress proxy, Box::InstallPackages), and each egress record of a box once to the server's
// log and metrics (hooks.on_egress).
#include <chrono>
#include <cmath>

#include "api/exec_result.h"
#include "base/json.h"
#include "server/api_internal.h"
#include "server/api_request.h"

namespace codebox::server {
namespace {

using nlohmann::json;

struct PackagesRequest {
  std::vector<std::string> packages;
  InstallOptions options;
};

// {"packages": ["name", ...], "index_url": "https://..." | null, "timeout": seconds | null}
StatusOr<PackagesRequest> DecodePackagesRequest(const json& body) {
  PackagesRequest out;
  for (const auto& [key, value] : body.items()) {
    if (key != "packages" && key != "index_url" && key != "timeout") {
      return InvalidArgument("unknown field '" + base::Excerpt(key) +
                             "' in a packages request; it takes packages, index_url, timeout");
    }
  }
  const auto packages = body.find("packages");
  if (packages == body.end() || !packages->is_array() || packages->empty()) {
    return InvalidArgument("packages: give a non-empty list of package names");
  }
  for (const json& p : *packages) {
    if (!p.is_string()) return InvalidArgument("packages: each must be a string, got " +
                                                base::JsonExcerpt(p));
    out.packages.push_back(p.get<std::string>());
  }
  const auto index = body.find("index_url");
  if (index != body.end() && !index->is_null()) {
    if (!index->is_string()) return InvalidArgument("index_url: must be a string or null");
    out.options.index_url = index->get<std::string>();
  }
  const auto timeout = body.find("timeout");
  if (timeout != body.end() && !timeout->is_null()) {
    const double s = timeout->is_number() ? timeout->get<double>() : NAN;
    if (!(s >= 0.001 && s <= 86400)) {
      return InvalidArgument("timeout: must be a number of seconds from 0.001 to 86400");
    }
    out.options.timeout = std::chrono::milliseconds(std::llround(s * 1000));
  }
  return out;
}

}  // namespace

void InstallPackagesInBox(Call& call) {
  auto body = ParseObject(call.request.body);
  if (!body.ok()) return call.RespondError(body.status());
  auto request = DecodePackagesRequest(*body);
  if (!request.ok()) return call.RespondError(request.status());
  auto lease = call.context.registry->Acquire(call.box_id, call.caller);
  if (!lease.ok()) return call.RespondError(lease.status());
  const auto start = std::chrono::steady_clock::now();
  auto result = lease->box().InstallPackages(request->packages, request->options);
  call.ObserveExec("install", start);
  if (!result.ok()) return call.RespondError(result.status());
  call.RespondJson(200, api::ExecResultToJson(*result));
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
