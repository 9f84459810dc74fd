// A plain-HTTP server on the host's 127.0.0.1 for the egress tests: what a box may reach only
// through its proxy, and only when its allowlist names "127.0.0.1:PORT". One thread accepts; each
// connection gets one answer (Connection: close). Every wait has a deadline.
#ifndef CODEBOX_TESTS_BOX_EGRESS_TEST_SERVER_H_
#define CODEBOX_TESTS_BOX_EGRESS_TEST_SERVER_H_

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/io.h"
#include "base/unique_fd.h"
#include "testing/loopback_listener.h"

namespace codebox::testing {

class HttpTestServer {
 public:
  // The body for a path ("/hello"), or nullopt for 404.
  using Handler = std::function<std::optional<std::string>(const std::string& path)>;

  explicit HttpTestServer(Handler handler) : handler_(std::move(handler)) {
    auto l = ListenOnLoopback();
    if (!l.ok()) return;
    listener_ = std::move(*l);
    ::listen(listener_.fd.get(), 64);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HttpTestServer() {
    stop_ = true;
    ::shutdown(listener_.fd.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : connections_) t.join();
  }

  bool ok() const { return listener_.fd.valid(); }
  int port() const { return listener_.port; }
  std::string where() const { return "127.0.0.1:" + std::to_string(port()); }
  int requests() const { return requests_; }
  std::string last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listener_.fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      int fd = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      connections_.emplace_back([this, fd] { Answer(base::UniqueFd(fd)); });
    }
  }

  void Answer(base::UniqueFd conn) {
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
      pollfd p{conn.get(), POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) return;
      ssize_t n = ::read(conn.get(), buf, sizeof buf);
      if (n <= 0) return;
      head.append(buf, static_cast<size_t>(n));
    }
    ++requests_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_request_ = head;
    }
    // "GET /path HTTP/1.1"
    size_t a = head.find(' '), b = head.find(' ', a + 1);
    std::string path = a == std::string::npos ? "" : head.substr(a + 1, b - a - 1);
    std::optional<std::string> body = handler_(path);
    std::string answer = body ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 404 Not Found\r\n";
    if (!body) body = "not found\n";
    // pip reads an index page only as HTML.
    const bool page = !path.empty() && path.back() == '/';
    answer += std::string("Content-Type: ") + (page ? "text/html" : "application/octet-stream") +
              "\r\nContent-Length: " + std::to_string(body->size()) +
              "\r\nConnection: close\r\n\r\n" + *body;
    // Written with a deadline per chunk: a reader that stops (a budget cut) ends it.
    size_t off = 0;
    while (off < answer.size()) {
      pollfd p{conn.get(), POLLOUT, 0};
      if (::poll(&p, 1, 10'000) <= 0) return;
      ssize_t n = ::send(conn.get(), answer.data() + off, answer.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
    ::shutdown(conn.get(), SHUT_WR);
    // Until the client closes (at most 10 s), so it reads everything before the close.
    pollfd p{conn.get(), POLLIN, 0};
    while (::poll(&p, 1, 10'000) > 0 && ::read(conn.get(), buf, sizeof buf) > 0) {
    }
  }

  Handler handler_;
  LoopbackListener listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
  mutable std::mutex mu_;
  std::list<std::thread> connections_;
  std::string last_request_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_BOX_EGRESS_TEST_SERVER_H_
