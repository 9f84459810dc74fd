// libFuzzer target: a hostile client's bytes against the server's request handling. The input is
// one or more HTTP/1.1 requests as a client would send them on one connection. Each is parsed by
// Beast's request_parser with a server connection's limits (http::LimitParser: 16 KiB of head,
// bounded chunk extensions; the body limit is 1 MiB, not 64, for speed), made into an
// http::Request by the code the connections use (http::BuildRequest: lower-cased headers,
// decoded path and query, the bearer token matched against three tokens), refused as
// http::Server would (CheckFraming and a bad target 400, no token 401), and otherwise handed to a
// real server::Api over a real server::BoxRegistry.
//
// The registry has max_boxes = 0, so every box create and one-shot run is refused with 429
// before anything is started: Box::Create would look the image up, pull one when running as
// root (CI does) or start a jail box from the system store, which is neither quick nor
// harmless. ApiOptions::pulls stays null for the same reason: an admin token may pull from any
// registry. The only process the target may start is the jail support probe, once per process
// (box::ChooseDriver, for a request that asks for driver "auto", where codebox-jail is found).
// MCP sessions are made and used (a request whose Mcp-Session-Id is "@last" gets the id the last
// initialize answered), never a box. No peers, no model: nothing leaves the process. What runs
// in a box (exec, files, cells) is therefore not reached: those routes answer 404 first.
//
// For every request the server would hand to its handler, it checks what must hold whatever the
// client sends, and traps on a violation:
// * exactly one answer (Respond or BeginStream), no exception out of the handler;
// * a status in 100..599, and no 500 (the handler failing on its own input is a bug);
// * every JSON body parses (base::ParseJsonOrDiscarded, 64 deep), and an error's body, an
//   `error` event's data or an MCP error has "error"."message", a string of at most 4 KiB;
// * no error message, header or event echoes more than 255 bytes in a row of what the client
//   sent (target, path, query, header values, body);
// * the metrics' labels stay bounded: a method label is one HTTP defines, or "other".
// Each input is a fresh Api and registry, so a crash reproduces from its input alone.
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "http/beast_request.h"
#include "http/request.h"
#include "http/server.h"
#include "server/api.h"
#include "server/box_registry.h"
#include "server/metrics.h"
#include "server/tenants.h"

