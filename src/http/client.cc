#include "http/client.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/sse.h"
#include "base/text.h"

namespace codebox::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxResponseHeader = 64 << 10;
constexpr size_t kReadChunk = 64 << 10;

// How often a call with ClientRequest::cancelled asks it.
constexpr auto kCancelPoll = std::chrono::milliseconds(50);

// Runs one asynchronous operation on `ioc` to completion (the stream's deadline ends it), or
// until `cancelled` says so: then operation_aborted, and the caller's stream, destroyed,
// closes the connection.
template <class Start>
error_code Run(net::io_context& ioc, Start start, const std::function<bool()>& cancelled) {
  error_code result = net::error::operation_aborted;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  if (!cancelled) {
    ioc.run();
    return result;
  }
  while (!ioc.stopped()) {
    ioc.run_for(kCancelPoll);
    if (!ioc.stopped() && cancelled()) {
      ioc.stop();
      return net::error::operation_aborted;
    }
  }
  return result;
}

bool IsParseError(const error_code& ec) {
  return std::strcmp(ec.category().name(), "beast.http") == 0;
}

class Call {
 public:
  Call(const Address& address, const ClientOptions& options, const ClientRequest& request)
      : a_(address), o_(options), r_(request) {}

  Status Error(error_code ec, std::string_view step) const {
    std::string where = a_.ToString();
    if (ec == beast::error::timeout) {
      return DeadlineExceeded(
          std::string(step) + " " + where + ": no answer in time (" +
          std::to_string(step == "connect to" ? o_.connect_timeout.count() : r_.timeout.count()) +
          " ms)");
    }
    if (ec == boost::system::errc::connection_refused ||
        ec == boost::system::errc::no_such_file_or_directory) {
      return Unavailable("no codebox server at " + where + ": is `codebox serve` running?");
    }
    if (ec == boost::system::errc::permission_denied) {
      return PermissionDenied(std::string(step) + " " + where +
                              ": permission denied (is your user in the socket's group?)");
    }
    if (ec == bhttp::error::body_limit) {
      return LimitExceeded("the answer from " + where + " passes " +
                           std::to_string(o_.max_response_bytes) + " bytes (max_response_bytes)");
    }
    if (ec == bhttp::error::header_limit) {
      return LimitExceeded("the answer's headers from " + where + " pass " +
                           std::to_string(kMaxResponseHeader) + " bytes");
    }
    if (IsParseError(ec) && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return ProtocolError("malformed HTTP answer from " + where + ": " + ec.message());
    }
    return IoError(std::string(step) + " " + where + ": " + ec.message());
  }

  template <class Stream>
  Status Connect(Stream& stream);

  template <class Stream>
  Status Exchange(Stream& stream, const Client::EventCallback* on_event, ClientResponse* out);

  net::io_context ioc;

 private:
  const Address& a_;
  const ClientOptions& o_;
  const ClientRequest& r_;
  Clock::time_point deadline_ = Clock::now() + r_.timeout;
};

template <>
Status Call::Connect(beast::basic_stream<net::local::stream_protocol>& stream) {
  stream.expires_at(std::min(deadline_, Clock::now() + o_.connect_timeout));
  net::local::stream_protocol::endpoint endpoint(a_.path);
  error_code ec = Run(
      ioc, [&](auto done) { stream.async_connect(endpoint, done); }, r_.cancelled);
  return ec ? Error(ec, "connect to") : Status::Ok();
}

template <>
Status Call::Connect(beast::tcp_stream& stream) {
  auto connect_deadline = std::min(deadline_, Clock::now() + o_.connect_timeout);
  net::ip::tcp::resolver resolver(ioc);
  net::ip::tcp::resolver::results_type results;
  error_code ec = Run(
      ioc,
      [&](auto done) {
        resolver.async_resolve(a_.host, std::to_string(a_.port),
                               [&results, done](error_code e, auto r) {
                                 results = std::move(r);
                                 done(e);
                               });
      },
      r_.cancelled);
  if (ec) return Error(ec, "resolve");
  stream.expires_at(connect_deadline);
  ec = Run(
      ioc, [&](auto done) { stream.async_connect(results, done); }, r_.cancelled);
  return ec ? Error(ec, "connect to") : Status::Ok();
}

