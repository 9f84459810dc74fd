#include "net/egress_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "base/unique_fd.h"
#include "net/proxy_request.h"

namespace codebox::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int PollFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (n < 0 && errno == EINTR) continue;
    if (n != 0) return n;
  }
}

// Sends all of `data` to a socket within `timeout`; false when it could not.
bool SendAll(int fd, std::string_view data, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (PollFor(fd, POLLOUT, deadline) <= 0) return false;
  }
  return true;
}

EgressRecord Refuse(int box_fd, EgressRecord record, int status, std::string reason) {
  record.allowed = false;
  record.reason = std::move(reason);
  (void)SendAll(box_fd, ProxyRefusal(status, record.reason), milliseconds(2'000));
  return record;
}

std::string AddressText(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  }
  return text;
}

Decision Judge(const EgressPolicy& policy, const sockaddr_storage& a, uint16_t port) {
  if (a.ss_family == AF_INET) {
    return policy.CheckAddress(reinterpret_cast<const sockaddr_in&>(a).sin_addr, port);
  }
  if (a.ss_family == AF_INET6) {
    return policy.CheckAddress(reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, port);
  }
  return {false, "not an IP address"};
}

// An IP literal as an address, without any resolver.
std::optional<sockaddr_storage> Literal(const std::string& host, uint16_t port) {
  sockaddr_storage out{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return out;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return out;
  }
  return std::nullopt;
}

StatusOr<base::UniqueFd> ConnectWithin(const sockaddr_storage& a, milliseconds timeout) {
  base::UniqueFd fd(::socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return Internal(std::string("socket: ") + strerror(errno));
  socklen_t len = a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0 &&
      errno != EINPROGRESS) {
    return Unavailable(AddressText(a) + ": " + strerror(errno));
  }
  if (PollFor(fd.get(), POLLOUT, Clock::now() + timeout) <= 0) {
    return DeadlineExceeded(AddressText(a) + ": no connection within " +
                            std::to_string(timeout.count()) + " ms");
  }
  int err = 0;
  socklen_t err_len = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len);
  if (err != 0) return Unavailable(AddressText(a) + ": " + strerror(err));
  return fd;
}

