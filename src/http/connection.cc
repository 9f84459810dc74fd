// One server connection: reads requests with Beast's parser under the size limits and the read
// deadlines, answers what the server itself decides (limits, auth, bad targets), and runs each
// other request's handler on a thread of its own. Everything touching the socket runs on the
// connection's strand; a handler thread posts its writes there and waits for them. While it
// waits for a request with no byte of it read, the connection is idle: a full budget may evict
// it (ServerState::MarkIdle/MarkBusy).
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <optional>

#include "base/log.h"
#include "http/beast_request.h"
#include "http/exchange.h"
#include "http/request.h"
#include "http/server_state.h"

namespace codebox::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr size_t kWatchChunk = 4096;
constexpr size_t kMaxPipelined = 64 << 10;  // bytes of a next request read while handling one
constexpr auto kLingerTime = std::chrono::milliseconds(500);
constexpr auto kEventKeepAlive = std::chrono::seconds(15);

bool IsParseError(const error_code& ec) {
  return std::strcmp(ec.category().name(), "beast.http") == 0;
}

template <class Socket>
class ConnectionImpl : public Connection,
                       public std::enable_shared_from_this<ConnectionImpl<Socket>> {
 public:
  using SocketType = Socket;
  using WriteStart = std::function<void(Socket&, WriteDone)>;

  ConnectionImpl(ServerState& state, uint64_t id, Socket socket, std::string peer)
      : s_(state),
        id_(id),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        ping_timer_(socket_.get_executor()),
        peer_(std::move(peer)) {}
  ~ConnectionImpl() override { ReleaseBody(); }

  void Begin() {
    net::post(socket_.get_executor(), [self = this->shared_from_this()] { self->ReadRequest(); });
  }
  // Not admitted: closed before anything else saw it.
  void Refuse() {
    closed_ = gone_ = true;
    error_code ignored;
    socket_.close(ignored);
  }

  void PostClose() override {
    net::post(socket_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

  // From a handler thread (ConnectionExchange): runs the write on the strand and waits for it.
  error_code Write(WriteStart start) {
    auto done = std::make_shared<std::promise<error_code>>();
    std::future<error_code> result = done->get_future();
    net::post(socket_.get_executor(), [self = this->shared_from_this(), start, done] {
      self->Enqueue(start, [done](error_code ec) { done->set_value(ec); });
    });
    // The write deadline closes the socket, which ends the write; the margin is for a strand
    // that is busy.
    if (result.wait_for(s_.options.write_timeout + std::chrono::seconds(5)) !=
        std::future_status::ready) {
      PostClose();
      return net::error::timed_out;
    }
    return result.get();
  }
  bool Gone() const { return gone_.load(); }
  void StreamStarted() {
    net::post(socket_.get_executor(), [self = this->shared_from_this()] {
      self->streaming_ = true;
      self->ArmPing();
    });
  }
  void StreamEnding() {
    net::post(socket_.get_executor(), [self = this->shared_from_this()] {
      self->streaming_ = false;
      self->ping_timer_.cancel();
    });
  }

 private:
  using Parser = bhttp::request_parser<bhttp::string_body>;

  // Between requests. A next request already begun (pipelined while the last one was handled)
  // is read at once; else the connection is idle until its first byte, for first_byte_timeout on
  // a new connection and read_timeout on a kept-alive one.
  void ReadRequest() {
    ReleaseBody();  // the last request's body is gone with its handler
    if (closed_) return;
    if (buffer_.size() > 0) return ReadHead();
    if (!s_.MarkIdle(id_)) return Close();  // evicted
    auto wait = s_.options.read_timeout;
    if (requests_ == 0) wait = std::min(wait, s_.options.first_byte_timeout);
    ArmReadDeadline(Clock::now() + wait);
    socket_.async_read_some(
        buffer_.prepare(kWatchChunk),
        [self = this->shared_from_this()](error_code ec, size_t n) { self->OnFirstBytes(ec, n); });
  }

  void OnFirstBytes(error_code ec, size_t n) {
    if (closed_) return;
    if (ec) return Close();  // the client closed an idle connection, or the deadline passed
    buffer_.commit(n);
    // Evicted while these bytes were on their way: it was idle when the budget needed room.
    if (!s_.MarkBusy(id_)) return Close();
    ReadHead();
  }

  // From a request's first byte: its head within header_timeout, the whole of it within
  // read_timeout (OnHeader moves the deadline for the body).
  void ReadHead() {
    ++requests_;
    request_start_ = Clock::now();
    parser_.emplace();
    LimitParser(*parser_, s_.options.max_header_bytes, s_.options.max_body_bytes);
    ArmReadDeadline(request_start_ + std::min(s_.options.header_timeout, s_.options.read_timeout));
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  // Closes the connection at `deadline` unless the read ends (OnRead) or the deadline moves.
  void ArmReadDeadline(Clock::time_point deadline) {
    uint64_t gen = ++read_gen_;
    read_timer_.expires_at(deadline);
    read_timer_.async_wait([self = this->shared_from_this(), gen](error_code ec) {
      if (!ec && gen == self->read_gen_) self->Close();
    });
  }

  // The body is read after the header, so that a client waiting for "100 Continue" (curl
  // with a large upload) gets it; the size limits were checked on the header already.
  void OnHeader(error_code ec) {
    // A Transfer-Encoding not ending in chunked: no length, so the connection ends after it.
    if (!ec && !closed_) {
      Status framing = CheckFraming(*parser_);
      if (!framing.ok()) return Reject(400, "invalid_argument", framing.message(), true);
    }
    if (ec || closed_ || parser_->is_done()) return OnRead(ec);
    ArmReadDeadline(request_start_ + s_.options.read_timeout);
    // Reserve the body's memory before reading it (the parser checked it against body_limit).
    uint64_t want = std::min(parser_->content_length().value_or(s_.options.max_body_bytes),
                             s_.options.max_body_bytes);
    if (s_.body_bytes.fetch_add(want) + want > s_.options.max_buffered_body_bytes) {
      s_.body_bytes -= want;
      return Reject(503, "unavailable",
                    "the server is receiving too many request bodies at once; retry shortly",
                    true);
    }
    body_reserved_ = want;
    auto read_body = [self = this->shared_from_this()] {
      bhttp::async_read(self->socket_, self->buffer_, *self->parser_,
                        [self](error_code ec, size_t) { self->OnRead(ec); });
    };
    if (!beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) return read_body();
    auto msg = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
    Enqueue(
        [msg](Socket& socket, WriteDone done) {
          bhttp::async_write(socket, *msg, [msg, done](error_code ec, size_t) { done(ec); });
        },
        [self = this->shared_from_this(), read_body](error_code ec) {
          if (ec) return self->Close();
          read_body();
        });
  }

  void OnRead(error_code ec) {
    ++read_gen_;
    read_timer_.cancel();
    if (closed_) return;
    if (ec == bhttp::error::header_limit) {
      return Reject(
          431, "header_too_large",
          "the request headers pass " + std::to_string(s_.options.max_header_bytes) + " bytes",
          true);
    }
    if (ec == bhttp::error::body_limit) {
      return Reject(
          413, "payload_too_large",
          "the request body passes " + std::to_string(s_.options.max_body_bytes) + " bytes", true);
    }
    if (ec && IsParseError(ec) && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return Reject(400, "invalid_argument", "malformed HTTP request: " + ec.message(), true);
    }
    if (ec) return Close();
    Dispatch(parser_->release());
  }

  void Dispatch(bhttp::request<bhttp::string_body> msg) {
    auto request = std::make_shared<Request>();
    request->peer = peer_;
    request->request_id = "r-" + std::to_string(++s_.request_counter);
    request_id_ = request->request_id;
    keep_alive_ = msg.keep_alive();
    const auto& o = s_.options;
    Status built = BuildRequest(std::move(msg), o.tokens, request.get());
    if (!built.ok()) return Reject(400, "invalid_argument", built.message(), false);

    bool is_public = false;
    for (const auto& p : o.public_paths) is_public |= (p == request->path);
    if (o.handler_authenticates && o.handler_authenticates(*request)) is_public = true;
    if (!o.tokens.empty() && !is_public && request->token < 0) {
      return Reject(401, "unauthenticated",
                    request->Header("authorization").empty()
                        ? "this server needs a token: send 'Authorization: Bearer <token>'"
                        : "the bearer token is not one this server accepts",
                    false);
    }
    if (s_.in_flight.fetch_add(1) >= o.max_in_flight) {
      s_.in_flight.fetch_sub(1);
      return Reject(503, "unavailable",
                    "the server is handling " + std::to_string(o.max_in_flight) +
                        " requests (--max-in-flight); retry shortly",
                    false);
    }
    handler_done_ = false;
    auto exchange = std::make_shared<ConnectionExchange<ConnectionImpl>>(
        this->shared_from_this(), request->request_id, keep_alive_);
    bool spawned = s_.SpawnHandler([self = this->shared_from_this(), request, exchange]() mutable {
      RunHandler(*self->s_.handler, *request, *exchange);
      exchange.reset();
      net::post(self->socket_.get_executor(), [self] { self->OnHandlerDone(); });
    });
    if (!spawned) {
      keep_alive_ = false;
      return Reject(503, "unavailable", "the server is shutting down", true);
    }
    Watch();
  }

  // While a handler runs: notice the client going away, keeping any bytes of a next request.
  void Watch() {
    if (closed_ || watch_pending_ || handler_done_ || buffer_.size() > kMaxPipelined) return;
    watch_pending_ = true;
    socket_.async_read_some(buffer_.prepare(kWatchChunk),
                            [self = this->shared_from_this()](error_code ec, size_t n) {
                              self->watch_pending_ = false;
                              if (!ec) self->buffer_.commit(n);
                              if (self->handler_done_) return self->Continue();
                              if (ec) {
                                self->gone_ = true;
                                return self->Close();
                              }
                              self->Watch();
                            });
  }

  void OnHandlerDone() {
    handler_done_ = true;
    ReleaseBody();
    ping_timer_.cancel();
    if (closed_) return;
    if (!keep_alive_ || gone_) return CloseGracefully();
    error_code ignored;
    if (watch_pending_) {
      socket_.cancel(ignored);  // the watch's completion continues
    } else {
      Continue();
    }
  }

  void Continue() {
    if (!keep_alive_ || gone_) return CloseGracefully();
    ReadRequest();
  }

  // An answer the server makes itself; `close` after it when the request was not read whole.
  void Reject(int status, std::string_view code, const std::string& message, bool close) {
    s_.rejected_requests++;
    if (request_id_.empty() || close) request_id_ = "r-" + std::to_string(++s_.request_counter);
    Response r = ErrorResponse(status, code, message);
    if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    if (close) keep_alive_ = false;
    auto msg = MakeResponse(std::move(r), request_id_, keep_alive_);
    Enqueue(
        [msg](Socket& socket, WriteDone done) { AsyncWriteResponse(socket, msg, std::move(done)); },
        [self = this->shared_from_this()](error_code ec) {
          if (ec) return self->Close();
          self->handler_done_ = true;
          self->Continue();
        });
    request_id_.clear();
  }

  void Enqueue(WriteStart start, WriteDone done) {
    queue_.push_back({std::move(start), std::move(done)});
    if (!writing_) NextWrite();
  }

  void NextWrite() {
    if (queue_.empty()) {
      writing_ = false;
      return;
    }
    writing_ = true;
    auto [start, done] = std::move(queue_.front());
    queue_.pop_front();
    if (closed_ || gone_) {
      done(net::error::connection_reset);
      return NextWrite();
    }
    uint64_t gen = ++write_gen_;
    write_timer_.expires_after(s_.options.write_timeout);
    write_timer_.async_wait([self = this->shared_from_this(), gen](error_code ec) {
      if (!ec && gen == self->write_gen_) self->Close();
    });
    start(socket_, [self = this->shared_from_this(), done = std::move(done)](error_code ec) {
      ++self->write_gen_;
      self->write_timer_.cancel();
      if (ec) self->gone_ = true;
      done(ec);
      self->NextWrite();
    });
  }

  // ": keep-alive" comments while an event stream is idle, so proxies and clients with read
  // deadlines keep it open. Never queued: only when no write is under way (a client that does
  // not read keeps the last write pending until write_timeout closes the connection), so with
  // the handler's one blocking write at a time, what a slow reader makes the server hold is
  // one event and one ping.
  void ArmPing() {
    if (!streaming_ || closed_) return;
    ping_timer_.expires_after(kEventKeepAlive);
    ping_timer_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || !self->streaming_ || self->closed_) return;
      if (!self->writing_ && self->queue_.empty()) {
        auto text = std::make_shared<std::string>(": keep-alive\n\n");
        self->Enqueue([text](Socket& s, WriteDone d) { AsyncWriteChunk(s, text, std::move(d)); },
                      [](error_code) {});
      }
      self->ArmPing();
    });
  }

  // Half-closes and reads what the client still sends for a moment before closing, so an
  // error answer is not lost to a reset from unread bytes.
  void CloseGracefully() {
    if (closed_) return;
    error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    ArmReadDeadline(Clock::now() + kLingerTime);
    Drain();
  }
  void Drain() {
    if (closed_ || watch_pending_) return;
    buffer_.clear();
    watch_pending_ = true;
    socket_.async_read_some(buffer_.prepare(kWatchChunk),
                            [self = this->shared_from_this()](error_code ec, size_t) {
                              self->watch_pending_ = false;
                              if (ec) return self->Close();
                              self->Drain();
                            });
  }

  void ReleaseBody() {
    s_.body_bytes -= body_reserved_;
    body_reserved_ = 0;
  }

  void Close() {
    if (handler_done_) ReleaseBody();  // else the handler still holds it: released when done
    if (closed_) return;
    closed_ = true;
    gone_ = true;
    streaming_ = false;
    error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
    ++read_gen_;
    ++write_gen_;
    read_timer_.cancel();
    write_timer_.cancel();
    ping_timer_.cancel();
    s_.ConnectionClosed(id_);
  }

  ServerState& s_;
  const uint64_t id_;
  Socket socket_;
  net::steady_timer read_timer_, write_timer_, ping_timer_;
  std::string peer_;
  uint64_t requests_ = 0;            // begun on this connection
  Clock::time_point request_start_;  // the current request's first byte
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::string request_id_;
  bool keep_alive_ = true;
  bool closed_ = false;
  bool handler_done_ = true;
  uint64_t body_reserved_ = 0;  // of ServerState::body_bytes, for the request being handled
  bool watch_pending_ = false;
  bool writing_ = false;
  bool streaming_ = false;
  uint64_t read_gen_ = 0, write_gen_ = 0;
  std::atomic<bool> gone_{false};
  std::deque<std::pair<WriteStart, WriteDone>> queue_;
};