template <class Stream>
Status Call::Exchange(Stream& stream, const Client::EventCallback* on_event, ClientResponse* out) {
  RETURN_IF_ERROR(Connect(stream));
  bhttp::verb verb = bhttp::string_to_verb(r_.method);
  if (verb == bhttp::verb::unknown) return InvalidArgument("unknown HTTP method " + r_.method);
  bhttp::request<bhttp::string_body> req(verb, r_.target, 11);
  req.set(bhttp::field::host, a_.kind == Address::Kind::kUnix ? "localhost" : a_.ToString());
  req.set(bhttp::field::user_agent, "codebox");
  if (!o_.token.empty()) req.set(bhttp::field::authorization, "Bearer " + o_.token);
  if (!r_.body.empty() || verb == bhttp::verb::post || verb == bhttp::verb::put) {
    req.set(bhttp::field::content_type, r_.content_type);
  }
  if (on_event != nullptr) req.set(bhttp::field::accept, "text/event-stream");
  for (const auto& [name, value] : r_.headers) req.set(name, value);
  req.body() = r_.body;
  req.keep_alive(false);
  req.prepare_payload();

  stream.expires_at(deadline_);
  error_code ec = Run(
      ioc, [&](auto done) { bhttp::async_write(stream, req, done); }, r_.cancelled);
  // A server may answer before it read the whole body (413) and close: read that answer.
  error_code write_error = ec == beast::error::timeout ? error_code() : ec;
  if (ec && !write_error) return Error(ec, "send to");

  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kMaxResponseHeader);
  parser.body_limit(o_.max_response_bytes);
  if (on_event != nullptr) stream.expires_after(r_.timeout);
  ec = Run(
      ioc, [&](auto done) { bhttp::async_read_header(stream, buffer, parser, done); },
      r_.cancelled);
  if (ec)
    return Error(write_error ? write_error : ec, write_error ? "send to" : "read the answer from");

  const auto& head = parser.get();
  out->status = head.result_int();
  for (const auto& field : head) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out->headers[name] = std::string(field.value());
  }
  bool events = on_event != nullptr &&
                out->headers["content-type"].find("text/event-stream") != std::string::npos;
  if (events) parser.body_limit(boost::none);  // one event is capped instead
  if (events && r_.on_event_stream) RETURN_IF_ERROR(r_.on_event_stream());
  base::SseParser sse;
  std::string chunk(kReadChunk, '\0');
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    // An event stream may stay quiet between events: the timeout is per wait, not in all.
    if (events) stream.expires_after(r_.timeout);
    ec = Run(
        ioc, [&](auto done) { bhttp::async_read_some(stream, buffer, parser, done); },
        r_.cancelled);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return Error(ec, "read the answer from");
    size_t n = chunk.size() - parser.get().body().size;
    if (events) {
      RETURN_IF_ERROR(sse.Feed(std::string_view(chunk.data(), n), *on_event));
    } else {
      out->body.append(chunk.data(), n);
    }
  }
  return Status::Ok();
}

}  // namespace

Client::Client(Address address, ClientOptions options)
    : address_(std::move(address)), options_(std::move(options)) {}

StatusOr<ClientResponse> Client::Send(const ClientRequest& request) const {
  return SendForEvents(request, nullptr);
}

StatusOr<ClientResponse> Client::SendForEvents(const ClientRequest& request,
                                               const EventCallback& on_event) const {
  Call call(address_, options_, request);
  ClientResponse response;
  const EventCallback* callback = on_event ? &on_event : nullptr;
  Status st;
  if (address_.kind == Address::Kind::kUnix) {
    beast::basic_stream<net::local::stream_protocol> stream(call.ioc);
    st = call.Exchange(stream, callback, &response);
  } else {
    beast::tcp_stream stream(call.ioc);
    st = call.Exchange(stream, callback, &response);
  }
  if (!st.ok()) return st;
  return response;
}

std::string EncodeQuery(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (!out.empty()) out += '&';
    out += base::PercentEncode(key) + "=" + base::PercentEncode(value);
  }
  return out;
}

Status StatusFromErrorResponse(const ClientResponse& response) {
  static const std::pair<std::string_view, StatusCode> kCodes[] = {
      {"invalid_argument", StatusCode::kInvalidArgument},
      {"not_found", StatusCode::kNotFound},
      {"box_lost", StatusCode::kBoxLost},
      {"unavailable", StatusCode::kUnavailable},
      {"start_failed", StatusCode::kStartFailed},
      {"box_crashed", StatusCode::kBoxCrashed},
      {"deadline_exceeded", StatusCode::kDeadlineExceeded},
      {"protocol_error", StatusCode::kProtocolError},
      {"io_error", StatusCode::kIoError},
      {"permission_denied", StatusCode::kPermissionDenied},
      {"unauthenticated", StatusCode::kPermissionDenied},
      {"limit_exceeded", StatusCode::kLimitExceeded},
      {"payload_too_large", StatusCode::kLimitExceeded},
      {"header_too_large", StatusCode::kLimitExceeded},
      {"method_not_allowed", StatusCode::kInvalidArgument},
      {"internal", StatusCode::kInternal},
      {"failed_precondition", StatusCode::kFailedPrecondition},
      {"resource_exhausted", StatusCode::kResourceExhausted},
  };
  int s = response.status;
  StatusCode code = s == 401 || s == 403   ? StatusCode::kPermissionDenied
                    : s == 404             ? StatusCode::kNotFound
                    : s == 409             ? StatusCode::kFailedPrecondition
                    : s == 413 || s == 431 ? StatusCode::kLimitExceeded
                    : s == 429             ? StatusCode::kResourceExhausted
                    : s == 502             ? StatusCode::kProtocolError
                    : s == 503             ? StatusCode::kUnavailable
                    : s == 504             ? StatusCode::kDeadlineExceeded
                    : s >= 400 && s < 500  ? StatusCode::kInvalidArgument
                                           : StatusCode::kInternal;
  auto json = base::ParseJsonOrDiscarded(response.body);
  if (json.is_object() && json.contains("error") && json["error"].is_object() &&
      json["error"].value("message", nlohmann::json()).is_string()) {
    const auto& error = json["error"];
    std::string name =
        error.value("code", nlohmann::json()).is_string() ? error["code"].get<std::string>() : "";
    for (const auto& [n, c] : kCodes) {
      if (n == name) code = c;
    }
    return Status(code, base::TerminalSafe(error["message"].get<std::string>(), 4096));
  }
  return Status(code, std::to_string(s) + ": " + base::TerminalSafe(response.body.substr(0, 200)));
}

}  // namespace codebox::http
