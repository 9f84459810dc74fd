// Scale-out (docs/scale-out.md): a request for a box of another node is forwarded to that
// node's replica; a create or one-shot run that arrives at a full or busy node, or one that
// does not run the driver asked for, goes to the less loaded of two random peers. Forwarded
// requests carry X-Codebox-Forwarded-By and are never forwarded again, so a stale peer table
// cannot make a loop.
#include <algorithm>
#include <chrono>
#include <future>

#include "api/box_record.h"
#include "api/error.h"
#include "api/node_load.h"
#include "base/json.h"
#include "base/json_fields.h"
#include "http/client.h"
#include "http/request.h"
#include "server/api_internal.h"
#include "server/box_id.h"
#include "server/node_load.h"

namespace codebox::server {
namespace {

using nlohmann::json;

// Sent lower-case (header names are case-blind) and looked up so by Request::Header.
constexpr char kForwardedBy[] = "x-codebox-forwarded-by";
// Connecting to a peer: on one cluster network this takes milliseconds; past this it is down.
constexpr auto kPeerConnectTimeout = std::chrono::seconds(2);

// Request headers that go on with a forwarded request. Not Authorization (ForwardToken sends
// the client's token itself), not Origin or Host (the receiving replica checked them; the peer would
// judge them against its own address).
constexpr std::string_view kForwardedHeaders[] = {"accept", "mcp-session-id",
                                                  "mcp-protocol-version"};

// Listing a peer's boxes (GET /v1/boxes across the cluster): quick, and bounded.
constexpr auto kPeerListTimeout = std::chrono::seconds(5);
constexpr uint64_t kMaxPeerListBytes = 64ull << 20;

// Upstream headers worth relaying; the rest (length, connection, date, request id) are the
// forwarding server's own.
constexpr std::string_view kRelayedHeaders[] = {"retry-after", "allow", "mcp-session-id",
                                                "x-codebox-node"};

void RespondBoxLost(Call& call, std::string_view node, std::string_view why) {
  std::string message = "box " + call.box_id + " lived on node " + std::string(node) + ", " +
                        std::string(why) + "; its boxes ended with it (make a new box)";
  call.RespondError(Status(StatusCode::kBoxLost, message));
}

// A whole answer relayed.
void Relay(Call& call, const http::ClientResponse& upstream) {
  http::Response response;
  response.status = upstream.status;
  auto type = upstream.headers.find("content-type");
  response.content_type = type == upstream.headers.end() ? "" : type->second;
  response.body = upstream.body;
  for (std::string_view name : kRelayedHeaders) {
    auto it = upstream.headers.find(std::string(name));
    if (it != upstream.headers.end()) response.headers.emplace_back(name, it->second);
  }
  if (upstream.status >= 400) {
    call.error = http::StatusFromErrorResponse(upstream);
  }
  (void)call.exchange.Respond(std::move(response));
}

std::chrono::milliseconds ForwardTimeout(const ApiOptions& options) {
  // A forwarded call may run code as long as a box lives; the peer enforces the call's own
  // timeout, this only keeps a dead peer from holding the request for ever.
  constexpr auto kMargin = std::chrono::minutes(1);
  constexpr auto kCap = std::chrono::hours(24);
  const std::chrono::milliseconds lifetime = options.ceilings.box_lifetime;
  if (lifetime >= kCap - kMargin) return kCap;
  return lifetime + kMargin;
}

// The token a forwarded request carries: the client's own, so that the box's node finds the
// client's tenant and checks it itself (the replicas share the token file); the replica's own
// where the client needed none.
std::string ForwardToken(const Call& call) {
  std::string_view client = http::BearerToken(call.request.Header("authorization"));
  if (call.context.options.tokens_required && !client.empty()) return std::string(client);
  return call.context.options.peers->token();
}

}  // namespace

bool IsForwarded(const http::Request& request) { return !request.Header(kForwardedBy).empty(); }

Status Forward(Call& call, const http::Address& address, std::string_view node) {
  const ApiOptions& options = call.context.options;
  const http::Request& request = call.request;
  http::ClientOptions client_options{.token = ForwardToken(call),
                                     .connect_timeout = kPeerConnectTimeout,
                                     .max_response_bytes = options.max_forward_bytes};
  http::Client client(address, client_options);
  http::ClientRequest upstream;
  upstream.method = request.method;
  upstream.target = request.target;
  upstream.body = request.body;
  if (const std::string& type = request.Header("content-type"); !type.empty()) {
    upstream.content_type = type;
  }
  for (std::string_view name : kForwardedHeaders) {
    if (const std::string& value = request.Header(name); !value.empty()) {
      upstream.headers.emplace_back(name, value);
    }
  }
  upstream.headers.emplace_back(kForwardedBy, call.context.registry->node());
  // A client that hangs up here hangs up there: the peer stops the box work, as it would for
  // a client of its own.
  upstream.cancelled = [&call] { return call.exchange.ClientGone(); };
  bool begun = false;
  StatusOr<http::ClientResponse> answer = Status::Ok();
  // Long, since a call may take as long as its box lives (a stream's first event may come only
  // after a vm box boots; an MCP tool call answers when its code ends). A client that hangs up
  // ends the wait at once (`cancelled`), and one that waits has its own idle deadline.
  upstream.timeout = ForwardTimeout(options);
  if (request.WantsEventStream()) {
    // The stream starts here when it starts there, so a quiet call still gets keep-alives.
    upstream.on_event_stream = [&] {
      begun = true;
      return call.exchange.BeginEvents(200, {{"x-codebox-node", std::string(node)}});
    };
    answer = client.SendForEvents(upstream, [&](std::string_view event, std::string_view data) {
      return call.exchange.SendEvent(event, data);
    });
  } else {
    answer = client.Send(upstream);
  }
  if (answer.ok()) {
    if (!begun) Relay(call, *answer);
    return Status::Ok();
  }
  if (call.exchange.ClientGone()) {
    call.error = IoError("the client went away during a forwarded call");
    return Status::Ok();
  }
  std::string why = "node " + std::string(node) + " at " + address.ToString() + ": " +
                    answer.status().message();
  if (begun) {  // the stream broke: say so in it, if the client is still there
    Status lost(StatusCode::kBoxLost, "the stream from " + why);
    call.NoteError(lost);
    (void)call.exchange.SendEvent("error", base::JsonText(api::ErrorToJson(lost)));
    return Status::Ok();
  }
  if (answer.status().code() == StatusCode::kUnavailable) {  // nothing listens there now
    options.peers->MarkDown(node, answer.status().message());
    return Unavailable("whose replica at " + address.ToString() + " does not answer");
  }
  call.error = Status(StatusCode::kUnavailable, why);
  if (const auto& on_error = options.hooks.on_error) on_error("bad_gateway");
  (void)call.exchange.Respond(
      http::ErrorResponse(502, "bad_gateway", "forwarding to " + why));
  return Status::Ok();
}

bool RouteToBoxNode(Call& call) {
  if (call.box_id.empty()) return false;
  auto parts = ParseBoxId(call.box_id);
  const BoxRegistry& registry = *call.context.registry;
  if (!parts || parts->node.empty()) return false;
  if (parts->node == registry.node()) {
    if (parts->incarnation == registry.incarnation()) return false;
    RespondBoxLost(call, parts->node, "which has restarted since");
    return true;
  }
  Peers* peers = call.context.options.peers;
  if (IsForwarded(call.request)) {
    RespondBoxLost(call, parts->node,
                   "but a peer sent the request to node " + registry.node() + " instead");
    return true;
  }
  if (peers == nullptr || !peers->enabled()) {
    RespondBoxLost(call, parts->node,
                   "and this server (node " + registry.node() +
                       ") has no peers (serve --peers or --peers-dns)");
    return true;
  }
  StatusOr<http::Address> address = peers->Locate(parts->node);
  if (!address.ok()) {
    RespondBoxLost(call, parts->node, "which is gone: " + address.status().message());
    return true;
  }
  Status unanswered = Forward(call, *address, parts->node);
  if (!unanswered.ok()) RespondBoxLost(call, parts->node, unanswered.message());
  return true;
}

bool RouteToSessionNode(Call& call) {
  const std::string& session = call.request.Header("mcp-session-id");
  size_t dot = session.find('.');
  if (dot == std::string::npos) return false;
  std::string_view node = std::string_view(session).substr(dot + 1);
  Peers* peers = call.context.options.peers;
  if (!IsNodeName(node) || node == call.context.registry->node() || IsForwarded(call.request) ||
      peers == nullptr || !peers->enabled()) {
    return false;
  }
  // A session whose node is gone is answered here: 404 "no MCP session", on which an MCP
  // client starts a new one (the spec's rule), so nothing else is needed.
  StatusOr<http::Address> address = peers->Locate(node);
  if (!address.ok()) return false;
  return Forward(call, *address, node).ok();
}

bool PlaceOnPeer(Call& call, DriverKind driver, bool local_refused) {
  const ApiOptions& options = call.context.options;
  if (options.peers == nullptr || !options.peers->enabled() || IsForwarded(call.request)) {
    return false;
  }
  NodeLoad local = MeasureLoad(*call.context.registry, options.drivers);
  const bool local_can = !local_refused && !local.full() && Offers(local, driver);
  if (local_can && !local.busy()) return false;
  const PeerChoice* best = nullptr;
  std::vector<PeerChoice> choices = options.peers->SampleTwo(driver);
  for (const PeerChoice& c : choices) {
    if (c.load.full() || !Offers(c.load, driver)) continue;
    if (best == nullptr || c.load.score() < best->load.score()) best = &c;
  }
  const bool offered_elsewhere =
      std::any_of(choices.begin(), choices.end(), [&](auto& c) { return Offers(c.load, driver); });
  if (best == nullptr && offered_elsewhere && !Offers(local, driver)) {
    call.RespondError(ResourceExhausted("every node asked that offers driver " +
                                        std::string(DriverKindName(driver)) +
                                        " is full; retry later"));
    return true;
  }
  if (best == nullptr && !Offers(local, driver)) {
    // Asked for a driver no node offers (vm where no node has kvm): say so, rather than run it
    // here against the node's own --drivers.
    std::string offered;
    for (const std::string& d : options.drivers) offered += (offered.empty() ? "" : ", ") + d;
    call.RespondError(Unavailable(
        "no node of this cluster offers driver " + std::string(DriverKindName(driver)) +
        " (vm needs nodes with kvm); node " + call.context.registry->node() + " offers " +
        (offered.empty() ? std::string("none") : offered)));
    return true;
  }
  // Busy here, but no peer is better off: stay.
  if (best == nullptr || (local_can && best->load.score() >= local.score())) return false;
  Status unanswered = Forward(call, best->address, best->load.node);
  if (!unanswered.ok()) {
    call.RespondError(Unavailable("placing this on node " + best->load.node + ", " +
                                  unanswered.message() + "; retry"));
  }
  return true;
}

void AddPeerBoxes(Call& call, api::BoxList* list) {
  const ApiOptions& options = call.context.options;
  if (options.peers == nullptr || !options.peers->enabled() || IsForwarded(call.request)) return;
  std::vector<Peer> peers = options.peers->List();
  std::vector<std::future<StatusOr<api::BoxList>>> answers;
  for (const Peer& peer : peers) {
    answers.push_back(std::async(std::launch::async, [&call, peer]() -> StatusOr<api::BoxList> {
      if (!peer.up) return Unavailable(peer.error);
      http::ClientOptions client_options{.token = ForwardToken(call),
                                         .connect_timeout = kPeerConnectTimeout,
                                         .max_response_bytes = kMaxPeerListBytes};
      http::ClientRequest request;
      request.target = "/v1/boxes?scope=node";
      request.timeout = kPeerListTimeout;
      request.headers.emplace_back(kForwardedBy, call.context.registry->node());
      ASSIGN_OR_RETURN(http::ClientResponse answer,
                       http::Client(peer.address, client_options).Send(request));
      if (answer.status != 200) return http::StatusFromErrorResponse(answer);
      ASSIGN_OR_RETURN(json j, base::ParseJsonObject(answer.body, "its box list"));
      ASSIGN_OR_RETURN(api::BoxList list, api::BoxListFromJson(j));
      // Only boxes of its own node: a peer cannot make this list name boxes elsewhere.
      std::erase_if(list.boxes, [&peer](const BoxRecord& box) {
        auto parts = ParseBoxId(box.id);
        return !parts || parts->node != peer.node;
      });
      return list;
    }));
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    StatusOr<api::BoxList> listed = answers[i].get();
    if (!listed.ok()) {
      list->unreachable.push_back(peers[i].node + ": " + listed.status().message());
      continue;
    }
    for (BoxRecord& box : listed->boxes) list->boxes.push_back(std::move(box));
  }
}

void Load(Call& call) {
  const ApiOptions& options = call.context.options;
  call.RespondJson(200, api::NodeLoadToJson(MeasureLoad(*call.context.registry, options.drivers)));
}

}  // namespace codebox::server
