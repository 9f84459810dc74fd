// Scale-out (docs/scale-out.md): a request for a box of another node is forwarded to that
// node's replica; a create or one-shot run that arrives at a full or busy node, or one that
// does not run the driver asked for, goes to the less loaded of two random peers. Forwarded
// requests carry X-Codebox-Forwarded-By and are never forwarded again, so a stale peer table
// cannot make a loop.
#include <algorithm>
#include <chrono>

#include "http/client.h"
#include "server/api_internal.h"
#include "server/api_json.h"
#include "server/box_id.h"
#include "server/node_load.h"

namespace codebox::server {
namespace {

using nlohmann::json;

constexpr char kForwardedBy[] = "x-codebox-forwarded-by";
// Connecting to a peer: on one cluster network this takes milliseconds; past this it is down.
constexpr auto kPeerConnectTimeout = std::chrono::seconds(2);
// The longest silence in a forwarded event stream (the peer sends a keep-alive every 15 s).
constexpr auto kStreamIdle = std::chrono::seconds(60);

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
  if (options.max_lifetime >= kCap - kMargin) return kCap;
  return options.max_lifetime + kMargin;
}

}  // namespace

bool IsForwarded(const http::Request& request) { return !request.Header(kForwardedBy).empty(); }

void Forward(Call& call, const http::Address& address, std::string_view node) {
  const ApiOptions& options = call.context.options;
  const http::Request& request = call.request;
  http::ClientOptions client_options{.token = options.peers->token(),
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
  upstream.headers.emplace_back("X-Codebox-Forwarded-By", call.context.registry->node());
  // A client that hangs up here hangs up there: the peer stops the box work, as it would for
  // a client of its own.
  upstream.cancelled = [&call] { return call.exchange.ClientGone(); };
  bool begun = false;
  StatusOr<http::ClientResponse> answer = Status::Ok();
  if (request.WantsEventStream()) {
    upstream.timeout = kStreamIdle;
    // The stream starts here when it starts there, so a quiet call still gets keep-alives.
    upstream.on_event_stream = [&] {
      begun = true;
      return call.exchange.BeginEvents(200, {{"x-codebox-node", std::string(node)}});
    };
    answer = client.SendForEvents(upstream, [&](std::string_view event, std::string_view data) {
      return call.exchange.SendEvent(event, data);
    });
  } else {
    upstream.timeout = ForwardTimeout(options);
    answer = client.Send(upstream);
  }
  if (answer.ok()) {
    if (!begun) Relay(call, *answer);
    return;
  }
  if (call.exchange.ClientGone()) {
    call.error = IoError("the client went away during a forwarded call");
    return;
  }
  std::string why = "node " + std::string(node) + " at " + address.ToString() + ": " +
                    answer.status().message();
  if (begun) {  // the stream broke: say so in it, if the client is still there
    Status lost(StatusCode::kBoxLost, "the stream from " + why);
    call.NoteError(lost);
    (void)call.exchange.SendEvent("error", Dump(ErrorJson(lost)));
    return;
  }
  if (answer.status().code() == StatusCode::kUnavailable) {  // nothing listens there now
    options.peers->MarkDown(node, answer.status().message());
    return RespondBoxLost(call, node, "whose replica at " + address.ToString() +
                                          " does not answer");
  }
  call.error = Status(StatusCode::kUnavailable, why);
  if (const auto& on_error = options.hooks.on_error) on_error("bad_gateway");
  (void)call.exchange.Respond(
      http::ErrorResponse(502, "bad_gateway", "forwarding to " + why));
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
  Forward(call, *address, parts->node);
  return true;
}

bool PlaceOnPeer(Call& call, DriverKind driver, bool local_refused) {
  const ApiOptions& options = call.context.options;
  if (options.peers == nullptr || !options.peers->enabled() || IsForwarded(call.request)) {
    return false;
  }
  NodeLoad local = MeasureLoad(*call.context.registry, options.drivers);
  const bool local_can = !local_refused && !local.full() && local.Offers(driver);
  if (local_can && !local.busy()) return false;
  const PeerChoice* best = nullptr;
  std::vector<PeerChoice> choices = options.peers->SampleTwo(driver);
  for (const PeerChoice& c : choices) {
    if (c.load.full() || !c.load.Offers(driver)) continue;
    if (best == nullptr || c.load.score() < best->load.score()) best = &c;
  }
  const bool offered_elsewhere = std::any_of(choices.begin(), choices.end(), [&](auto& c) {
    return c.load.Offers(driver);
  });
  if (best == nullptr && offered_elsewhere && !local.Offers(driver)) {
    call.RespondError(ResourceExhausted("every node asked that offers driver " +
                                        std::string(DriverKindName(driver)) +
                                        " is full; retry later"));
    return true;
  }
  if (best == nullptr && !local.Offers(driver)) {
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
  Forward(call, best->address, best->load.node);
  return true;
}

void Load(Call& call) {
  const ApiOptions& options = call.context.options;
  call.RespondJson(200, LoadJson(MeasureLoad(*call.context.registry, options.drivers)));
}

}  // namespace codebox::server
