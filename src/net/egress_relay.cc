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
#include "net/secrets.h"
#include "net/tls_interception.h"

namespace codebox::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

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

EgressRecord Refuse(int box_fd, EgressRecord record, int status, std::string reason,
                    std::string rule) {
  record.allowed = false;
  record.rule = std::move(rule);
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

class SocketByteStream final : public ByteStream {
 public:
  explicit SocketByteStream(int fd) : fd_(fd) {}
  int fd() const override { return fd_; }
  Result Read(char* buffer, size_t size) override {
    for (;;) {
      ssize_t n = ::recv(fd_, buffer, size, MSG_DONTWAIT);
      if (n > 0) return {Io::kDone, static_cast<size_t>(n), {}};
      if (n == 0) return {Io::kEof, 0, {}};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantRead, 0, {}};
      if (errno == ECONNRESET) return {Io::kEof, 0, {}};
      return {Io::kError, 0, std::string("recv: ") + strerror(errno)};
    }
  }
  Result Write(const char* data, size_t size) override {
    for (;;) {
      ssize_t n = ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) return {n > 0 ? Io::kDone : Io::kWantWrite, static_cast<size_t>(n), {}};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantWrite, 0, {}};
      return {Io::kError, 0, std::string("send: ") + strerror(errno)};
    }
  }
  void ShutdownWrite() override { ::shutdown(fd_, SHUT_WR); }

 private:
  int fd_;
};

using Io = ByteStream::Io;

short PollEventsFor(Io io) { return io == Io::kWantWrite ? POLLOUT : POLLIN; }

// Writes all of `data` to `stream` within `timeout`; false when it could not.
bool WriteAll(ByteStream& stream, std::string_view data, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!data.empty()) {
    ByteStream::Result r = stream.Write(data.data(), data.size());
    if (r.io == Io::kDone) {
      data.remove_prefix(r.bytes);
    } else if (r.io == Io::kError || r.io == Io::kEof ||
               PollFor(stream.fd(), PollEventsFor(r.io), deadline) <= 0) {
      return false;
    }
  }
  return true;
}

// Reads a request head from the box through `parse` (ParseProxyRequest, or ParseOriginRequest
// inside an intercepted connection); `rest` gets what came after it.
template <class Parse>
StatusOr<ProxyRequest> ReadRequest(ByteStream& box, const EgressLimits& limits, Parse parse,
                                   std::string* rest) {
  const auto deadline = Clock::now() + limits.head_timeout;
  std::string buffer;
  char chunk[4096];
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<ProxyRequest> parsed, parse(buffer));
    if (parsed) {
      *rest = buffer.substr(parsed->head_bytes);
      return std::move(*parsed);
    }
    ByteStream::Result r = box.Read(chunk, sizeof chunk);
    if (r.io == Io::kDone) {
      buffer.append(chunk, r.bytes);
    } else if (r.io == Io::kEof || r.io == Io::kError) {
      return Unavailable("the box closed the connection before its request ended");
    } else if (PollFor(box.fd(), PollEventsFor(r.io), deadline) <= 0) {
      return DeadlineExceeded("no whole request head within " +
                              std::to_string(limits.head_timeout.count()) + " ms");
    }
  }
}

// One direction of the relay: bytes read from `from`, waiting to be written to `to`.
struct Pipe {
  ByteStream* from;
  ByteStream* to;
  std::string pending;
  uint64_t* counter;
  PlaceholderScanner* scanner = nullptr;  // set: a placeholder's start ends the relay
  bool eof = false;
  short wait_from = 0;  // what from->fd() must become before the next Read; 0: try now
  short wait_to = 0;
};

