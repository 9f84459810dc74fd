#include "net/confined_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::net {
namespace {

std::string Text(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
    return std::string(text) + ":" + std::to_string(port);
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
  inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
  port = ntohs(v6.sin6_port);
  return "[" + std::string(text) + "]:" + std::to_string(port);
}

socklen_t LengthOf(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

Status BringUpLoopback() {
  base::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return base::ErrnoStatus("loopback socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) return base::ErrnoStatus("SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) return base::ErrnoStatus("SIOCSIFFLAGS lo");
  return Status::Ok();
}

StatusOr<base::UniqueFd> Listen(const sockaddr_storage& address) {
  base::UniqueFd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return base::ErrnoStatus("socket for " + Text(address));
  if (address.ss_family == AF_INET6) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), LengthOf(address)) != 0) {
    return base::ErrnoStatus("bind " + Text(address));
  }
  if (::listen(fd.get(), 64) != 0) return base::ErrnoStatus("listen on " + Text(address));
  return fd;
}

struct Listener {
  base::UniqueFd fd;
  bool proxy = false;
  sockaddr_storage target{};  // a forward's
};

}  // namespace

struct ConfinedNetwork::State : std::enable_shared_from_this<State> {
  explicit State(ConfinedNetworkOptions o)
      : options(std::move(o)),
        budget(options.max_bytes),
        resolve(SystemResolver(options.limits.resolve_timeout)) {}

  void AcceptLoop();
  void Serve(base::UniqueFd fd, bool proxy, const sockaddr_storage& target);

  const ConfinedNetworkOptions options;
  EgressBudget budget;
  const Resolver resolve;
  base::UniqueFd ns;
  base::UniqueFd wake;  // eventfd: Stop() wakes the accept loop
  std::vector<Listener> listeners;
  uint16_t proxy_port = 0;
  std::thread acceptor;

  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  std::set<int> live;  // connections being served
  uint32_t active = 0;
  std::vector<EgressRecord> records;
};

void ConfinedNetwork::State::AcceptLoop() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake.get(), POLLIN, 0});
    for (const Listener& l : listeners) fds.push_back({l.fd.get(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || fds[0].revents != 0) return;
    for (size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      const Listener& from = listeners[i - 1];
      base::UniqueFd conn(::accept4(from.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) continue;
      std::unique_lock<std::mutex> lock(mu);
      if (stopped || active >= options.max_connections) continue;  // closed as it goes
      ++active;
      live.insert(conn.get());
      lock.unlock();
      // Detached: Stop() waits for `active` to reach 0; the thread holds the state.
      std::thread([self = shared_from_this(), fd = std::move(conn), proxy = from.proxy,
                   target = from.target]() mutable {
        self->Serve(std::move(fd), proxy, target);
      }).detach();
    }
  }
}

void ConfinedNetwork::State::Serve(base::UniqueFd fd, bool proxy, const sockaddr_storage& target) {
  EgressRecord record =
      proxy ? ServeEgressConnection(fd.get(), options.policy, options.limits, budget, resolve)
            : ServeDirectConnection(fd.get(), target, options.policy, options.limits, budget);
  std::lock_guard<std::mutex> lock(mu);
  live.erase(fd.get());
  fd.reset();
  records.push_back(std::move(record));
  --active;
  cv.notify_all();
}

StatusOr<std::unique_ptr<ConfinedNetwork>> ConfinedNetwork::Start(ConfinedNetworkOptions options) {
  auto state = std::make_shared<State>(std::move(options));
  state->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!state->wake.valid()) return base::ErrnoStatus("eventfd");
  // The namespace is made by a thread of its own, which ends afterwards: the sockets made in
  // it (and the namespace's fd) keep the namespace, and no thread of this process stays in it.
  Status made = Status::Ok();
  std::thread([&] {
    made = [&]() -> Status {
      if (::unshare(CLONE_NEWNET) != 0) {
        return base::ErrnoStatus("a network namespace of its own (unshare CLONE_NEWNET)");
      }
      state->ns.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
      if (!state->ns.valid()) return base::ErrnoStatus("open /proc/thread-self/ns/net");
      RETURN_IF_ERROR(BringUpLoopback());
      // The forwards first: the proxy's port, chosen by the kernel, is then not one of theirs.
      for (const sockaddr_storage& target : state->options.forwards) {
        auto fd = Listen(target);
        if (!fd.ok()) {
          // A host without IPv6 has no ::1 to listen on (nor to connect to).
          if (target.ss_family == AF_INET6) continue;
          return fd.status();
        }
        state->listeners.push_back({std::move(*fd), false, target});
      }
      sockaddr_storage proxy{};
      auto& v4 = reinterpret_cast<sockaddr_in&>(proxy);
      v4.sin_family = AF_INET;
      v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSIGN_OR_RETURN(base::UniqueFd fd, Listen(proxy));
      socklen_t len = sizeof v4;
      if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&v4), &len) != 0) {
        return base::ErrnoStatus("getsockname of the proxy");
      }
      state->proxy_port = ntohs(v4.sin_port);
      state->listeners.push_back({std::move(fd), true, {}});
      return Status::Ok();
    }();
  }).join();
  if (!made.ok()) return made.WithContext("confined network");
  state->acceptor = std::thread([s = state.get()] { s->AcceptLoop(); });
  return std::unique_ptr<ConfinedNetwork>(new ConfinedNetwork(std::move(state)));
}

ConfinedNetwork::~ConfinedNetwork() { (void)Stop(); }

int ConfinedNetwork::namespace_fd() const { return state_->ns.get(); }

std::string ConfinedNetwork::proxy_url() const {
  return "http://127.0.0.1:" + std::to_string(state_->proxy_port);
}

std::vector<std::string> ConfinedNetwork::ProxyEnvironment() const {
  const std::string url = proxy_url();
  return {"HTTPS_PROXY=" + url, "https_proxy=" + url, "HTTP_PROXY=" + url,
          "http_proxy=" + url,  "NO_PROXY=",          "no_proxy="};
}

std::vector<EgressRecord> ConfinedNetwork::Stop() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stopped) return s.records;
    s.stopped = true;
  }
  uint64_t one = 1;
  (void)::write(s.wake.get(), &one, sizeof one);
  if (s.acceptor.joinable()) s.acceptor.join();
  s.listeners.clear();  // nothing connects any more
  std::unique_lock<std::mutex> lock(s.mu);
  // Both ways shut: each relay sees its program's end go and finishes.
  for (int fd : s.live) ::shutdown(fd, SHUT_RDWR);
  s.cv.wait(lock, [&] { return s.active == 0; });
  return s.records;
}

}  // namespace codebox::net