namespace {

namespace bhttp = boost::beast::http;
using codebox::Status;
using codebox::http::Request;
using codebox::http::Response;

constexpr uint64_t kMaxHeaderBytes = 16 << 10;  // http::ServerOptions::max_header_bytes
constexpr uint64_t kMaxBodyBytes = 1 << 20;     // the server's is 64 MiB; 1 MiB keeps it fast
constexpr size_t kMaxRequests = 16;             // per input
constexpr size_t kMaxMessageBytes = 4 << 10;    // an error message, at most
constexpr size_t kMaxEcho = 255;                // bytes of the client's in a row, at most
constexpr size_t kMaxHeaderValueBytes = 1 << 10;

// The three tokens of the server's token file: two tenants and an admin.
const std::vector<std::string> kTokens = {"fuzz-token-alpha", "fuzz-token-beta",
                                          "fuzz-token-admin"};

// The checks' own loops are not the server's code: no coverage feedback from them, so that
// libFuzzer does not chase inputs that only exercise the checker.
#define CHECKER __attribute__((no_sanitize("coverage")))

[[noreturn]] void Fail(const Request& request, const std::string& what) {
  std::fprintf(stderr, "server_request_fuzz: %s\n  on %s %s\n", what.c_str(),
               codebox::base::Excerpt(request.method, 32).c_str(),
               codebox::base::Excerpt(request.target, 200).c_str());
  __builtin_trap();
}

// A home with no images, made once and removed at exit.
const std::string& Home() {
  struct Dir {
    std::string path;
    Dir() {
      char tmpl[] = "/tmp/codebox-server-fuzz-XXXXXX";
      if (::mkdtemp(tmpl) == nullptr) std::abort();
      path = tmpl;
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path;
}

// Whether `text` holds a run of more than kMaxEcho bytes of `source`. Windows of kMaxEcho/2
// bytes every kMaxEcho/2 bytes of `text`: a longer run holds one of them whole.
CHECKER bool Echoes(std::string_view text, std::string_view source) {
  constexpr size_t kWindow = kMaxEcho / 2;
  if (text.size() <= kMaxEcho || source.size() <= kMaxEcho) return false;
  for (size_t i = 0; i + kWindow <= text.size(); i += kWindow) {
    std::string_view window = text.substr(i, kWindow);
    size_t at = source.find(window);
    while (at != std::string_view::npos) {
      // The run around this match, in both directions.
      size_t before = 0;
      while (before < i && before < at && text[i - before - 1] == source[at - before - 1]) {
        ++before;
      }
      size_t after = kWindow;
      while (i + after < text.size() && at + after < source.size() &&
             text[i + after] == source[at + after]) {
        ++after;
      }
      if (before + after > kMaxEcho) return true;
      at = source.find(window, at + 1);
    }
  }
  return false;
}

CHECKER void CheckNoEcho(const Request& request, std::string_view text, std::string_view where) {
  std::vector<std::string_view> sources = {request.target, request.path, request.body};
  for (const auto& [name, value] : request.headers) sources.push_back(value);
  for (const auto& [key, value] : request.query) {
    sources.push_back(key);
    sources.push_back(value);
  }
  for (std::string_view source : sources) {
    if (Echoes(text, source)) {
      Fail(request, std::string(where) + " echoes more than " + std::to_string(kMaxEcho) +
                        " bytes of the request: " + codebox::base::Excerpt(text, 200));
    }
  }
}

// An error's JSON ({"error": {"code", "message"}}, or a JSON-RPC error): a short message that
// quotes no more than an excerpt of the request. `required`: it must be one (an error status,
// an `error` event); else only a JSON body that is one is checked (an MCP error answered 200).
void CheckErrorJson(const Request& request, std::string_view text, std::string_view where,
                    bool required) {
  nlohmann::json value = codebox::base::ParseJsonOrDiscarded(text);
  if (value.is_discarded()) {
    Fail(request, std::string(where) + " is not JSON: " + codebox::base::Excerpt(text, 200));
  }
  // codebox's {"error": {"code", "message"}}, or E2B's {"code", "message"} (api_e2b*.cc).
  const nlohmann::json* error = nullptr;
  if (value.is_object() && value.contains("error") && value["error"].is_object()) {
    error = &value["error"];
  } else if (value.is_object() && value.contains("code")) {
    error = &value;
  }
  if (error == nullptr || !error->contains("message") || !(*error)["message"].is_string()) {
    if (required) {
      Fail(request, std::string(where) + " has no error message: " + codebox::base::Excerpt(text));
    }
    return;
  }
  const std::string& message = (*error)["message"].get_ref<const std::string&>();
  if (message.size() > kMaxMessageBytes) {
    Fail(request, std::string(where) + "'s message is " + std::to_string(message.size()) +
                      " bytes: " + codebox::base::Excerpt(message, 200));
  }
  CheckNoEcho(request, message, where);
}

CHECKER void CheckHeaders(const Request& request, const codebox::http::Exchange::Headers& headers) {
  for (const auto& [name, value] : headers) {
    if (name.empty() || value.size() > kMaxHeaderValueBytes) {
      Fail(request, "answer header '" + codebox::base::Excerpt(name) + "' of " +
                        std::to_string(value.size()) + " bytes");
    }
    CheckNoEcho(request, value, "answer header " + name);
  }
}

void CheckStatus(const Request& request, int status) {
  if (status < 100 || status > 599) Fail(request, "status " + std::to_string(status));
  if (status == 500) Fail(request, "status 500: the handler failed on its input");
}

// What a connection hands the handler, minus the socket: records and checks the answer.
class CheckingExchange final : public codebox::http::Exchange {
 public:
  explicit CheckingExchange(const Request& request) : request_(request) {}

  Status Respond(Response response) override {
    Answered("Respond");
    status_ = response.status;
    answer_ = response.body;
    CheckStatus(request_, response.status);
    CheckHeaders(request_, response.headers);
    for (const auto& [name, value] : response.headers) {
      if (name == "Mcp-Session-Id") session_id_ = value;
    }
    if (response.status >= 400) {
      CheckErrorJson(request_, response.body, "the error body", true);
    } else if (response.content_type == "application/json" && !response.body.empty()) {
      CheckErrorJson(request_, response.body, "a " + std::to_string(response.status) + " body",
                     false);
    }
    return Status::Ok();
  }

  Status BeginStream(int status, std::string_view content_type, const Headers& headers) override {
    Answered("BeginStream");
    status_ = status;
    streaming_ = true;
    events_ = content_type == "text/event-stream";
    CheckStatus(request_, status);
    CheckHeaders(request_, headers);
    return Status::Ok();
  }

  Status SendChunk(std::string_view bytes) override {
    if (!streaming_) Fail(request_, "SendChunk without BeginStream");
    if (++sent_ > 10'000) Fail(request_, "more than 10000 chunks for one request");
    if (events_) CheckEvent(bytes);
    return Status::Ok();
  }

  bool ClientGone() const override { return false; }

  int answers() const { return answers_; }

  // One "event: <name>\ndata: <json>\n\n" chunk (http::Exchange::SendEvent's form).
  void CheckEvent(std::string_view chunk) {
    std::string_view event, data;
    for (size_t pos = 0; pos < chunk.size();) {
      size_t nl = chunk.find('\n', pos);
      if (nl == std::string_view::npos) nl = chunk.size();
      std::string_view line = chunk.substr(pos, nl - pos);
      if (line.starts_with("event: ")) event = line.substr(7);
      if (line.starts_with("data: ")) data = line.substr(6);  // the API's data is one line
      pos = nl + 1;
    }
    if (event == "error") {
      CheckErrorJson(request_, data, "an error event", true);
    } else if (codebox::base::ParseJsonOrDiscarded(data).is_discarded()) {
      Fail(request_, "event " + std::string(event) + " with data that is not JSON");
    }
  }
  int status() const { return status_; }
  const std::string& answer() const { return answer_; }
  const std::string& session_id() const { return session_id_; }

 private:
  void Answered(const char* how) {
    if (++answers_ > 1) Fail(request_, std::string("a second answer (") + how + ")");
  }

  const Request& request_;
  int answers_ = 0;
  int status_ = 0;
  std::string answer_;
  bool streaming_ = false;
  bool events_ = false;  // the stream is server-sent events
  size_t sent_ = 0;
  std::string session_id_;
};

// The metrics `serve` keeps, as a tenant's or an admin's /metrics shows them: every method label
// one the API routes (or a bounded stand-in), never whatever a client sent.
CHECKER void CheckMetrics(const Request& request, const std::string& text) {
  static const std::set<std::string, std::less<>> kMethods = {
      "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "other"};
  constexpr std::string_view kLabel = "method=\"";
  for (size_t at = text.find(kLabel); at != std::string::npos; at = text.find(kLabel, at)) {
    at += kLabel.size();
    size_t end = text.find('"', at);
    std::string_view method = std::string_view(text).substr(at, end - at);
    if (!kMethods.contains(method)) {
      Fail(request,
           "a metrics method label the client chose: " + codebox::base::Excerpt(method, 64));
    }
  }
}

struct Server {
  codebox::server::Metrics metrics;
  std::unique_ptr<codebox::server::BoxRegistry> registry;
  std::unique_ptr<codebox::server::Api> api;
  std::vector<std::string> public_paths = codebox::server::PublicPaths();

  Server() {
    codebox::BoxOptions defaults;
    defaults.home = Home();
    defaults.image = "codebox-fuzz-no-such-image";
    defaults.driver = codebox::DriverKind::kJail;

    codebox::server::RegistryOptions registry_options;
    registry_options.max_boxes = 0;  // every create refused before a start (see the top)
    registry_options.idle_timeout = codebox::kNoTimeout;
    registry_options.max_lifetime = std::chrono::minutes(10);
    registry_options.defaults = defaults;
    registry_options.node = "fuzz";
    registry_options.incarnation = "0000";  // ids of its boxes: b-0000<12 hex>.fuzz
    registry = std::make_unique<codebox::server::BoxRegistry>(registry_options);

    codebox::server::ApiOptions o;
    o.defaults = defaults;
    // Ceilings a little above the box defaults, so that a request's defaults pass them.
    o.ceilings.output_limit_bytes = 32 << 20;
    o.ceilings.memory_mib = 1024;
    o.ceilings.cpus = 2;
    o.ceilings.disk_mib = 1024;
    o.ceilings.max_processes = 256;
    o.ceilings.max_open_files = 4096;
    o.ceilings.exec_timeout = std::chrono::minutes(1);
    o.ceilings.box_lifetime = std::chrono::minutes(10);
    o.ceilings.network_max_bytes = 2ull << 30;
    o.max_boxes = 2;                       // MCP sessions at once
    o.idle_timeout = codebox::kNoTimeout;  // no reaper thread
    o.tokens_required = true;
    o.grants = {{.token = kTokens[0], .tenant = "alpha"},
                {.token = kTokens[1], .tenant = "beta", .max_boxes = 1, .max_requests = 2},
                {.token = kTokens[2], .tenant = "ops", .admin = true}};
    o.tenant_limits = {.max_boxes = 2, .max_requests = 4};
    o.listen = {"127.0.0.1:8080"};
    o.drivers = {"jail"};
    o.hooks.on_request = [this](const codebox::server::RequestReport& r) {
      metrics.ObserveRequest(r.request.method, r.route, r.status, r.seconds, r.tenant);
    };
    o.hooks.on_exec = [this](std::string_view kind, double s) { metrics.ObserveExec(kind, s); };
    o.hooks.on_error = [this](std::string_view code) { metrics.CountError(code); };
    o.hooks.on_egress = [this](std::string_view, const codebox::EgressRecord& r) {
      metrics.ObserveEgress(r);
    };
    o.hooks.metrics_text = [this](const codebox::server::Caller& caller) {
      return metrics.Render(*registry, caller);
    };
    api = std::make_unique<codebox::server::Api>(std::move(o), registry.get());
  }
};

// One request through what the server does with it; false when the connection ends after it.
bool Serve(Server& server, codebox::http::BeastRequest message, std::string* last_session) {
  const bool keep_alive = message.keep_alive();
  Request request;
  request.peer = "127.0.0.1:40000";
  request.request_id = "r-1";
  if (!codebox::http::BuildRequest(std::move(message), kTokens, &request).ok()) {
    return keep_alive;  // 400 from the server itself
  }
  if (auto it = request.headers.find("mcp-session-id");
      it != request.headers.end() && it->second == "@last") {
    it->second = *last_session;
  }
  bool is_public = false;
  for (const auto& p : server.public_paths) is_public |= (p == request.path);
  is_public |= codebox::server::HandlerAuthenticates(request);
  if (!is_public && request.token < 0) return keep_alive;  // 401 from the server itself

  CheckingExchange exchange(request);
  try {
    server.api->Handle(request, exchange);
  } catch (const std::exception& e) {
    Fail(request, std::string("the handler threw: ") + e.what());
  } catch (...) {
    Fail(request, "the handler threw");
  }
  if (exchange.answers() != 1) Fail(request, "the handler returned without an answer");
  // CODEBOX_FUZZ_TRACE=1: each request and its answer on stderr, to see what an input does.
  static const bool trace = std::getenv("CODEBOX_FUZZ_TRACE") != nullptr;
  if (trace) {
    std::fprintf(stderr, "%s %s -> %d %s\n", codebox::base::Excerpt(request.method, 16).c_str(),
                 codebox::base::Excerpt(request.target, 80).c_str(), exchange.status(),
                 codebox::base::Excerpt(exchange.answer(), 160).c_str());
  }
  if (!exchange.session_id().empty()) *last_session = exchange.session_id();
  CheckMetrics(request, server.metrics.Render(*server.registry));
  return keep_alive;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server server;
  std::string last_session;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (size_t n = 0; n < kMaxRequests && !rest.empty(); ++n) {
    codebox::http::BeastParser parser;
    codebox::http::LimitParser(parser, kMaxHeaderBytes, kMaxBodyBytes);
    boost::system::error_code ec;
    bool framed = false;  // the head passed CheckFraming
    size_t pos = 0;
    while (!parser.is_done()) {
      size_t used = parser.put(boost::asio::buffer(rest.data() + pos, rest.size() - pos), ec);
      pos += used;
      if (!ec && !framed && parser.is_header_done()) {
        if (!codebox::http::CheckFraming(parser).ok()) break;  // 400 from the server, closed
        framed = true;
      }
      if (ec == bhttp::error::need_more) {
        ec = {};
        if (pos < rest.size() && used > 0) continue;
        // What is left is not enough: the client stopped sending (end of the input).
        parser.put_eof(ec);
        break;
      }
      if (ec || used == 0) break;
    }
    // A limit or a malformed request: the server answers it (431, 413, 400) and closes; a
    // request cut short: it closes. The handler sees neither.
    if (ec || !framed || !parser.is_done()) break;
    if (!Serve(server, parser.release(), &last_session)) break;
    rest.remove_prefix(pos);
  }
  return 0;
}