template <class Socket>
void Serve(ServerState& state, Socket socket, std::string peer, ServerState::Budget budget,
           const std::string& address) {
  uint64_t id = state.NewConnectionId();
  auto connection =
      std::make_shared<ConnectionImpl<Socket>>(state, id, std::move(socket), std::move(peer));
  if (!state.AdmitConnection(id, connection, budget, address)) return connection->Refuse();
  connection->Begin();
}

}  // namespace

namespace {

// Whose share of the connections a peer address counts in: an IPv4 address is one host; an
// IPv6 host is given a whole /64 (and often takes many addresses of it), so its /64 is one share.
std::string ShareKey(const net::ip::address& address) {
  if (address.is_v6() && !address.to_v6().is_v4_mapped()) {
    auto bytes = address.to_v6().to_bytes();
    std::fill(bytes.begin() + 8, bytes.end(), 0);
    return net::ip::address_v6(bytes).to_string() + "/64";
  }
  if (address.is_v6()) {
    return net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6()).to_string();
  }
  return address.to_string();
}

}  // namespace

void ServeConnection(ServerState& state, net::ip::tcp::socket socket) {
  error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) {  // gone already (ENOTCONN): nothing to serve, no budget to count it in
    socket.close(ec);
    return;
  }
  std::string peer = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  Serve(state, std::move(socket), std::move(peer), ServerState::kTcp,
        ShareKey(endpoint.address()));
}

void ServeConnection(ServerState& state, net::local::stream_protocol::socket socket) {
  Serve(state, std::move(socket), "unix", ServerState::kUnix, "");
}

}  // namespace codebox::http
