// What the API's route handlers share (api.cc routes to them; one file per concern:
// api_boxes.cc, api_exec.cc, api_files.cc). Not part of any public interface.
#ifndef CODEBOX_SERVER_API_INTERNAL_H_
#define CODEBOX_SERVER_API_INTERNAL_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "api/box_record.h"
#include "codebox/status.h"
#include "http/server.h"
#include "server/api.h"
#include "server/box_registry.h"
#include "server/e2b_sandboxes.h"
#include "server/egress_audit.h"
#include "server/mcp_sessions.h"

namespace codebox::server {

struct Api::Context {
  ApiOptions options;
  BoxRegistry* registry = nullptr;
  TenantQuotas quotas;               // from options.grants and options.tenant_limits
  TenantCounter in_flight;           // requests in flight per tenant
  std::unique_ptr<McpSessions> mcp;  // /mcp (api_mcp.cc)
  EgressAudit egress;                // which egress records went to hooks.on_egress
  E2bSandboxes e2b;                  // E2B's face (api_e2b.cc): tokens and metadata
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

// One request on its way through a route.
struct Call {
  Api::Context& context;
  const http::Request& request;
  http::Exchange& exchange;
  std::string box_id;  // the route's {id}, already checked; "" when the route has none
  Status error;        // the error answered, for the report
  Caller caller;       // who sent it (a tenant sees and touches only its own)
  int pid = 0;         // the route's {pid}, 1..2^22; 0 when the route has none

  // What a box this call makes belongs to: the caller's tenant, within its quota.
  BoxOwner Owner() const;

  void RespondJson(int status, const nlohmann::json& body);
  void RespondNoContent();
  void RespondError(const Status& status);
  // Counts an error answered in another form (an `error` event) and keeps it for the report.
  void NoteError(const Status& status);
  // Reports a box call's duration (from `since` to now) to the on_exec hook.
  void ObserveExec(std::string_view kind, std::chrono::steady_clock::time_point since);
};

// A request path's segments ("/v1/boxes/b-1" -> v1, boxes, b-1; empty ones skipped).
std::vector<std::string_view> PathSegments(std::string_view path);

// A place among `tenant`'s requests in flight, held until the pointer goes; null when the
// tenant has its quota's worth in flight already (RequestsExhausted says so).
std::shared_ptr<void> HoldRequest(Api::Context& context, const std::string& tenant);
Status RequestsExhausted(const Api::Context& context, const std::string& tenant);

// Route handlers (api_boxes.cc).
void CreateBox(Call& call);
void ListBoxes(Call& call);
void GetBox(Call& call);
void DeleteBox(Call& call);
void Healthz(Call& call);
void ServerStatus(Call& call);
void MetricsText(Call& call);
void OpenApi(Call& call);
// api_exec.cc
void ExecInBox(Call& call);
void PythonInBox(Call& call);
void RunCodeInBox(Call& call);
void RestartKernel(Call& call);
void InterruptCode(Call& call);
void RunOneShot(Call& call);
// api_processes.cc
void StartProcessInBox(Call& call);
void ListProcessesInBox(Call& call);
void AttachToProcess(Call& call);
void WriteProcessStdin(Call& call);
void SignalProcessInBox(Call& call);
void KillProcessInBox(Call& call);
// api_files.cc
void PutFile(Call& call);
void GetFile(Call& call);
void DeleteFile(Call& call);
// api_playground.cc: the web page at / and its files under /playground/.
void PlaygroundFile(Call& call);
// api_ask.cc: POST /v1/ask, the ask loop over server-sent events.
void Ask(Call& call);
// api_network.cc: POST /v1/boxes/{id}/packages; and the egress records of a box, each once, to
// hooks.on_egress (`log`: the box's whole log now; `gone`: the box is destroyed after it).
void InstallPackagesInBox(Call& call);
void SetNetworkOfBox(Call& call);  // PUT /v1/boxes/{id}/network
void EgressLogLines(Call& call);   // GET /v1/boxes/{id}/egress (JSON lines)
void ReportEgress(Api::Context& context, const std::string& box_id,
                  const std::vector<EgressRecord>& log, bool gone);
// api_mcp.cc
void McpPost(Call& call);
void McpDelete(Call& call);
// api_forward.cc: scale-out. RouteToBoxNode answers (forwards, or 404 box_lost) a request
// whose box id names another node, or a former life of this one, and says whether it did.
// PlaceOnPeer forwards a create or one-shot run to a less loaded peer when this node is full,
// busy or does not offer `driver` (or `local_refused`: it was not full when asked, but its
// registry then refused, a create racing another for the last slot), and says whether it did.
// RouteToSessionNode forwards an /mcp request whose Mcp-Session-Id names another node.
// Forward answers the call from `node`'s replica at `address`, or returns why it could not
// reach it (nothing answered yet).
bool IsForwarded(const http::Request& request);
Status Forward(Call& call, const http::Address& address, std::string_view node);
bool RouteToBoxNode(Call& call);
bool RouteToSessionNode(Call& call);
// GET /v1/boxes of a replica with peers: every peer's own boxes (?scope=node), asked in
// parallel and read by api::BoxListFromJson, added to list->boxes; those that did not answer
// (or answered no box list) go in list->unreachable.
void AddPeerBoxes(Call& call, api::BoxList* list);
bool PlaceOnPeer(Call& call, DriverKind driver, bool local_refused = false);
void Load(Call& call);
// api_pulls.cc: before a client's box starts, its image: in the store, or pulled now if this
// server's pull policy allows it for this caller (image_pulls.h); the refusal or the pull's
// error otherwise. OK when the server has no policy (options.pulls null).
Status EnsureImage(Call& call, const BoxOptions& options);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_INTERNAL_H_
