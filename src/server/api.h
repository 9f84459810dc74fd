// The HTTP API v1 of `codebox serve` (docs/server.md; the contract is src/server/openapi.json):
// an http::Handler that routes each request by method and path to the box registry, decodes
// and checks its body, runs the box call (streaming it as server-sent events when asked) and
// answers in the API's JSON. One Api serves every connection; it is thread-safe.
//
//   server::BoxRegistry registry(registry_options);
//   server::Api api(api_options, &registry);
//   http::Server http_server(server_options, &api);
#ifndef CODEBOX_SERVER_API_H_
#define CODEBOX_SERVER_API_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"
#include "http/server.h"
#include "server/box_registry.h"
#include "server/api_request.h"
#include "server/peers.h"
#include "server/tenants.h"

namespace codebox::server {

class ImagePulls;  // image_pulls.h

// One answered request, for the metrics and the log.
struct RequestReport {
  const http::Request& request;
  std::string_view route;  // the route's pattern ("/v1/boxes/{id}/exec"), or "unmatched"
  int status = 0;          // as sent (200 for an event stream, whatever it ended with)
  double seconds = 0;
  std::string_view box_id;  // "" when the request named or made no box
  std::string_view tenant;  // the caller's tenant; "" for a public path without a token
  const Status& error;      // the error answered (also as an `error` event), or OK
};

// Where the API reports what happened; each hook is optional. `serve` connects them to the
// metrics and the JSON log.
struct ApiHooks {
  // After each request is answered.
  std::function<void(const RequestReport&)> on_request;
  // After each box call that ran code: kind "exec", "python", "run_code" or "run".
  std::function<void(std::string_view kind, double seconds)> on_exec;
  // For each error answered (also an `error` event): its code ("not_found", ...).
  std::function<void(std::string_view code)> on_error;
  // Once for each connection of a box's egress proxy, read after each request on the box,
  // before DELETE destroys it, and at the end of a one-shot run (box id "one-shot").
  std::function<void(std::string_view box_id, const EgressRecord& record)> on_egress;
  // GET /metrics: the Prometheus text; unset: /metrics answers 404.
  // `caller`: who asks (an admin sees every series, a tenant only its own).
  std::function<std::string(const Caller& caller)> metrics_text;
};

// The model behind POST /v1/ask (the playground's chat tab): `codebox serve --model M
// --base-url URL`, the key from the server's $OPENAI_API_KEY. The key is sent to the model
// endpoint only: never to a client, never into a box.
struct AskOptions {
  std::string base_url;  // empty: $OPENAI_BASE_URL, else the OpenAI API
  std::string model;     // empty: $CODEBOX_MODEL, else gpt-4o-mini
  std::string api_key;
  int max_steps = 8;  // model turns per ask
  // Set when serve was given --model or --base-url; otherwise /v1/ask answers 409 saying so.
  bool configured = false;
};

struct ApiOptions {
  // What a client's box options start from (home); the registry's defaults.
  BoxOptions defaults;
  // The most any request may ask for (box_lifetime is --max-lifetime).
  Ceilings ceilings;
  uint32_t max_boxes = 256;  // also the most MCP sessions at once (/mcp)
  // An MCP session no request used for this long is ended and its box destroyed (the
  // server's --idle-timeout; kNoTimeout: never).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
  // Whether requests need a bearer token (--token-file): without, a request's Host must be
  // loopback (api_origin.h).
  bool tokens_required = false;
  // Who each token is (server/tenants.h), in the order of http::ServerOptions::tokens, so that
  // http::Request::token indexes it. Without tokens every client is the one tenant "local".
  // With tokens but no grants (a caller that set none) every token is "local" too.
  std::vector<TokenGrant> grants;
  // Each tenant's quotas unless its grants say otherwise; enforced only with tokens.
  TenantLimits tenant_limits;
  std::vector<std::string> listen;  // for GET /v1/status
  std::string version = "0.1.0";
  ApiHooks hooks;
  AskOptions ask;
  // Scale-out (docs/scale-out.md): the other replicas. Null or not enabled: this node is
  // alone, and a box id naming another node answers 404 box_lost.
  Peers* peers = nullptr;
  // What this node runs for placement (GET /v1/load): "jail", and "vm" where kvm works.
  std::vector<std::string> drivers = {"jail"};
  // The largest answer a forwarded request may bring back (a file download).
  uint64_t max_forward_bytes = 512ull << 20;
  // The server's pulls for its clients (image_pulls.h): a box's image the store lacks is
  // pulled only as it allows. Null: no check here (the box start pulls as the library does).
  ImagePulls* pulls = nullptr;
  // E2B's template ids and the images they start (docs/e2b.md; serve's --e2b-template adds
  // more). Any other template id is taken as an image name.
  std::map<std::string, std::string> e2b_templates = {{"base", "python"},
                                                      {"code-interpreter-v1", "python-data"}};
  // The most a compressed upload (E2B's gzip files.write) may inflate to: what a request body
  // may hold (serve's --max-body), so that it costs the server no more memory than a plain one.
  uint64_t max_inflated_bytes = 64ull << 20;
};

// The paths that need no token: /healthz and the playground's page and its files (they hold
// no secrets; the page asks for a token when the API answers 401). For
// http::ServerOptions::public_paths.
std::vector<std::string> PublicPaths();
// The requests that carry no server token because the API checks their own credentials:
// E2B's in-sandbox requests, each with its sandbox's access token. For
// http::ServerOptions::handler_authenticates.
bool HandlerAuthenticates(const http::Request& request);

class Api : public http::Handler {
 public:
  Api(ApiOptions options, BoxRegistry* registry);
  ~Api() override;
  void Handle(const http::Request& request, http::Exchange& exchange) override;

  struct Context;

 private:
  std::unique_ptr<Context> context_;
};

// The OpenAPI 3.1 document (src/server/openapi.json, embedded at build time).
std::string_view OpenApiDocument();

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_H_