// Reads the request head; `rest` gets what came after it.
StatusOr<ProxyRequest> ReadHead(int box_fd, const EgressLimits& limits, std::string* rest) {
  const auto deadline = Clock::now() + limits.head_timeout;
  std::string buffer;
  char chunk[4096];
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<ProxyRequest> parsed,
                     ParseProxyRequest(buffer, limits.max_head_bytes));
    if (parsed) {
      *rest = buffer.substr(parsed->head_bytes);
      return std::move(*parsed);
    }
    if (PollFor(box_fd, POLLIN, deadline) <= 0) {
      return DeadlineExceeded("no whole request head within " +
                              std::to_string(limits.head_timeout.count()) + " ms");
    }
    ssize_t n = ::recv(box_fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return Unavailable("the box closed the connection before its request ended");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

// One direction of the relay: bytes read from `from`, waiting to be written to `to`.
struct Pipe {
  int from;
  int to;
  std::string pending;
  bool eof = false;
  uint64_t* counter;
};

// Relays until both sides are done, the budget or the idle time runs out; says how it ended.
std::string Relay(Pipe up, Pipe down, const EgressLimits& limits, EgressBudget& budget) {
  const auto start = Clock::now();
  uint64_t moved = 0;
  char chunk[64 << 10];
  for (;;) {
    if (up.eof && up.pending.empty() && down.eof && down.pending.empty()) return "closed";
    pollfd fds[4];
    int n = 0;
    Pipe* pipes[2] = {&up, &down};
    int index[4];
    for (int i = 0; i < 2; ++i) {
      Pipe& p = *pipes[i];
      if (!p.pending.empty()) {
        fds[n] = {p.to, POLLOUT, 0};
        index[n++] = i * 2 + 1;
      } else if (!p.eof) {
        fds[n] = {p.from, POLLIN, 0};
        index[n++] = i * 2;
      }
    }
    // Once the box ended its sending, a hang-up of its connection (both ways shut: the box is
    // going) ends the relay at once instead of after an idle upstream's idle_timeout.
    constexpr int kBoxHangUp = 4;
    if (up.eof && up.pending.empty() && !down.eof) {
      fds[n] = {up.from, 0, 0};  // POLLHUP and POLLERR are reported whatever is asked
      index[n++] = kBoxHangUp;
    }
    int ready = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(limits.idle_timeout.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return std::string("poll: ") + strerror(errno);
    if (ready == 0) return "idle for " + std::to_string(limits.idle_timeout.count()) + " ms";
    for (int k = 0; k < n; ++k) {
      if (fds[k].revents == 0) continue;
      if (index[k] == kBoxHangUp) {
        if ((fds[k].revents & (POLLHUP | POLLERR)) != 0) return "the box closed the connection";
        continue;
      }
      Pipe& p = *pipes[index[k] / 2];
      if (index[k] % 2 == 0) {  // readable
        ssize_t got = ::recv(p.from, chunk, sizeof chunk, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (got <= 0) {
          p.eof = true;
          ::shutdown(p.to, SHUT_WR);
          continue;
        }
        if (!budget.Take(static_cast<uint64_t>(got))) {
          return "the box's network budget (" + std::to_string(budget.max_bytes()) +
                 " bytes) is used up";
        }
        p.pending.assign(chunk, static_cast<size_t>(got));
      } else {  // writable
        ssize_t sent =
            ::send(p.to, p.pending.data(), p.pending.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (sent < 0) return std::string("send: ") + strerror(errno);
        p.pending.erase(0, static_cast<size_t>(sent));
        *p.counter += static_cast<uint64_t>(sent);
        moved += static_cast<uint64_t>(sent);
        if (limits.rate_bytes_per_second > 0) {  // ahead of the rate: wait until it is due
          auto due = start + milliseconds(moved * 1000 / limits.rate_bytes_per_second);
          if (due > Clock::now()) std::this_thread::sleep_until(due);
        }
      }
    }
  }
}

}  // namespace

bool EgressBudget::Take(uint64_t n) {
  uint64_t used = used_.load();
  do {
    if (n > max_bytes_ || used > max_bytes_ - n) return false;
  } while (!used_.compare_exchange_weak(used, used + n));
  return true;
}

Resolver SystemResolver(milliseconds timeout) {
  return
      [timeout](const std::string& host, uint16_t port) -> StatusOr<std::vector<sockaddr_storage>> {
        // getaddrinfo has no deadline of its own: it runs on a thread that is left behind (it ends
        // when the resolver gives up) if it takes longer than `timeout`.
        auto promise = std::make_shared<std::promise<StatusOr<std::vector<sockaddr_storage>>>>();
        auto answer = promise->get_future();
        std::thread([host, port, promise] {
          addrinfo hints{};
          hints.ai_family = AF_UNSPEC;
          hints.ai_socktype = SOCK_STREAM;
          addrinfo* list = nullptr;
          int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
          if (rc != 0) {
            promise->set_value(NotFound(host + " does not resolve (" + gai_strerror(rc) + ")"));
            return;
          }
          std::vector<sockaddr_storage> out;
          for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
            sockaddr_storage s{};
            std::memcpy(&s, a->ai_addr, std::min<size_t>(a->ai_addrlen, sizeof s));
            out.push_back(s);
          }
          ::freeaddrinfo(list);
          promise->set_value(std::move(out));
        }).detach();
        if (answer.wait_for(timeout) != std::future_status::ready) {
          return DeadlineExceeded(host + " did not resolve within " +
                                  std::to_string(timeout.count()) + " ms");
        }
        return answer.get();
      };
}

EgressRecord ServeEgressConnection(int box_fd, const EgressPolicy& policy,
                                   const EgressLimits& limits, EgressBudget& budget,
                                   const Resolver& resolve) {
  EgressRecord record;
  std::string rest;
  auto request = ReadHead(box_fd, limits, &rest);
  if (!request.ok()) {
    int status = request.status().code() == StatusCode::kResourceExhausted ? 431 : 400;
    return Refuse(box_fd, record, status, request.status().message());
  }
  record.host = request->host;
  record.port = request->port;
  Decision name = policy.CheckName(request->host, request->port);
  if (!name.allowed) return Refuse(box_fd, record, 403, name.reason);

  // What the box sends upstream counts against the budget: a plain-HTTP request's head too
  // (its URL and headers carry data as a body does), and whatever came after the head.
  const uint64_t head_up = request->tunnel ? 0 : request->upstream_head.size();
  if (!budget.Take(head_up + rest.size())) {
    return Refuse(
        box_fd, record, 403,
        "the box's network budget (" + std::to_string(budget.max_bytes()) + " bytes) is used up");
  }
  std::string host = *NormalizeHost(request->host);  // CheckName allowed it: it normalizes
  std::vector<sockaddr_storage> addresses;
  if (auto literal = Literal(host, request->port)) {
    addresses.push_back(*literal);
  } else {
    auto resolved = resolve(host, request->port);
    if (!resolved.ok()) return Refuse(box_fd, record, 502, resolved.status().message());
    addresses = std::move(*resolved);
  }
  // Every address the name gave is judged; a connection is tried to the allowed ones only.
  std::string refused;
  Status last_error = Unavailable(host + " resolved to no address");
  for (sockaddr_storage& a : addresses) {
    if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(a).sin_port = htons(record.port);
    if (a.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(a).sin6_port = htons(record.port);
    Decision d = Judge(policy, a, record.port);
    if (!d.allowed) {
      if (refused.empty()) refused = host + " resolved to " + d.reason;
      continue;
    }
    auto upstream = ConnectWithin(a, limits.connect_timeout);
    if (!upstream.ok()) {
      last_error = upstream.status();
      continue;
    }
    record.allowed = true;
    record.address = AddressText(a);
    const bool started =
        request->tunnel
            ? SendAll(box_fd, "HTTP/1.1 200 Connection established\r\n\r\n", milliseconds(5'000))
            : SendAll(upstream->get(), request->upstream_head, limits.connect_timeout);
    if (!started) {
      record.reason = request->tunnel ? "the box stopped reading" : "the upstream stopped reading";
      return record;
    }
    record.bytes_up = head_up;
    Pipe up{box_fd, upstream->get(), rest, false, &record.bytes_up};
    Pipe down{upstream->get(), box_fd, "", false, &record.bytes_down};
    record.reason = name.reason + "; " + Relay(std::move(up), std::move(down), limits, budget);
    return record;
  }
  if (!refused.empty()) return Refuse(box_fd, record, 403, refused);
  int status = last_error.code() == StatusCode::kDeadlineExceeded ? 504 : 502;
  return Refuse(box_fd, record, status, last_error.message());
}

EgressRecord ServeDirectConnection(int fd, const sockaddr_storage& target,
                                   const EgressPolicy& policy, const EgressLimits& limits,
                                   EgressBudget& budget) {
  EgressRecord record;
  record.host = AddressText(target);
  if (target.ss_family == AF_INET) {
    record.port = ntohs(reinterpret_cast<const sockaddr_in&>(target).sin_port);
  } else if (target.ss_family == AF_INET6) {
    record.port = ntohs(reinterpret_cast<const sockaddr_in6&>(target).sin6_port);
  }
  Decision d = Judge(policy, target, record.port);
  record.reason = d.reason;
  if (!d.allowed) return record;
  auto upstream = ConnectWithin(target, limits.connect_timeout);
  if (!upstream.ok()) {
    record.reason = upstream.status().message();
    return record;
  }
  record.allowed = true;
  record.address = record.host;
  Pipe up{fd, upstream->get(), "", false, &record.bytes_up};
  Pipe down{upstream->get(), fd, "", false, &record.bytes_down};
  record.reason = d.reason + "; " + Relay(std::move(up), std::move(down), limits, budget);
  return record;
}

}  // namespace codebox::net
