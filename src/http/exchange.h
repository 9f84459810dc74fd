// The Exchange a handler thread answers through (included by connection.cc only). Each call
// hands a write to the connection's strand and waits for it: Respond writes a whole response;
// BeginStream a chunked answer's header, SendChunk one chunk; Finish, after
// the handler returned, answers 500 for a handler that did not answer or ends the stream.
#ifndef CODEBOX_HTTP_EXCHANGE_H_
#define CODEBOX_HTTP_EXCHANGE_H_

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/log.h"
#include "http/server.h"

namespace codebox::http {

using WriteDone = std::function<void(boost::system::error_code)>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// The Beast message for `r`, with X-Request-Id and the connection's keep-alive.
std::shared_ptr<HttpResponse> MakeResponse(Response r, const std::string& request_id,
                                           bool keep_alive);
// "event: <event>\ndata: <line>\n...\n" (the event name on one line).
std::string FormatEvent(std::string_view event, std::string_view data);

template <class Socket>
void AsyncWriteResponse(Socket& socket, std::shared_ptr<HttpResponse> msg, WriteDone done) {
  boost::beast::http::async_write(
      socket, *msg,
      [msg, done = std::move(done)](boost::system::error_code ec, size_t) { done(ec); });
}

// One chunk of a chunked body (an empty `text` writes the last chunk).
template <class Socket>
void AsyncWriteChunk(Socket& socket, std::shared_ptr<std::string> text, WriteDone done) {
  namespace bhttp = boost::beast::http;
  auto finish = [text, done = std::move(done)](boost::system::error_code ec, size_t) { done(ec); };
  if (text->empty()) {
    boost::asio::async_write(socket, bhttp::make_chunk_last(), std::move(finish));
  } else {
    boost::asio::async_write(socket, bhttp::make_chunk(boost::asio::buffer(*text)),
                             std::move(finish));
  }
}

template <class Conn>
class ConnectionExchange final : public Exchange {
 public:
  using Socket = typename Conn::SocketType;

  ConnectionExchange(std::shared_ptr<Conn> conn, std::string request_id, bool keep_alive)
      : conn_(std::move(conn)), request_id_(std::move(request_id)), keep_alive_(keep_alive) {}

  Status Respond(Response response) override {
    if (answered_) return Internal("a second answer to request " + request_id_ + " (a bug)");
    answered_ = true;
    auto msg = MakeResponse(std::move(response), request_id_, keep_alive_);
    return Write([msg](Socket& s, WriteDone d) { AsyncWriteResponse(s, msg, std::move(d)); });
  }

  Status BeginStream(int status, std::string_view content_type, const Headers& headers) override {
    namespace bhttp = boost::beast::http;
    if (answered_) return Internal("a second answer to request " + request_id_ + " (a bug)");
    answered_ = streaming_ = true;
    auto msg = std::make_shared<bhttp::response<bhttp::empty_body>>(
        static_cast<bhttp::status>(status), 11);
    msg->set(bhttp::field::content_type, std::string(content_type));
    msg->set("X-Request-Id", request_id_);
    for (const auto& [name, value] : headers) msg->set(name, value);
    msg->keep_alive(keep_alive_);
    msg->chunked(true);
    auto sr = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*msg);
    Status st = Write([msg, sr](Socket& s, WriteDone d) {
      bhttp::async_write_header(
          s, *sr, [msg, sr, d = std::move(d)](boost::system::error_code ec, size_t) { d(ec); });
    });
    if (st.ok()) conn_->StreamStarted();
    return st;
  }

  Status SendChunk(std::string_view bytes) override {
    if (!streaming_ || ended_) return Internal("SendChunk without BeginStream (a bug)");
    if (bytes.empty()) return Status::Ok();  // an empty chunk would end the body
    auto text = std::make_shared<std::string>(bytes);
    return Write([text](Socket& s, WriteDone d) { AsyncWriteChunk(s, text, std::move(d)); });
  }

  bool ClientGone() const override { return conn_->Gone(); }

  // After the handler returned.
  void Finish() {
    if (!answered_) {
      CODEBOX_LOG(kError, "http: request " << request_id_ << " ended without an answer");
      (void)Respond(ErrorResponse(
          500, "internal", "the request's handler ended without an answer (see the server log)"));
    } else if (streaming_ && !ended_) {
      ended_ = true;
      conn_->StreamEnding();
      auto last = std::make_shared<std::string>();
      (void)Write([last](Socket& s, WriteDone d) { AsyncWriteChunk(s, last, std::move(d)); });
    }
  }

 private:
  Status Write(std::function<void(Socket&, WriteDone)> start) {
    if (conn_->Gone()) return IoError("the client of request " + request_id_ + " has gone");
    boost::system::error_code ec = conn_->Write(std::move(start));
    if (ec) {
      return IoError("writing the answer to request " + request_id_ + ": " + ec.message() +
                     " (the client has gone or stopped reading)");
    }
    return Status::Ok();
  }

  std::shared_ptr<Conn> conn_;
  std::string request_id_;
  bool keep_alive_;
  bool answered_ = false;
  bool streaming_ = false;
  bool ended_ = false;
};

// Handle() on the handler thread: an exception is logged and answered 500.
template <class Conn>
void RunHandler(Handler& handler, const Request& request, ConnectionExchange<Conn>& exchange) {
  try {
    handler.Handle(request, exchange);
  } catch (const std::exception& e) {
    CODEBOX_LOG(kError, "http: handler threw on " << request.method << " " << request.path << ": "
                                                  << e.what());
  } catch (...) {
    CODEBOX_LOG(kError, "http: handler threw on " << request.method << " " << request.path);
  }
  exchange.Finish();
}

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_EXCHANGE_H_
