#include "http/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstring>
#include <future>
#include <optional>

#include "base/fs.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "http/exchange.h"
#include "http/server_state.h"

namespace codebox::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using error_code = boost::system::error_code;
using tcp = net::ip::tcp;
using unix_socket = net::local::stream_protocol;

namespace {

using Entry = ServerState::Entry;
using IdleIndex = ServerState::IdleIndex;

// Takes `e` out of the idle indexes (s.mu held).
void LeaveIdle(ServerState& s, Entry& e) {
  if (e.idle_seq == 0) return;
  s.budget_idle[e.budget].erase(e.idle_seq);
  if (e.budget == ServerState::kTcp) {
    auto it = s.addresses.find(e.address);
    if (it != s.addresses.end()) it->second.idle.erase(e.idle_seq);
  }
  e.idle_seq = 0;
}

// Takes `e` out of its budgets (s.mu held).
void LeaveBudgets(ServerState& s, Entry& e) {
  LeaveIdle(s, e);
  s.budget_open[e.budget]--;
  s.connections_open--;
  if (e.budget == ServerState::kTcp) {
    auto it = s.addresses.find(e.address);
    if (it != s.addresses.end() && --it->second.open == 0) s.addresses.erase(it);
  }
}

// Evicts the oldest connection in `idle` (s.mu held): out of its budgets at once, its close for
// the caller to post once s.mu is released. False when none is idle.
bool EvictOldest(ServerState& s, const IdleIndex& idle,
                 std::vector<std::weak_ptr<Connection>>* evicted) {
  if (idle.empty()) return false;
  uint64_t id = idle.begin()->second;  // before LeaveBudgets, which may free `idle`
  Entry& e = s.connections.at(id);
  LeaveBudgets(s, e);
  e.evicted = true;
  evicted->push_back(e.connection);
  return true;
}

}  // namespace

bool ServerState::AdmitConnection(uint64_t id, std::weak_ptr<Connection> connection, Budget budget,
                                  const std::string& address) {
  std::vector<std::weak_ptr<Connection>> evicted;
  bool admitted = false;
  {
    std::lock_guard lock(mu);
    if (!stopping) {
      admitted = true;
      if (budget == kTcp) {
        auto it = addresses.find(address);
        if (it != addresses.end() && it->second.open >= options.max_connections_per_address) {
          admitted = EvictOldest(*this, it->second.idle, &evicted);
        }
      }
      uint64_t limit = budget == kUnix ? options.unix_max_connections : options.max_connections;
      if (admitted && budget_open[budget] >= limit) {
        admitted = EvictOldest(*this, budget_idle[budget], &evicted);
      }
    }
    if (admitted) {
      Entry e;
      e.connection = std::move(connection);
      e.budget = budget;
      e.address = budget == kTcp ? address : "";
      budget_open[budget]++;
      connections_open++;
      // Idle from the start: a connection that sends nothing is the first one to go.
      e.idle_seq = ++next_idle_seq;
      budget_idle[budget].emplace(e.idle_seq, id);
      if (budget == kTcp) {
        AddressShare& share = addresses[e.address];
        share.open++;
        share.idle.emplace(e.idle_seq, id);
      }
      connections.emplace(id, std::move(e));
    }
  }
  evicted_connections += evicted.size();
  if (!admitted) rejected_connections++;
  for (auto& weak : evicted) {
    if (auto c = weak.lock()) c->PostClose();
  }
  return admitted;
}

void ServerState::ConnectionClosed(uint64_t id) {
  std::lock_guard lock(mu);
  auto it = connections.find(id);
  if (it == connections.end()) return;
  if (!it->second.evicted) LeaveBudgets(*this, it->second);
  connections.erase(it);
  cv.notify_all();
}

bool ServerState::MarkIdle(uint64_t id) {
  std::lock_guard lock(mu);
  auto it = connections.find(id);
  if (it == connections.end() || it->second.evicted) return false;
  Entry& e = it->second;
  if (e.idle_seq != 0) return true;
  e.idle_seq = ++next_idle_seq;
  budget_idle[e.budget].emplace(e.idle_seq, id);
  if (e.budget == kTcp) addresses[e.address].idle.emplace(e.idle_seq, id);
  return true;
}

bool ServerState::MarkBusy(uint64_t id) {
  std::lock_guard lock(mu);
  auto it = connections.find(id);
  if (it == connections.end() || it->second.evicted) return false;
  LeaveIdle(*this, it->second);
  return true;
}

bool ServerState::SpawnHandler(std::function<void()> body) {
  std::lock_guard lock(mu);
  for (uint64_t id : finished_threads) {
    auto it = handler_threads.find(id);
    if (it == handler_threads.end()) continue;
    it->second.join();
    handler_threads.erase(it);
  }
  finished_threads.clear();
  if (stopping) {
    in_flight--;
    return false;
  }
  uint64_t id = ++next_id;
  handler_threads.emplace(id, std::thread([this, id, body = std::move(body)]() mutable {
                            body();
                            body = nullptr;  // drops the connection before the server may go
                            std::lock_guard lock(mu);
                            finished_threads.push_back(id);
                            in_flight--;
                            cv.notify_all();
                          }));
  return true;
}