// Relays until both sides are done, the budget or the idle time runs out; says how it ended.
// Each stream is tried until it has to wait (a TLS stream may hold bytes no poll would show),
// then the loop polls for what the waiting ones asked for.
// A cut for a reason the box must hear about sets `rule` (EgressRecord::rule).
std::string Relay(Pipe up, Pipe down, const EgressLimits& limits, EgressBudget& budget,
                  std::string* rule) {
  const auto start = Clock::now();
  uint64_t moved = 0;
  char chunk[64 << 10];
  Pipe* pipes[2] = {&up, &down};
  for (;;) {
    for (bool progress = true; progress;) {
      progress = false;
      for (Pipe* p : pipes) {
        if (p->pending.empty() && !p->eof && p->wait_from == 0) {
          ByteStream::Result r = p->from->Read(chunk, sizeof chunk);
          if (r.io == Io::kDone) {
            if (!budget.Take(r.bytes)) {
              *rule = "budget";
              return "the box's network budget (" + std::to_string(budget.max_bytes()) +
                     " bytes) is used up";
            }
            if (p->scanner != nullptr && p->scanner->Feed(std::string_view(chunk, r.bytes))) {
              *rule = "secret_elsewhere";
              return "cut: the box sent a secret's placeholder where no secret may go";
            }
            p->pending.assign(chunk, r.bytes);
            progress = true;
          } else if (r.io == Io::kEof) {
            p->eof = true;
            p->to->ShutdownWrite();
            progress = true;
          } else if (r.io == Io::kError) {
            return r.error;
          } else {
            p->wait_from = PollEventsFor(r.io);
          }
        }
        if (!p->pending.empty() && p->wait_to == 0) {
          ByteStream::Result r = p->to->Write(p->pending.data(), p->pending.size());
          if (r.io == Io::kDone) {
            p->pending.erase(0, r.bytes);
            *p->counter += r.bytes;
            moved += r.bytes;
            progress = true;
            if (limits.rate_bytes_per_second > 0) {  // ahead of the rate: wait until it is due
              auto due = start + milliseconds(moved * 1000 / limits.rate_bytes_per_second);
              if (due > Clock::now()) std::this_thread::sleep_until(due);
            }
          } else if (r.io == Io::kError || r.io == Io::kEof) {
            return r.error;
          } else {
            p->wait_to = PollEventsFor(r.io);
          }
        }
      }
    }
    if (up.eof && up.pending.empty() && down.eof && down.pending.empty()) return "closed";

    pollfd fds[5];
    short* waits[5];
    int n = 0;
    for (Pipe* p : pipes) {
      if (!p->pending.empty() && p->wait_to != 0) {
        fds[n] = {p->to->fd(), p->wait_to, 0};
        waits[n++] = &p->wait_to;
      } else if (p->pending.empty() && !p->eof && p->wait_from != 0) {
        fds[n] = {p->from->fd(), p->wait_from, 0};
        waits[n++] = &p->wait_from;
      }
    }
    // Once the box ended its sending, a hang-up of its connection (both ways shut: the box is
    // going) ends the relay at once instead of after an idle upstream's idle_timeout.
    const int hang_up = up.eof && up.pending.empty() && !down.eof ? n : -1;
    if (hang_up >= 0) {
      fds[n] = {up.from->fd(), 0, 0};  // POLLHUP and POLLERR are reported whatever is asked
      waits[n++] = nullptr;
    }
    int ready = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(limits.idle_timeout.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return std::string("poll: ") + strerror(errno);
    if (ready == 0) return "idle for " + std::to_string(limits.idle_timeout.count()) + " ms";
    for (int k = 0; k < n; ++k) {
      if (fds[k].revents == 0) continue;
      if (k == hang_up) {
        if ((fds[k].revents & (POLLHUP | POLLERR)) != 0) return "the box closed the connection";
        continue;
      }
      *waits[k] = 0;  // ready, or an error the next call reports
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

std::unique_ptr<ByteStream> SocketStream(int fd) { return std::make_unique<SocketByteStream>(fd); }

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

namespace {

// A refusal for the box: the HTTP status its proxy answers with, and why.
struct Refusal {
  int status;
  std::string why;
  std::string rule;  // EgressRecord::rule
};

// Resolves (or takes the literal), judges every address and connects to the first allowed one
// that answers; `record` gets the address.
StatusOr<base::UniqueFd> ConnectUpstream(const std::string& host, uint16_t port,
                                         const EgressPolicy& policy, const EgressLimits& limits,
                                         const Resolver& resolve, EgressRecord& record,
                                         Refusal* refusal) {
  std::vector<sockaddr_storage> addresses;
  if (auto literal = Literal(host, port)) {
    addresses.push_back(*literal);
  } else {
    auto resolved = resolve(host, port);
    if (!resolved.ok()) {
      *refusal = {502, resolved.status().message(), "resolve"};
      return resolved.status();
    }
    addresses = std::move(*resolved);
  }
  // Every address the name gave is judged; a connection is tried to the allowed ones only.
  std::string refused;
  Status last_error = Unavailable(host + " resolved to no address");
  for (sockaddr_storage& a : addresses) {
    if (a.ss_family == AF_INET) reinterpret_cast<sockaddr_in&>(a).sin_port = htons(port);
    if (a.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6&>(a).sin6_port = htons(port);
    Decision d = Judge(policy, a, port);
    if (!d.allowed) {
      if (refused.empty()) refused = host + " resolved to " + d.reason;
      continue;
    }
    auto upstream = ConnectWithin(a, limits.connect_timeout);
    if (!upstream.ok()) {
      last_error = upstream.status();
      continue;
    }
    record.address = AddressText(a);
    return upstream;
  }
  if (!refused.empty()) {
    *refusal = {403, refused, "internal_address"};
    return PermissionDenied(refused);
  }
  *refusal = {last_error.code() == StatusCode::kDeadlineExceeded ? 504 : 502, last_error.message(),
              "connect"};
  return last_error;
}

std::string Authority(const std::string& host, uint16_t port) {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port == 443 ? name : name + ":" + std::to_string(port);
}

// A CONNECT to one of a secret's hosts, answered: the box's TLS ended here with a certificate
// of the box's CA, the proxy's own TLS to the upstream (verified), the box's first request
// read, its placeholders replaced, and then the rest relayed. The upstream is told
// "Connection: close", so one request runs per connection.
std::string ServeIntercepted(int box_fd, int upstream_fd, const std::string& host, uint16_t port,
                             const SecretEgress& secrets, const EgressLimits& limits,
                             EgressBudget& budget, EgressRecord& record) {
  auto context = secrets.ca->ServerContextFor(host);
  if (!context.ok()) {
    record.allowed = false;
    record.rule = "tls";
    return "refused: " + context.status().message();
  }
  auto box = AcceptBoxTls(box_fd, *context, host, limits.head_timeout);
  if (!box.ok()) {
    record.allowed = false;
    record.rule = "tls";
    return "refused: " + box.status().message();
  }
  auto refuse = [&](int status, const std::string& why, const char* rule) {
    record.allowed = false;
    record.rule = rule;
    (void)WriteAll(**box, ProxyRefusal(status, why), milliseconds(2'000));
    (*box)->ShutdownWrite();
    return why;
  };
  auto upstream = ConnectUpstreamTls(upstream_fd, secrets.upstream, host, limits.connect_timeout);
  if (!upstream.ok()) return refuse(502, upstream.status().message(), "upstream_tls");
  std::string rest;
  const std::string authority = Authority(host, port);
  auto request = ReadRequest(
      **box, limits,
      [&](std::string_view bytes) {
        return ParseOriginRequest(bytes, limits.max_head_bytes, authority);
      },
      &rest);
  if (!request.ok()) {
    return refuse(request.status().code() == StatusCode::kResourceExhausted ? 431 : 400,
                  request.status().message(), "request");
  }
  auto head = secrets.injector.Rewrite(request->upstream_head, host, port, &record.secrets);
  if (!head.ok()) return refuse(403, head.status().message(), "secret_elsewhere");
  if (!budget.Take(head->size() + rest.size())) {
    return refuse(
        403,
        "the box's network budget (" + std::to_string(budget.max_bytes()) + " bytes) is used up",
        "budget");
  }
  if (!WriteAll(**upstream, *head, limits.connect_timeout)) return "the upstream stopped reading";
  record.bytes_up = head->size();
  Pipe up{box->get(), upstream->get(), rest, &record.bytes_up};
  Pipe down{upstream->get(), box->get(), "", &record.bytes_down};
  return "intercepted; " + Relay(std::move(up), std::move(down), limits, budget, &record.rule);
}

}  // namespace

EgressRecord ServeEgressConnection(int box_fd, const EgressPolicy& policy,
                                   const EgressLimits& limits, EgressBudget& budget,
                                   const Resolver& resolve, const SecretEgress* secrets,
                                   const AdmitTarget& admit) {
  static const SecretEgress kNoSecrets;
  if (secrets == nullptr) secrets = &kNoSecrets;
  EgressRecord record;
  std::string rest;
  auto box = SocketStream(box_fd);
  auto request = ReadRequest(
      *box, limits,
      [&](std::string_view bytes) { return ParseProxyRequest(bytes, limits.max_head_bytes); },
      &rest);
  if (!request.ok()) {
    int status = request.status().code() == StatusCode::kResourceExhausted ? 431 : 400;
    return Refuse(box_fd, record, status, request.status().message(), "request");
  }
  record.host = request->host;
  record.port = request->port;
  Decision name = policy.CheckName(request->host, request->port);
  if (!name.allowed) return Refuse(box_fd, record, 403, name.reason, "not_allowed");
  if (admit && !admit(request->host, request->port)) {
    return Refuse(box_fd, record, 403,
                  request->host + ":" + std::to_string(request->port) +
                      " is no longer allowed: the box's network was changed",
                  "not_allowed");
  }
  const bool secret_host = secrets->injector.IsSecretHost(request->host, request->port);
  if (request->tunnel && secret_host && !rest.empty()) {  // its TLS must start after the 200
    return Refuse(box_fd, record, 400, "bytes came after the CONNECT before the proxy answered",
                  "request");
  }
  if (!request->tunnel) {  // placeholders in a plain request: replaced, or the request refused
    auto head = secrets->injector.Rewrite(request->upstream_head, request->host, request->port,
                                          &record.secrets);
    if (!head.ok()) {
      return Refuse(box_fd, record, 403, head.status().message(), "secret_elsewhere");
    }
    request->upstream_head = std::move(*head);
  }
  // Where no secret may go, no placeholder goes either, in a body or a tunnel's bytes.
  PlaceholderScanner scanner;
  PlaceholderScanner* scan = secrets->injector.empty() || secret_host ? nullptr : &scanner;
  if (scan != nullptr && scan->Feed(rest)) {
    return Refuse(
        box_fd, record, 403,
        "the request to " + request->host + " carries a secret's placeholder; it was not sent",
        "secret_elsewhere");
  }

  // What the box sends upstream counts against the budget: a plain-HTTP request's head too
  // (its URL and headers carry data as a body does), and whatever came after the head.
  const uint64_t head_up = request->tunnel ? 0 : request->upstream_head.size();
  if (!budget.Take(head_up + rest.size())) {
    return Refuse(
        box_fd, record, 403,
        "the box's network budget (" + std::to_string(budget.max_bytes()) + " bytes) is used up",
        "budget");
  }
  const std::string host = *NormalizeHost(request->host);  // CheckName allowed it: it normalizes
  Refusal refusal;
  auto upstream = ConnectUpstream(host, request->port, policy, limits, resolve, record, &refusal);
  if (!upstream.ok()) return Refuse(box_fd, record, refusal.status, refusal.why, refusal.rule);
  record.allowed = true;
  const bool started =
      request->tunnel
          ? SendAll(box_fd, "HTTP/1.1 200 Connection established\r\n\r\n", milliseconds(5'000))
          : SendAll(upstream->get(), request->upstream_head, limits.connect_timeout);
  if (!started) {
    record.reason = request->tunnel ? "the box stopped reading" : "the upstream stopped reading";
    return record;
  }
  if (request->tunnel && secret_host && secrets->ca != nullptr) {
    record.reason = name.reason + "; " +
                    ServeIntercepted(box_fd, upstream->get(), host, request->port, *secrets, limits,
                                     budget, record);
    return record;
  }
  record.bytes_up = head_up;
  auto upstream_stream = SocketStream(upstream->get());
  Pipe up{box.get(), upstream_stream.get(), rest, &record.bytes_up, scan};
  Pipe down{upstream_stream.get(), box.get(), "", &record.bytes_down};
  record.reason =
      name.reason + "; " + Relay(std::move(up), std::move(down), limits, budget, &record.rule);
  return record;
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
  if (!d.allowed) {
    record.rule = "not_allowed";
    return record;
  }
  auto upstream = ConnectWithin(target, limits.connect_timeout);
  if (!upstream.ok()) {
    record.reason = upstream.status().message();
    record.rule = "connect";
    return record;
  }
  record.allowed = true;
  record.address = record.host;
  auto box = SocketStream(fd);
  auto upstream_stream = SocketStream(upstream->get());
  Pipe up{box.get(), upstream_stream.get(), "", &record.bytes_up};
  Pipe down{upstream_stream.get(), box.get(), "", &record.bytes_down};
  record.reason =
      d.reason + "; " + Relay(std::move(up), std::move(down), limits, budget, &record.rule);
  return record;
}

}  // namespace codebox::net
