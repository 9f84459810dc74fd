// A small blocking HTTP/1.1 client on Boost.Beast for codebox's own clients (RemoteBox, the CLI's
// `status`, tests and benchmarks): one connection per call over a unix socket or TCP, every step
// under a deadline, response sizes capped. The server is trusted more than a box, but what it
// relays came out of boxes: callers still check what they decode.
#ifndef CODEBOX_HTTP_CLIENT_H_
#define CODEBOX_HTTP_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codebox/status.h"
#include "http/address.h"

namespace codebox::http {

struct ClientOptions {
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty
  std::chrono::milliseconds connect_timeout{5'000};
  uint64_t max_response_bytes = 512ull << 20;  // kLimitExceeded past it
};

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // path and query, already encoded (see EncodeQuery)
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // The whole exchange (connect, send, read the answer); for events, the longest wait for the
  // next byte of the stream.
  std::chrono::milliseconds timeout{60'000};
  // SendForEvents: called once when the answer turns out to be an event stream, before its
  // first event (a relay starts its own stream there); an error it returns stops the call.
  std::function<Status()> on_event_stream;
  // Asked every 50 ms while the call waits; true ends it at once (kIoError) and closes the
  // connection, so the server sees its client gone (a relay whose own client hung up).
  std::function<bool()> cancelled;
};

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

class Client {
 public:
  Client(Address address, ClientOptions options = {});

  // A plain request; any status is a response (the caller maps 4xx/5xx). Errors are for no
  // answer: kUnavailable when nothing listens ("is `codebox serve` running?"),
  // kDeadlineExceeded, kIoError, kLimitExceeded, kProtocolError.
  StatusOr<ClientResponse> Send(const ClientRequest& request) const;

  // A request answered with text/event-stream: on_event(event, data) for each event as it
  // arrives (data lines joined with '\n'); an error it returns stops the stream (the connection
  // is closed) and is returned. When the server answers with anything but an event stream, the
  // response is returned whole instead and no event is delivered.
  using EventCallback = std::function<Status(std::string_view event, std::string_view data)>;
  StatusOr<ClientResponse> SendForEvents(const ClientRequest& request,
                                         const EventCallback& on_event) const;

  const Address& address() const { return address_; }

 private:
  Address address_;
  ClientOptions options_;
};

// "path=%2Fwork%2Fa%20b&list=1" from pairs (RFC 3986 unreserved characters kept).
std::string EncodeQuery(const std::vector<std::pair<std::string, std::string>>& params);

// An error answer in the API's shape ({"error": {"code", "message"}}) as a Status: the code
// maps back (404 -> kNotFound, 429 -> kResourceExhausted, ...) and the message is the server's,
// made terminal-safe; a body not in that shape gives "<status>: <first bytes of the body>".
Status StatusFromErrorResponse(const ClientResponse& response);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_CLIENT_H_