std::shared_ptr<HttpResponse> MakeResponse(Response r, const std::string& request_id,
                                           bool keep_alive) {
  auto msg = std::make_shared<HttpResponse>(static_cast<bhttp::status>(r.status), 11);
  if (r.status != 204 && r.status != 304) {
    msg->set(bhttp::field::content_type, r.content_type);
  }
  msg->set("X-Request-Id", request_id);
  for (auto& [name, value] : r.headers) msg->set(name, value);
  msg->body() = std::move(r.body);
  msg->keep_alive(keep_alive);
  msg->prepare_payload();
  return msg;
}

std::string FormatEvent(std::string_view event, std::string_view data) {
  std::string out = "event: ";
  for (char c : event) out += (c == '\n' || c == '\r') ? ' ' : c;
  out += '\n';
  size_t start = 0;
  while (true) {
    size_t nl = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

Status Exchange::BeginEvents(int status, const Headers& headers) {
  Headers all = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  all.insert(all.end(), headers.begin(), headers.end());
  return BeginStream(status, "text/event-stream", all);
}

Status Exchange::SendEvent(std::string_view event, std::string_view data) {
  return SendChunk(FormatEvent(event, data));
}

class Server::Impl {
 public:
  Impl(ServerOptions options, Handler* handler)
      : state(std::make_unique<ServerState>(std::move(options), handler)) {}

  std::unique_ptr<ServerState> state;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  std::vector<std::shared_ptr<tcp::acceptor>> tcp_acceptors;
  std::vector<std::shared_ptr<unix_socket::acceptor>> unix_acceptors;
  struct UnixPath {
    std::string path;
    ino_t ino;
  };
  std::vector<UnixPath> unix_paths;
  std::vector<Address> bound;
  std::mutex mu;  // started/stopped, Stop callers
  bool started = false;
  bool stopped = false;

  Status Listen(const Address& address);
  Status ListenUnix(const Address& address);
  Status ListenTcp(const Address& address);
  // `running`: the I/O threads run (closes go through the acceptors' strands).
  void CloseAcceptors(bool running);
};

namespace {

// Accepts until the acceptor closes; ServeConnection admits each one into its budgets or closes
// it at once.
template <class Acceptor>
void Accept(ServerState& s, std::shared_ptr<Acceptor> acceptor) {
  acceptor->async_accept(net::make_strand(s.ioc), [&s, acceptor](error_code ec, auto socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // EMFILE and the like: wait a little instead of spinning on the error.
      CODEBOX_LOG(kWarn, "http: accept: " << ec.message());
      auto timer = std::make_shared<net::steady_timer>(acceptor->get_executor(),
                                                       std::chrono::milliseconds(100));
      timer->async_wait([&s, acceptor, timer](error_code) { Accept(s, acceptor); });
      return;
    }
    ServeConnection(s, std::move(socket));
    Accept(s, acceptor);
  });
}

// Whether something accepts connections on the unix socket `path`.
bool UnixSocketAnswers(const std::string& path) {
  base::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

}  // namespace

Status Server::Impl::Listen(const Address& address) {
  if (address.kind == Address::Kind::kUnix) return ListenUnix(address);
  return ListenTcp(address);
}

Status Server::Impl::ListenUnix(const Address& address) {
  const std::string& path = address.path;
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && !base::PathExists(dir)) {
    RETURN_IF_ERROR(base::MakeDirs(dir, 0755).WithContext("listen on " + address.ToString()));
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return InvalidArgument("listen on " + address.ToString() + ": " + path +
                             " exists and is not a socket; remove it or choose another path");
    }
    if (UnixSocketAnswers(path)) {
      return Unavailable("listen on " + address.ToString() +
                         ": another server is listening there; stop it or choose another path");
    }
    unlink(path.c_str());  // stale, from a server that died
  }
  error_code ec;
  auto acceptor = std::make_shared<unix_socket::acceptor>(net::make_strand(state->ioc));
  acceptor->open(unix_socket(), ec);
  if (!ec) acceptor->bind(unix_socket::endpoint(path), ec);
  if (!ec && chmod(path.c_str(), state->options.unix_socket_mode) != 0) {
    ec = error_code(errno, boost::system::system_category());
  }
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("listen on " + address.ToString() + ": " + ec.message());
  }
  if (lstat(path.c_str(), &st) == 0) unix_paths.push_back({path, st.st_ino});
  unix_acceptors.push_back(acceptor);
  bound.push_back(address);
  return Status::Ok();
}

