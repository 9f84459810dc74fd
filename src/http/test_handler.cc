#include "http/test_handler.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "base/fs.h"

namespace codebox::http::testing {

void Latch::Set() {
  std::lock_guard lock(mu_);
  set_ = true;
  cv_.notify_all();
}

void Latch::Reset() {
  std::lock_guard lock(mu_);
  set_ = false;
}

bool Latch::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return set_; });
}

bool Latch::IsSet() {
  std::lock_guard lock(mu_);
  return set_;
}

void TestHandler::Handle(const Request& request, Exchange& exchange) {
  handled++;
  const std::string& path = request.path;
  if (path == "/echo" || path == "/healthz") {
    std::string text = request.method + " " + path + "\nquery";
    for (const auto& [k, v] : request.query) text += " " + k + "=" + v + ";";
    text += "\nx-test: " + request.Header("x-test") + "\nbody: " + request.body;
    (void)exchange.Respond({200, "text/plain", text, {{"X-Echo", "1"}}});
  } else if (path == "/events") {
    if (!exchange.BeginEvents().ok()) return;
    (void)exchange.SendEvent("a", "1");
    started.Set();
    release.WaitFor(std::chrono::seconds(5));
    (void)exchange.SendEvent("b", "2\nline2");
  } else if (path == "/block") {
    started.Set();
    release.WaitFor(std::chrono::seconds(5));
    (void)exchange.Respond({200, "text/plain", "done", {}});
  } else if (path == "/until-gone") {
    if (!exchange.BeginEvents().ok()) return;
    started.Set();
    for (int i = 0; i < 500; ++i) {
      if (!exchange.SendEvent("tick", std::to_string(i)).ok()) {
        client_gone_after_failure = exchange.ClientGone();
        gone_seen.Set();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } else if (path == "/flood") {
    if (!exchange.BeginEvents().ok()) return;
    started.Set();
    const std::string data(64 << 10, 'x');
    for (int i = 0; i < 4096; ++i) {
      if (!exchange.SendEvent("big", data).ok()) {
        gone_seen.Set();
        return;
      }
      events_sent++;
    }
  } else if (path == "/noanswer") {
    return;
  } else if (path == "/throw") {
    throw std::runtime_error("test handler throws");
  } else {
    (void)exchange.Respond(ErrorResponse(NotFound("no route " + path)));
  }
}

TestServer::~TestServer() {
  if (server) server->Stop(std::chrono::seconds(5));
  server.reset();
  if (!dir.empty()) (void)base::RemoveTree(dir);
}

std::unique_ptr<TestServer> StartTestServer(Handler* handler, ServerOptions options) {
  auto t = std::make_unique<TestServer>();
  auto dir = base::MakeTempDir(base::TempRoot(), "codebox-http-test-");
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  if (!dir.ok()) return nullptr;
  t->dir = *dir;
  if (options.listen.empty()) {
    options.listen = {*ParseAddress("unix:" + t->dir + "/sock/s.sock"),
                      *ParseAddress("127.0.0.1:0")};
  }
  t->server = std::make_unique<Server>(options, handler);
  Status st = t->server->Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return nullptr;
  auto bound = t->server->bound();
  for (const Address& a : bound) {
    (a.kind == Address::Kind::kUnix ? t->unix_address : t->tcp_address) = a;
  }
  return t;
}

ClientRequest Get(const std::string& target) {
  ClientRequest r;
  r.target = target;
  r.timeout = std::chrono::seconds(10);
  return r;
}

ClientRequest Post(const std::string& target, const std::string& body) {
  ClientRequest r = Get(target);
  r.method = "POST";
  r.body = body;
  r.content_type = "text/plain";
  return r;
}

}  // namespace codebox::http::testing
