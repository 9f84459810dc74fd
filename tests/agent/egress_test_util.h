// Helpers for the egress tests: a program's TCP connection to the agent's egress port, and
// the host's end of an EgressStream driven the way the box's bridge drives it.
#ifndef CODEBOX_TESTS_AGENT_EGRESS_TEST_UTIL_H_
#define CODEBOX_TESTS_AGENT_EGRESS_TEST_UTIL_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "agent_client/agent_client.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::testing {

// A blocking TCP connection to 127.0.0.1:port, as a program in the box makes it.
inline StatusOr<base::UniqueFd> ConnectLoopback(uint16_t port) {
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return base::ErrnoStatus("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return base::ErrnoStatus("connect 127.0.0.1:" + std::to_string(port));
  }
  // A broken test must fail, not hang.
  timeval tv{20, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads until EOF; an error (a reset) is returned as a Status.
inline StatusOr<std::string> ReadToEof(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return base::ErrnoStatus("recv after " + std::to_string(out.size()) + " bytes");
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

inline Status SendAllBytes(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return base::ErrnoStatus("send");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen() & 0xff);
  return s;
}

// The host's end of one egress stream, pumped as the box's bridge pumps it.
struct HostEnd {
  explicit HostEnd(protocol::EgressStream& s) : stream(s) {}
  protocol::EgressStream& stream;
  std::string received;
  bool connected = false;
  bool box_eof = false;
  bool ended = false;
  Status status;
  size_t sent = 0;
  bool eof_sent = false;

  // Waits up to `wait` for a change and applies it: takes the box's data and acknowledges
  // it, sends what the credit allows of `to_send` from `sent` on, and the end after it when
  // `send_eof`. Returns false when nothing happened within `wait`.
  bool Step(std::string_view to_send, bool send_eof, std::chrono::milliseconds wait) {
    pollfd p{stream.wake_fd(), POLLIN, 0};
    bool woke = ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
    protocol::EgressStream::State st = stream.Take();
    connected = st.connected;
    if (!st.data.empty()) {
      received += st.data;
      Status ack = stream.Ack(st.data.size());
      if (!ack.ok()) ADD_FAILURE() << ack.ToString();
    }
    box_eof = st.box_eof;
    if (st.ended) {
      ended = true;
      status = st.status;
      return true;
    }
    size_t n = std::min<uint64_t>(st.send_credit, to_send.size() - std::min(sent, to_send.size()));
    if (n > 0) {
      Status s = stream.Send(to_send.substr(sent, n));
      if (!s.ok()) ADD_FAILURE() << s.ToString();
      sent += n;
      woke = true;
    }
    if (send_eof && connected && !eof_sent && sent >= to_send.size()) {
      Status s = stream.SendEof();
      if (!s.ok()) ADD_FAILURE() << s.ToString();
      eof_sent = true;
      woke = true;
    }
    return woke;
  }

  // Steps until `done` holds or the stream ended, within `limit`.
  template <typename Pred>
  bool Until(Pred done, std::string_view to_send = {}, bool send_eof = false,
             std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!done() && !ended) {
      if (std::chrono::steady_clock::now() >= end) return false;
      Step(to_send, send_eof, std::chrono::milliseconds(50));
    }
    return done();
  }
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_AGENT_EGRESS_TEST_UTIL_H_
