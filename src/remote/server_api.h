// One codebox server's HTTP API as RemoteBox and the CLI call it: a connection per call
// (http::Client), every call under a deadline, error answers turned back into a Status
// (http::StatusFromErrorResponse) with what was being done in front.
#ifndef CODEBOX_REMOTE_SERVER_API_H_
#define CODEBOX_REMOTE_SERVER_API_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "codebox/status.h"
#include "http/address.h"
#include "http/client.h"

namespace codebox::remote {

// Deadlines of calls that run no code. Creating a box may start one on demand (a VM under
// tcg boots for tens of seconds); files may be hundreds of MiB.
inline constexpr std::chrono::milliseconds kCreateTimeout{300'000};
inline constexpr std::chrono::milliseconds kFilesTimeout{300'000};
inline constexpr std::chrono::milliseconds kControlTimeout{60'000};
// Added to an exec's own timeout for the request that carries it: the server needs time to
// take a box, start the process and answer after the box's own deadline killed it.
inline constexpr std::chrono::milliseconds kExecMargin{30'000};
// An event stream of an exec without a timeout: the longest silence (the server sends
// keep-alives while the code runs).
inline constexpr std::chrono::milliseconds kStreamIdleTimeout{120'000};

class ServerApi {
 public:
  // `server` as BoxOptions::server takes it; errors name the option.
  static StatusOr<ServerApi> Open(const std::string& server, std::string token);

  ServerApi(http::Address address, std::string token)
      : address_(std::move(address)), token_(std::move(token)) {}

  // A request whose answer is a JSON object (2xx); `what` goes in front of errors.
  StatusOr<nlohmann::json> CallJson(std::string method, std::string target, std::string body,
                                    std::chrono::milliseconds timeout, std::string_view what) const;
  // A request answered without a body (204, or any 2xx).
  Status CallNoContent(std::string method, std::string target, std::string body,
                       std::chrono::milliseconds timeout, std::string_view what,
                       std::string content_type = "application/json") const;
  // Any request; a 2xx is returned whole (at most max_response_bytes, else kLimitExceeded),
  // an error answer becomes its Status.
  StatusOr<http::ClientResponse> Call(const http::ClientRequest& request,
                                      uint64_t max_response_bytes, std::string_view what) const;
  // A request asked as an event stream: on_event for each event. A 2xx answer that is not a
  // stream is returned (the caller decodes it); an error answer becomes its Status.
  StatusOr<http::ClientResponse> CallEvents(http::ClientRequest request,
                                            const http::Client::EventCallback& on_event,
                                            std::string_view what) const;

  const http::Address& address() const { return address_; }

 private:
  http::Client MakeClient(uint64_t max_response_bytes) const;
  Status Explain(const Status& st, std::string_view what) const;

  http::Address address_;
  std::string token_;
};

// `j` as request text. Everything in a request body is JSON text, which holds only UTF-8: argv,
// code, environment or stdin that is not is an InvalidArgument naming `what` (bytes go as a
// file: WriteFile).
StatusOr<std::string> DumpJson(const nlohmann::json& j, std::string_view what);

}  // namespace codebox::remote

#endif  // CODEBOX_REMOTE_SERVER_API_H_
