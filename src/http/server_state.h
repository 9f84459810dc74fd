// What the server's connections share with it (server.cc owns it, connection.cc uses it): the
// io_context, the options, the counters behind Server::stats(), the open connections (so Stop
// can close them) and the handler threads (so Stop can join them).
#ifndef CODEBOX_HTTP_SERVER_STATE_H_
#define CODEBOX_HTTP_SERVER_STATE_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/server.h"

namespace codebox::http {

class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the socket on the connection's strand; a handler still running sees write errors.
  virtual void PostClose() = 0;
};

struct ServerState {
  ServerState(ServerOptions o, Handler* h) : options(std::move(o)), handler(h) {}

  // First, so that it is destroyed last: handlers still queued in it hold connections.
  boost::asio::io_context ioc;
  const ServerOptions options;
  Handler* const handler;

  std::atomic<uint64_t> request_counter{0};
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> in_flight{0};
  std::atomic<uint64_t> body_bytes{0};  // reserved for request bodies (max_buffered_body_bytes)
  std::atomic<uint64_t> rejected_connections{0};
  std::atomic<uint64_t> rejected_requests{0};

  std::mutex mu;
  std::condition_variable cv;  // in_flight or connections changed
  bool stopping = false;
  uint64_t next_id = 0;
  std::map<uint64_t, std::weak_ptr<Connection>> connections;
  std::map<uint64_t, std::thread> handler_threads;
  std::vector<uint64_t> finished_threads;

  // Registers a connection; its id for ConnectionClosed.
  uint64_t AddConnection(std::weak_ptr<Connection> connection);
  void ConnectionClosed(uint64_t id);
  // Runs `body` on a thread of its own, counted in in_flight until it returns (the caller has
  // already counted it); false when the server is stopping (nothing runs, in_flight is
  // given back).
  bool SpawnHandler(std::function<void()> body);
};

// Serves one accepted connection until it closes (connection.cc).
void ServeConnection(ServerState& state, boost::asio::ip::tcp::socket socket);
void ServeConnection(ServerState& state, boost::asio::local::stream_protocol::socket socket);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_SERVER_STATE_H_