Status Server::Impl::ListenTcp(const Address& address) {
  if (!address.IsLoopback() && state->options.tokens.empty()) {
    return InvalidArgument("refusing to listen on " + address.ToString() +
                           " without a token: anyone who reaches it could run code; pass "
                           "--token-file FILE, or listen on a loopback address or a unix socket");
  }
  error_code ec;
  tcp::resolver resolver(state->ioc);
  auto results =
      resolver.resolve(address.host, std::to_string(address.port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return InvalidArgument("listen on " + address.ToString() + ": cannot resolve '" + address.host +
                           "': " + ec.message());
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  auto acceptor = std::make_shared<tcp::acceptor>(net::make_strand(state->ioc));
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec && endpoint.protocol() == tcp::v6()) acceptor->set_option(net::ip::v6_only(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return IoError("listen on " + address.ToString() + ": " + ec.message());
  Address resolved = address;
  resolved.port = acceptor->local_endpoint(ec).port();
  tcp_acceptors.push_back(acceptor);
  bound.push_back(resolved);
  return Status::Ok();
}

void Server::Impl::CloseAcceptors(bool running) {
  std::vector<std::future<void>> done;
  auto close = [&done, running](auto acceptor) {
    if (!running) {
      error_code ignored;
      acceptor->close(ignored);
      return;
    }
    auto p = std::make_shared<std::promise<void>>();
    done.push_back(p->get_future());
    net::post(acceptor->get_executor(), [acceptor, p] {
      error_code ignored;
      acceptor->close(ignored);
      p->set_value();
    });
  };
  for (auto& a : tcp_acceptors) close(a);
  for (auto& a : unix_acceptors) close(a);
  for (auto& f : done) f.wait();
  for (const UnixPath& u : unix_paths) {
    struct stat st {};
    // Only our own socket file: a later server may have replaced it.
    if (lstat(u.path.c_str(), &st) == 0 && st.st_ino == u.ino) unlink(u.path.c_str());
  }
  unix_paths.clear();
}

Server::Server(ServerOptions options, Handler* handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler)) {}

Server::~Server() { Stop(std::chrono::milliseconds(0)); }

Status Server::Start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->started) return FailedPrecondition("the server was already started");
  const ServerOptions& o = impl_->state->options;
  if (o.listen.empty()) return InvalidArgument("the server has no address to listen on");
  if (o.io_threads < 1) return InvalidArgument("io_threads must be at least 1");
  for (const Address& address : o.listen) {
    Status st = impl_->Listen(address);
    if (!st.ok()) {
      impl_->CloseAcceptors(false);
      impl_->tcp_acceptors.clear();
      impl_->unix_acceptors.clear();
      impl_->bound.clear();
      return st;
    }
  }
  impl_->started = true;
  ServerState& s = *impl_->state;
  for (auto& a : impl_->tcp_acceptors) Accept(s, a);
  for (auto& a : impl_->unix_acceptors) Accept(s, a);
  impl_->work.emplace(s.ioc.get_executor());
  for (int i = 0; i < o.io_threads; ++i) {
    impl_->io_threads.emplace_back([&s] { s.ioc.run(); });
  }
  return Status::Ok();
}

std::vector<Address> Server::bound() const {
  std::lock_guard lock(impl_->mu);
  return impl_->bound;
}

void Server::Stop(std::chrono::milliseconds drain) {
  std::lock_guard stop_lock(impl_->mu);
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  ServerState& s = *impl_->state;
  impl_->CloseAcceptors(true);
  std::vector<std::shared_ptr<Connection>> open;
  std::map<uint64_t, std::thread> threads;
  {
    std::unique_lock lock(s.mu);
    s.stopping = true;
    s.cv.wait_for(lock, drain, [&s] { return s.in_flight == 0; });
    for (auto& [id, entry] : s.connections) {
      if (auto c = entry.connection.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) c->PostClose();
  open.clear();
  {
    // No thread is added once stopping; handlers still running see their writes fail.
    std::lock_guard lock(s.mu);
    threads.swap(s.handler_threads);
    s.finished_threads.clear();
  }
  for (auto& [id, t] : threads) t.join();
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, std::chrono::seconds(2), [&s] { return s.connections.empty(); });
  }
  impl_->work.reset();
  s.ioc.stop();
  for (auto& t : impl_->io_threads) t.join();
  impl_->io_threads.clear();
}

Server::Stats Server::stats() const {
  ServerState& s = *impl_->state;
  Stats st;
  st.connections_open = s.connections_open.load();
  {
    std::lock_guard lock(s.mu);
    st.connections_idle = s.budget_idle[0].size() + s.budget_idle[1].size();
  }
  st.requests_in_flight = s.in_flight.load();
  st.rejected_connections = s.rejected_connections.load();
  st.evicted_connections = s.evicted_connections.load();
  st.rejected_requests = s.rejected_requests.load();
  return st;
}

}  // namespace codebox::http
