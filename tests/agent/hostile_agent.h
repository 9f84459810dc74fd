// A scripted fake agent on a socketpair, for tests that play box code that took over the
// in-box agent against the host's AgentClient.
#ifndef CODEBOX_TESTS_AGENT_HOSTILE_AGENT_H_
#define CODEBOX_TESTS_AGENT_HOSTILE_AGENT_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "base/io.h"
#include "agent_client/agent_client.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::testing {

using namespace std::chrono_literals;
using protocol::AgentClient;
using protocol::FrameType;
using protocol::Json;

// A fake agent on the other end of a socketpair: answers the hello, then runs `script`,
// then reads (and drops) whatever the client still sends until it hangs up.
class HostileAgent {
 public:
  using Script = std::function<void(HostileAgent&)>;

  explicit HostileAgent(Script script) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
    client_fd_.reset(fds[0]);
    fd_.reset(fds[1]);
    thread_ = std::thread([this, script] {
      auto hello = NextFrame();
      if (!hello) return;
      Send(FrameType::kHello, 0, R"({"protocol":1,"agent":"hostile"})");
      script(*this);
      while (NextFrame()) {
      }
    });
  }
  ~HostileAgent() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
  }

  std::unique_ptr<AgentClient> Connect(std::chrono::milliseconds idle = 2s) {
    auto client = AgentClient::Connect(std::move(client_fd_), 2s);
    if (!client.ok()) {
      ADD_FAILURE() << client.status().ToString();
      return nullptr;
    }
    (*client)->set_idle_timeout(idle);
    return std::move(*client);
  }

  // The next frame from the client, or nullopt at EOF / after 5 s.
  std::optional<protocol::Frame> NextFrame() {
    for (;;) {
      auto f = decoder_.Next();
      if (!f.ok()) return std::nullopt;
      if (f->has_value()) return std::move(**f);
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return std::nullopt;
      char buf[65536];
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  // The next request (control frame) from the client: its stream and message.
  std::pair<uint32_t, Json> NextRequest() {
    for (;;) {
      auto f = NextFrame();
      if (!f) return {0, Json()};
      if (f->type != FrameType::kControl) continue;
      auto j = protocol::ParseControl(f->payload);
      return {f->stream, j.ok() ? *j : Json()};
    }
  }
  // False once the client hung up (no SIGPIPE: MSG_NOSIGNAL).
  bool Send(FrameType type, uint32_t stream, std::string_view payload) {
    std::string frame = protocol::EncodeFrame(type, stream, payload);
    size_t off = 0;
    while (off < frame.size()) {
      ssize_t n = ::send(fd_.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool Event(uint32_t stream, const Json& event) {
    return Send(FrameType::kControl, stream, event.dump());
  }

 private:
  base::UniqueFd client_fd_, fd_;
  protocol::FrameDecoder decoder_;
  std::thread thread_;
};

inline Json ExitEvent(int code = 0) {
  return Json{{"event", "exit"},       {"exit_code", code},         {"signal", 0},
              {"timed_out", false},    {"output_truncated", false}, {"duration_ms", 1},
              {"out_of_memory", false}};
}

inline protocol::ExecRequest True() {
  protocol::ExecRequest r;
  r.exec.argv = {"true"};
  r.exec.timeout = 10s;
  return r;
}

// Waits (bounded) for the connection to end; returns why.
inline Status WaitDead(AgentClient& client) {
  for (int i = 0; i < 400 && client.connection_status().ok(); ++i) std::this_thread::sleep_for(5ms);
  return client.connection_status();
}

inline void ExpectViolation(const Status& st, const std::string& text) {
  EXPECT_EQ(st.code(), StatusCode::kProtocolError) << st.ToString();
  EXPECT_NE(st.message().find(text), std::string::npos) << st.ToString();
}

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_AGENT_HOSTILE_AGENT_H_
