// The egress half of Server (docs/protocol.md, "egress_accept"): the box's only way out is a
// TCP port on 127.0.0.1 served here; each connection a program makes there is tied to one
// waiting egress_accept stream and its bytes cross the host connection, within a window each
// way. The agent never interprets the bytes: the host judges the program's proxy request.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/server.h"
#include "base/io.h"
#include "base/log.h"

namespace codebox::agent {

using protocol::FrameType;
using protocol::msg::kEgressWindow;

namespace {

constexpr int kEgressBacklog = 64;
// Acks are batched: one per this many bytes written, or when the buffer drains.
constexpr uint64_t kAckBatch = 64u << 10;
// Socket reads per wakeup, so one busy connection does not starve the others.
constexpr int kReadRounds = 4;
// Ended egress streams remembered (their late acks and data are dropped, not refused).
constexpr size_t kRememberedEgress = 4096;

std::string StreamName(uint32_t stream) { return "egress stream " + std::to_string(stream); }

// Closes with a reset (SO_LINGER 0): the program sees its connection refused midway, not a
// clean end it could take for a complete answer.
void CloseWithReset(base::UniqueFd& sock) {
  if (!sock.valid()) return;
  linger lg{1, 0};
  ::setsockopt(sock.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  sock.reset();
}

StatusOr<base::UniqueFd> Listen(uint16_t port) {
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return base::ErrnoStatus("egress port: socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string where = "egress port: 127.0.0.1:" + std::to_string(port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return base::ErrnoStatus(where + ": bind");
  }
  if (::listen(fd.get(), kEgressBacklog) != 0) return base::ErrnoStatus(where + ": listen");
  return fd;
}

}  // namespace

void Server::set_egress_port(uint16_t port, std::function<void(uint16_t)> on_listen) {
  egress_port_ = port;
  on_egress_listen_ = std::move(on_listen);
}

void Server::StartEgress(uint32_t stream) {
  if (!egress_listener_.valid()) {
    // Listening starts with the first request, which the host sends before any exec, so no
    // program in the box can take the port first.
    auto listener = Listen(egress_port_);
    if (!listener.ok()) return SendError(stream, listener.status());
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(listener->get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      egress_port_ = ntohs(addr.sin_port);
    }
    egress_listener_ = std::move(*listener);
    if (on_egress_listen_) on_egress_listen_(egress_port_);
  }
  egress_[stream];
  egress_waiting_.push_back(stream);
}

void Server::AddEgressPolls(std::vector<pollfd>& fds, std::vector<PollSlot>& slots) const {
  // The listener only while a stream waits: more connections wait in the backlog.
  if (egress_listener_.valid() && !egress_waiting_.empty()) {
    fds.push_back({egress_listener_.get(), POLLIN, 0});
    slots.push_back({0, 5});
  }
  const bool backed_up = OutputBackedUp();
  for (const auto& [stream, e] : egress_) {
    if (!e.sock.valid()) continue;
    short events = 0;
    if (!e.box_eof && e.unacked < kEgressWindow && !backed_up) events |= POLLIN;
    if (e.unwritten() > 0) events |= POLLOUT;
    if (events == 0) continue;
    fds.push_back({e.sock.get(), events, 0});
    slots.push_back({stream, 6});
  }
}

void Server::AcceptEgress() {
  while (!egress_waiting_.empty()) {
    base::UniqueFd sock(
        ::accept4(egress_listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!sock.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        CODEBOX_LOG(kWarn, "codebox-agent: egress port: accept: " << std::strerror(errno));
      }
      return;
    }
    // Small writes (HTTP heads, TLS handshakes) go out at once.
    int one = 1;
    ::setsockopt(sock.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint32_t stream = egress_waiting_.front();
    egress_waiting_.pop_front();
    egress_[stream].sock = std::move(sock);
    SendEvent(stream, protocol::msg::Connected{});
  }
}

void Server::HandleEgressAck(uint32_t stream, const protocol::Json& request) {
  auto decoded = protocol::msg::DecodeRequest(request);
  auto it = egress_.find(stream);
  if (it == egress_.end()) {
    if (egress_ended_.count(stream)) return;  // in flight when the stream ended
    return SendError(stream, ProtocolError("ack on stream " + std::to_string(stream) +
                                           ", which is not an open egress stream"));
  }
  if (!decoded.ok()) return EndEgress(stream, ProtocolError(decoded.status().message()));
  const uint64_t bytes = std::get<protocol::msg::EgressAck>(*decoded).bytes;
  Egress& e = it->second;
  if (bytes > e.unacked) {
    return EndEgress(stream, ProtocolError("ack for " + std::to_string(bytes) + " bytes on " +
                                           StreamName(stream) + ", which has only " +
                                           std::to_string(e.unacked) + " unacknowledged"));
  }
  e.unacked -= bytes;
}

bool Server::HandleEgressData(uint32_t stream, std::string_view payload) {
  auto it = egress_.find(stream);
  // Data in flight when the stream ended is dropped; other streams' data is not ours.
  if (it == egress_.end()) return egress_ended_.count(stream) > 0;
  Egress& e = it->second;
  if (!e.sock.valid()) {
    EndEgress(stream, ProtocolError("data on " + StreamName(stream) + " before its connection"));
    return true;
  }
  if (e.host_eof) {
    EndEgress(stream, ProtocolError("data on " + StreamName(stream) + " after its end"));
    return true;
  }
  if (payload.empty()) {
    e.host_eof = true;
  } else {
    if (e.unwritten() + e.written_unacked + payload.size() > kEgressWindow) {
      EndEgress(stream,
                ProtocolError("host sent more than the window of " + std::to_string(kEgressWindow) +
                              " unacknowledged bytes on " + StreamName(stream)));
      return true;
    }
    if (e.to_socket_off > 0 && e.to_socket_off * 2 >= e.to_socket.size()) {
      e.to_socket.erase(0, e.to_socket_off);  // the written prefix, before it dominates
      e.to_socket_off = 0;
    }
    e.to_socket.append(payload);
  }
  PumpEgress(stream, POLLOUT);  // write at once; what the socket does not take waits for POLLOUT
  return true;
}

void Server::PumpEgress(uint32_t stream, short revents) {
  auto it = egress_.find(stream);
  if (it == egress_.end() || !it->second.sock.valid()) return;
  Egress& e = it->second;
  const int fd = e.sock.get();
  if (revents & (POLLOUT | POLLERR | POLLHUP)) {
    while (e.unwritten() > 0) {
      ssize_t n = ::send(fd, e.to_socket.data() + e.to_socket_off, e.unwritten(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return EndEgress(stream, base::ErrnoStatus(StreamName(stream) + ": write"));
      e.to_socket_off += static_cast<size_t>(n);
      e.written_unacked += static_cast<uint64_t>(n);
    }
    if (e.unwritten() == 0) {
      e.to_socket.clear();
      e.to_socket_off = 0;
    }
    if (e.written_unacked >= kAckBatch || (e.written_unacked > 0 && e.unwritten() == 0)) {
      SendEvent(stream, protocol::msg::Ack{e.written_unacked});
      e.written_unacked = 0;
    }
  }
  if (e.host_eof && !e.shut_wr && e.unwritten() == 0) {
    ::shutdown(fd, SHUT_WR);
    e.shut_wr = true;
  }
  if (revents & (POLLIN | POLLERR | POLLHUP)) {
    for (int round = 0;
         round < kReadRounds && !e.box_eof && e.unacked < kEgressWindow && !OutputBackedUp();
         ++round) {
      size_t want = std::min<uint64_t>(read_buf_.size(), kEgressWindow - e.unacked);
      ssize_t n = ::read(fd, read_buf_.data(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return EndEgress(stream, base::ErrnoStatus(StreamName(stream) + ": read"));
      if (n == 0) {
        Send(FrameType::kData, stream, {});
        e.box_eof = true;
        break;
      }
      Send(FrameType::kData, stream, std::string_view(read_buf_.data(), static_cast<size_t>(n)));
      e.unacked += static_cast<uint64_t>(n);
    }
  }
  if (e.box_eof && e.shut_wr) EndEgress(stream, Status::Ok());
}

void Server::EndEgress(uint32_t stream, const Status& why) {
  auto it = egress_.find(stream);
  if (it == egress_.end()) return;
  if (why.ok()) {
    it->second.sock.reset();
    SendEvent(stream, protocol::msg::Done{});
  } else {
    CloseWithReset(it->second.sock);
    SendError(stream, why);
  }
  ForgetEgress(stream);
}

bool Server::CancelEgress(uint32_t target) {
  auto it = egress_.find(target);
  if (it == egress_.end()) return false;
  CloseWithReset(it->second.sock);
  ForgetEgress(target);
  return true;
}

void Server::ForgetEgress(uint32_t stream) {
  egress_.erase(stream);
  egress_waiting_.erase(std::remove(egress_waiting_.begin(), egress_waiting_.end(), stream),
                        egress_waiting_.end());
  if (egress_ended_.insert(stream).second) egress_ended_order_.push_back(stream);
  while (egress_ended_order_.size() > kRememberedEgress) {
    egress_ended_.erase(egress_ended_order_.front());
    egress_ended_order_.pop_front();
  }
}

void Server::CloseAllEgress() {
  for (auto& [stream, e] : egress_) CloseWithReset(e.sock);
  egress_.clear();
  egress_waiting_.clear();
  egress_listener_.reset();
}

}  // namespace codebox::agent
