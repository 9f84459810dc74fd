// An HTTP/1.1 server on Boost.Beast/Asio (no parser of our own), for `codebox serve`: listens on
// unix sockets and TCP, enforces the limits a hostile or slow client must not pass (header and
// body size, read deadlines, connection budgets), checks bearer tokens in constant time, and hands
// each request to a Handler on a thread of its own, where the handler may block on a box.
//
//   http::ServerOptions o;
//   o.listen = {*http::ParseAddress("unix:/run/codebox/codebox.sock")};
//   http::Server server(o, &handler);
//   RETURN_IF_ERROR(server.Start());   // binds; errors name the address
//   ...                                // SIGTERM:
//   server.Stop(std::chrono::seconds(30));  // stop accepting, let requests in flight finish
#ifndef CODEBOX_HTTP_SERVER_H_
#define CODEBOX_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codebox/status.h"
#include "http/address.h"

namespace codebox::http {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/boxes/b-1/files?path=a%20b"
  std::string path;    // percent-decoded path without the query: "/v1/boxes/b-1/files"
  std::map<std::string, std::string> query;      // percent-decoded; a repeated key keeps the last
  std::map<std::string, std::string> headers;    // names lower-cased
  std::string body;    // at most ServerOptions::max_body_bytes
  std::string peer;    // "unix" or "127.0.0.1:53211", for logs
  std::string request_id;  // made by the server ("r-<n>"), also sent as X-Request-Id
  // The index in ServerOptions::tokens of the bearer token it carried, or -1 (no tokens, none
  // sent, or a public path's request without a valid one).
  int token = -1;

  // The header's value, or "" when absent (name lower-case).
  const std::string& Header(std::string_view name) const;
  // Whether Accept names text/event-stream.
  bool WantsEventStream() const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Retry-After, ...
};

// One request's answer. A handler calls exactly one of Respond, BeginStream or BeginEvents;
// after a Begin, SendChunk (or SendEvent) any number of times. Calls block until the bytes are
// handed to the socket (back-pressure: a slow reader slows the handler, never grows memory
// without bound) and fail (kIoError) once the client is gone or a write passes
// ServerOptions::write_timeout, so a handler can stop the box work it was streaming.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual Status Respond(Response response) = 0;
  using Headers = std::vector<std::pair<std::string, std::string>>;
  // Starts a chunked answer of `content_type` with `status` and any `headers` of the
  // handler's own; each SendChunk goes out as one chunk at once (a stream of Connect
  // envelopes, newline-delimited JSON).
  virtual Status BeginStream(int status, std::string_view content_type,
                             const Headers& headers = {}) = 0;
  virtual Status SendChunk(std::string_view bytes) = 0;
  // Whether the client has gone away (the connection closed).
  virtual bool ClientGone() const = 0;

  // A `text/event-stream` answer (uncached, unbuffered by proxies): BeginStream, then one
  // chunk per event, "event: <event>\ndata: <data>\n\n" (data with newlines is split into
  // data: lines).
  Status BeginEvents(int status = 200, const Headers& headers = {});
  Status SendEvent(std::string_view event, std::string_view data);
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Called on a thread of its own for each request that passed the limits and the token check;
  // may block as long as the request needs. If it returns without answering, the server answers
  // 500. It must not throw (an exception is caught, logged and answered 500).
  virtual void Handle(const Request& request, Exchange& exchange) = 0;
};

struct ServerOptions {
  std::vector<Address> listen;
  // Unix sockets are made with this mode (the directory is made 0755 when missing); an
  // existing socket file is replaced only when nothing answers on it.
  uint32_t unix_socket_mode = 0660;
  // Bearer tokens (Authorization: Bearer <token>, or X-API-KEY: <token>, as E2B's SDKs send
  // theirs); empty: no token needed. Compared in constant time. Paths in `public_paths` need
  // none (/healthz).
  std::vector<std::string> tokens;
  std::vector<std::string> public_paths = {"/healthz"};
  // Requests for which this answers true reach the handler without a token, and the handler
  // checks their credentials itself (`codebox serve`'s E2B sandbox routes: each sandbox has
  // its own access token). Unset: none.
  std::function<bool(const Request&)> handler_authenticates;
  uint64_t max_header_bytes = 16 << 10;    // 431 past it
  uint64_t max_body_bytes = 64ull << 20;   // 413 past it (Content-Length checked first)
  // Read deadlines, none longer than read_timeout. A new connection must send its first byte
  // within first_byte_timeout; a request's head must be whole within header_timeout of its
  // first byte, and the whole request (head and body) within read_timeout of it. A keep-alive
  // connection waiting for its next request is closed after read_timeout.
  std::chrono::milliseconds first_byte_timeout{5'000};
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds write_timeout{60'000};  // one response write / one event
  // Connection budgets, each counted from accept (before any token is seen). TCP listeners
  // share max_connections; unix socket listeners share unix_max_connections, which TCP clients
  // can never take; one TCP peer address holds at most max_connections_per_address (an IPv4
  // address, or an IPv6 /64: one host's share).
  // When a budget is full, the oldest idle connection in it (waiting for a request, no byte of
  // it received, no handler running) is closed to make room (Stats::evicted_connections); with
  // none idle, the new connection is closed at once (Stats::rejected_connections).
  uint32_t max_connections = 1024;
  uint32_t unix_max_connections = 256;
  uint32_t max_connections_per_address = 128;
  uint32_t max_in_flight = 512;  // requests being handled at once; past it 503 + Retry-After
  // Request bodies held in memory at once, counted by what each request's Content-Length
  // announces (max_body_bytes for a chunked one) from its header until its handler returns;
  // past it 503 + Retry-After, so that many large uploads cannot exhaust the host's memory.
  uint64_t max_buffered_body_bytes = 1ull << 30;
  int io_threads = 1;
};

// Errors in the API's shape: {"error": {"code": code, "message": message}}.
Response ErrorResponse(int status, std::string_view code, std::string_view message);
// The status code and error code for a Status: kInvalidArgument 400 "invalid_argument",
// kNotFound 404, kDeadlineExceeded 504, kResourceExhausted 429, kUnavailable 503, ...
Response ErrorResponse(const Status& status);

class Server {
 public:
  Server(ServerOptions options, Handler* handler);
  ~Server();  // Stop(0) if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds every address and starts the I/O threads. A TCP address that is not loopback with
  // no tokens is refused here (kInvalidArgument that says to pass --token-file).
  Status Start();
  // The addresses bound (a TCP port 0 resolved), in the order of ServerOptions::listen.
  std::vector<Address> bound() const;
  // Stops accepting, waits up to `drain` for requests in flight, then closes every connection
  // (handlers still running see ClientGone()/write errors) and removes unix socket files.
  void Stop(std::chrono::milliseconds drain);

  struct Stats {
    uint64_t connections_open = 0;  // in the budgets (an evicted one leaves at once)
    uint64_t connections_idle = 0;  // of those, waiting for a request with no byte of it read
    uint64_t requests_in_flight = 0;
    uint64_t rejected_connections = 0;  // a budget full, none of its connections idle
    uint64_t evicted_connections = 0;   // idle ones closed to make room for a new one
    uint64_t rejected_requests = 0;     // limits, auth, max_in_flight
  };
  Stats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_SERVER_H_
