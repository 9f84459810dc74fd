// A Handler for the http tests, with routes that echo, stream events, block until released and
// stream until the client goes; plus a fixture-like helper that starts a server on a unix
// socket in a fresh temp dir and on 127.0.0.1 port 0.
#ifndef CODEBOX_HTTP_TEST_HANDLER_H_
#define CODEBOX_HTTP_TEST_HANDLER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "http/client.h"
#include "http/server.h"

namespace codebox::http::testing {

// A one-shot flag with a bounded wait.
class Latch {
 public:
  void Set();
  void Reset();
  bool WaitFor(std::chrono::milliseconds timeout);
  bool IsSet();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

class TestHandler : public Handler {
 public:
  // /echo: "METHOD PATH\nquery k=v;...\nx-test: V\nbody: BODY"
  // /events: events a ("1"), then waits for `release` (at most 5 s), then b ("2\nline2")
  // /block: waits for `release` (at most 5 s), then 200 "done"
  // /until-gone: an event every 20 ms until SendEvent fails (at most 10 s); records the result
  // /flood: 64 KiB events as fast as SendEvent takes them until it fails (at most 4096),
  //   counted in events_sent; sets gone_seen at the failure
  // /noanswer: returns without answering; /throw: throws
  void Handle(const Request& request, Exchange& exchange) override;

  Latch started;  // set when /events sent its first event or /block began
  Latch release;
  Latch gone_seen;  // /until-gone saw SendEvent fail
  std::atomic<bool> client_gone_after_failure{false};
  std::atomic<int> handled{0};
  std::atomic<int> events_sent{0};  // by /flood
};

struct TestServer {
  std::string dir;
  std::unique_ptr<Server> server;
  Address unix_address, tcp_address;
  ~TestServer();
  Client UnixClient(ClientOptions o = {}) const { return Client(unix_address, o); }
  Client TcpClient(ClientOptions o = {}) const { return Client(tcp_address, o); }
};

// Starts `handler` behind a server with `options` (listen is filled in); fails the test (and
// returns nullptr) when it cannot start.
std::unique_ptr<TestServer> StartTestServer(Handler* handler, ServerOptions options = {});

ClientRequest Get(const std::string& target);
ClientRequest Post(const std::string& target, const std::string& body);

}  // namespace codebox::http::testing

#endif  // CODEBOX_HTTP_TEST_HANDLER_H_
