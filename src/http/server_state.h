// What the server's connections share with it (server.cc owns it, connection.cc uses it): the
// io_context, the options, the counters behind Server::stats(), the open connections (so Stop
// can close them) with the budgets they are counted in and which of them are idle (so a full
// budget can evict one), and the handler threads (so Stop can join them).
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
  std::atomic<uint64_t> evicted_connections{0};
  std::atomic<uint64_t> rejected_requests{0};

  // The budget a connection is counted in: its listener's kind, and for TCP its peer's IP.
  enum Budget { kTcp = 0, kUnix = 1 };
  // Idle connections of one budget or address, oldest first: idle sequence -> connection id.
  using IdleIndex = std::map<uint64_t, uint64_t>;
  struct Entry {
    std::weak_ptr<Connection> connection;
    Budget budget = kTcp;
    std::string address;    // the TCP peer's IP; "" for unix
    uint64_t idle_seq = 0;  // its key in the idle indexes; 0 while not idle
    bool evicted = false;   // out of the budgets already, its close posted
  };
  struct AddressShare {
    uint64_t open = 0;
    IdleIndex idle;
  };

  std::mutex mu;
  std::condition_variable cv;  // in_flight or connections changed
  bool stopping = false;
  uint64_t next_id = 0;  // of handler threads
  std::atomic<uint64_t> next_connection_id{0};
  uint64_t next_idle_seq = 0;
  std::map<uint64_t, Entry> connections;  // open ones, evicted ones until they are closed
  uint64_t budget_open[2] = {0, 0};
  IdleIndex budget_idle[2];
  std::map<std::string, AddressShare> addresses;  // TCP peers with a connection in the budget
  std::map<uint64_t, std::thread> handler_threads;
  std::vector<uint64_t> finished_threads;

  // Admits a new connection into its budgets, idle (it has sent nothing yet): when its
  // address's share or its listener's budget is full, the oldest idle connection of that one is
  // evicted first; false (nothing admitted) when none is idle or the server is stopping.
  // `id` is the connection's own, from NewConnectionId.
  bool AdmitConnection(uint64_t id, std::weak_ptr<Connection> connection, Budget budget,
                       const std::string& address);
  uint64_t NewConnectionId() { return ++next_connection_id; }
  void ConnectionClosed(uint64_t id);
  // A connection waits for a request with no byte of it read (MarkIdle; evictable from now
  // on), or has read one (MarkBusy; not evictable until MarkIdle). Each returns false when the
  // connection was evicted already: it must close without reading further.
  bool MarkIdle(uint64_t id);
  bool MarkBusy(uint64_t id);
  // Runs `body` on a thread of its own, counted in in_flight until it returns (the caller has
  // already counted it); false when the server is stopping (nothing runs, in_flight is
  // given back).
  bool SpawnHandler(std::function<void()> body);
};

// Serves one accepted connection until it closes, or closes it at once when its budgets have
// no room (connection.cc).
void ServeConnection(ServerState& state, boost::asio::ip::tcp::socket socket);
void ServeConnection(ServerState& state, boost::asio::local::stream_protocol::socket socket);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_SERVER_STATE_H_
