#include "box/egress.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/io.h"
#include "base/log.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace codebox::box {

namespace {

using protocol::EgressStream;
using Clock = std::chrono::steady_clock;

// After the relay ended, how long the box may go without taking any of what is left for it
// (or, once it has it all, without closing its end) before the stream is cancelled: a program
// that keeps a dead connection open must not hold one of the box's kMaxConnections for ever.
constexpr std::chrono::seconds kLinger{30};
// Acks are batched: one per this many bytes passed on, or when the buffer drains.
constexpr uint64_t kAckBatch = 64u << 10;

base::UniqueFd MakeEventFd() { return base::UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

void Signal(int fd) {
  uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void Drain(int fd) {
  uint64_t count;
  (void)!::read(fd, &count, sizeof count);
}

// The base policy plus the patterns of the Allowances alive now. Shared with the Allowances,
// which may outlive the service.
class PolicyState {
 public:
  explicit PolicyState(net::EgressPolicy base)
      : base_(std::move(base)), current_(std::make_shared<net::EgressPolicy>(base_)) {}

  std::shared_ptr<const net::EgressPolicy> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }

  // The box's own policy from now on (SetPolicy); the allowances alive stay.
  void Replace(net::EgressPolicy base) {
    std::lock_guard<std::mutex> lock(mu_);
    base_ = std::move(base);
    ++generation_;
    Rebuild();
  }

  // How many times the base was replaced: a connection judged by an older policy is judged
  // again.
  uint64_t generation() const {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }

  uint64_t Add(std::vector<net::HostPattern> patterns) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t id = next_id_++;
    extra_[id] = std::move(patterns);
    Rebuild();
    return id;
  }

  void Remove(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    extra_.erase(id);
    Rebuild();
  }

 private:
  // An open policy already allows every public name; the allowlist only widens an allow
  // policy (an install's index may be an internal address named as a literal).
  void Rebuild() {
    if (base_.mode() != net::NetworkMode::kAllow || extra_.empty()) {
      current_ = std::make_shared<net::EgressPolicy>(base_);
      return;
    }
    std::vector<std::string> entries;
    for (const net::HostPattern& p : base_.patterns()) entries.push_back(p.ToString());
    for (const auto& [id, patterns] : extra_) {
      for (const net::HostPattern& p : patterns) entries.push_back(p.ToString());
    }
    auto policy = net::EgressPolicy::Allow(entries);
    if (!policy.ok()) {  // each entry came from a parsed pattern: not expected
      CODEBOX_LOG(kError,
                  "egress: cannot widen the box's allowlist: " << policy.status().message());
      current_ = std::make_shared<net::EgressPolicy>(base_);
      return;
    }
    current_ = std::make_shared<net::EgressPolicy>(std::move(*policy));
  }

  mutable std::mutex mu_;
  net::EgressPolicy base_;
  uint64_t generation_ = 0;
  std::map<uint64_t, std::vector<net::HostPattern>> extra_;
  uint64_t next_id_ = 0;
  std::shared_ptr<const net::EgressPolicy> current_;
};

class ScopedAllowance final : public EgressService::Allowance {
 public:
  ScopedAllowance(std::shared_ptr<PolicyState> state, uint64_t id)
      : state_(std::move(state)), id_(id) {}
  ~ScopedAllowance() override { state_->Remove(id_); }

 private:
  std::shared_ptr<PolicyState> state_;
  uint64_t id_;
};

// One connection a program in the box made: its stream, the socketpair between the bridge
// and the relay, and the two threads.
struct Connection {
  std::unique_ptr<EgressStream> stream;
  base::UniqueFd bridge_end;
  base::UniqueFd relay_end;
  base::UniqueFd relay_done;  // eventfd: the relay returned (it shut relay_end down first)
  std::thread bridge;
  std::thread relay;
  // Set by the relay before it shuts relay_end down: it had connected upstream.
  std::atomic<bool> relay_allowed{false};
  std::atomic<int> running{2};
  std::atomic<bool> finished{false};
  // Set when the box's network changed and no longer allows where this connection goes.
  std::atomic<bool> cut_by_policy{false};
  // Guarded by the service's log_mu_: the box ended its side (so its program may have exited
  // and be reading the log), and the relay's record is in the log.
  bool box_closed = false;
  bool recorded = false;
};

class EgressServiceImpl final : public EgressService {
 public:
  EgressServiceImpl(protocol::AgentClient& agent, net::EgressPolicy policy,
                    net::EgressLimits limits, uint64_t max_total_bytes, net::Resolver resolve,
                    std::shared_ptr<const net::SecretEgress> secrets)
      : agent_(agent),
        policy_(std::make_shared<PolicyState>(std::move(policy))),
        limits_(limits),
        budget_(max_total_bytes),
        resolve_(std::move(resolve)),
        secrets_(std::move(secrets)) {}

  std::string CaCertificatePem() const override {
    return secrets_ != nullptr && secrets_->ca != nullptr ? secrets_->ca->CertificatePem() : "";
  }

  ~EgressServiceImpl() override {
    if (stop_.valid()) Signal(stop_.get());  // never drained: every poll on it sees it
    if (acceptor_.joinable()) acceptor_.join();
    for (auto& c : connections_) {
      if (c->bridge.joinable()) c->bridge.join();
      // The bridge has cancelled its stream and shut its end down; the relay sees that.
      if (c->relay_end.valid()) ::shutdown(c->relay_end.get(), SHUT_RDWR);
      if (c->relay.joinable()) c->relay.join();
    }
    connections_.clear();
    waiting_.clear();  // each cancels its egress_accept stream
  }

  Status Start() {
    stop_ = MakeEventFd();
    reap_ = MakeEventFd();
    if (!stop_.valid() || !reap_.valid()) return base::ErrnoStatus("egress: eventfd");
    for (int i = 0; i < kMaxConnections; ++i) {
      auto stream = agent_.AcceptEgress();
      if (!stream.ok()) return stream.status().WithContext("start the box's egress proxy");
      waiting_.push_back(std::move(*stream));
    }
    try {
      acceptor_ = std::thread([this] { Accept(); });
    } catch (const std::system_error& e) {
      return ResourceExhausted(std::string("start the box's egress proxy: no thread: ") + e.what());
    }
    return Status::Ok();
  }

  // A connection the box closed is recorded by its relay a moment later: the log waits for
  // those records (at most kCloseRecordWait), so that an exec's connections are in the log
  // read right after it.
  std::vector<EgressRecord> Log() const override {
    std::unique_lock<std::mutex> lock(log_mu_);
    log_cv_.wait_for(lock, kCloseRecordWait, [this] { return closing_ == 0; });
    return {log_.begin(), log_.end()};
  }

  uint64_t Recorded() const override {
    std::lock_guard<std::mutex> lock(log_mu_);
    return recorded_;
  }

  std::vector<EgressRecord> LogSince(uint64_t mark) const override {
    std::unique_lock<std::mutex> lock(log_mu_);
    log_cv_.wait_for(lock, kCloseRecordWait, [this] { return closing_ == 0; });
    const uint64_t first = recorded_ - log_.size();  // the index of log_.front()
    const uint64_t from = std::max(mark, first);
    if (from >= recorded_) return {};
    return {log_.begin() + static_cast<ptrdiff_t>(from - first), log_.end()};
  }

  std::unique_ptr<Allowance> AllowForAWhile(std::vector<net::HostPattern> patterns) override {
    uint64_t id = policy_->Add(std::move(patterns));
    return std::make_unique<ScopedAllowance>(policy_, id);
  }

 private:
  // Waits for connections on the accept streams, starts each one's threads, and replaces a
  // stream whose connection ended, so that kMaxConnections stay open (waiting or connected).
  void Accept() {
    for (;;) {
      std::vector<pollfd> fds = {{stop_.get(), POLLIN, 0}, {reap_.get(), POLLIN, 0}};
      for (auto& s : waiting_) fds.push_back({s->wake_fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        CODEBOX_LOG(kError, "egress: poll: " << strerror(errno) << "; the box's proxy stops");
        return;
      }
      if (fds[0].revents != 0) return;
      // The streams polled; Reap and Connect may add new ones after them.
      const size_t polled = fds.size() - 2;
      if (fds[1].revents != 0) Reap();
      // Backwards, so that erasing keeps the indexes of the rest.
      for (size_t i = polled; i-- > 0;) {
        if (fds[i + 2].revents == 0) continue;
        EgressStream::State state = waiting_[i]->Take();
        if (state.connected) {  // also when it ended at once: its threads see that
          std::unique_ptr<EgressStream> stream = std::move(waiting_[i]);
          waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(i));
          Connect(std::move(stream), std::move(state));
        } else if (state.ended) {
          // Not replaced: an agent that fails its accept streams must not make a loop. When
          // the box is going (its connection closed) every stream ends so: nothing to say.
          if (agent_.connection_status().ok()) {
            CODEBOX_LOG(kWarn, "egress: an accept stream ended before a connection: "
                                   << base::TerminalSafe(state.status.ToString()));
          }
          waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(i));
        }
      }
    }
  }

  void Connect(std::unique_ptr<EgressStream> stream, EgressStream::State first) {
    auto c = std::make_unique<Connection>();
    c->stream = std::move(stream);
    auto pair = base::SocketPair();
    c->relay_done = MakeEventFd();
    if (!pair.ok() || !c->relay_done.valid()) {
      CODEBOX_LOG(kError, "egress: cannot serve a connection: "
                              << (pair.ok() ? "eventfd failed" : pair.status().ToString()));
      c->stream->Close();
      Replace();
      return;
    }
    c->bridge_end = std::move(pair->first);
    c->relay_end = std::move(pair->second);
    (void)base::SetNonBlocking(c->bridge_end.get(), true);
    Connection* raw = c.get();
    // The policy as it is now: an allowance that ends later does not cut this connection.
    std::shared_ptr<const net::EgressPolicy> policy = policy_->Current();
    const uint64_t generation = policy_->generation();
    // A host out of threads cuts this connection (the program sees a reset), not the service.
    try {
      raw->relay = std::thread([this, raw, policy, generation] {
        EgressRecord record = net::ServeEgressConnection(
            raw->relay_end.get(), *policy, limits_, budget_, resolve_, secrets_.get(),
            [this, raw, generation](const std::string& host, uint16_t port) {
              return Admit(raw, generation, host, port);
            });
        {
          std::lock_guard<std::mutex> lock(targets_mu_);
          targets_.erase(raw);
        }
        if (raw->cut_by_policy) {
          record.rule = "not_allowed";
          record.reason += "; cut: the box's network was changed and no longer allows it";
        }
        raw->relay_allowed = record.allowed;
        ::shutdown(raw->relay_end.get(), SHUT_RDWR);
        Signal(raw->relay_done.get());
        Record(std::move(record), raw);
        Finish(*raw);
      });
    } catch (const std::system_error& e) {
      CODEBOX_LOG(kError, "egress: cannot serve a connection: no thread: " << e.what());
      c->stream->Close();
      Replace();
      return;
    }
    try {
      raw->bridge = std::thread([this, raw, first = std::move(first)]() mutable {
        Bridge(*raw, std::move(first));
        Finish(*raw);
      });
    } catch (const std::system_error& e) {
      CODEBOX_LOG(kError, "egress: cannot serve a connection: no thread: " << e.what());
      raw->stream->Close();
      ::shutdown(raw->bridge_end.get(), SHUT_RDWR);  // the relay ends; Reap joins it
      Finish(*raw);
    }
    connections_.push_back(std::move(c));
  }

  // A connection the policy allowed, about to connect: registered so that SetPolicy can end
  // it; judged again when the policy changed since it was taken.
  bool Admit(Connection* c, uint64_t generation, const std::string& host, uint16_t port) {
    std::lock_guard<std::mutex> lock(targets_mu_);
    if (policy_->generation() != generation && !policy_->Current()->CheckName(host, port).allowed) {
      return false;
    }
    targets_[c] = {host, port};
    return true;
  }

  void SetPolicy(net::EgressPolicy policy) override {
    policy_->Replace(std::move(policy));
    std::shared_ptr<const net::EgressPolicy> now = policy_->Current();
    std::lock_guard<std::mutex> lock(targets_mu_);
    for (const auto& [c, target] : targets_) {
      if (now->CheckName(target.first, target.second).allowed) continue;
      // The relay sees its box end shut and ends; its thread unregisters it under this lock,
      // so `c` is alive here.
      c->cut_by_policy = true;
      ::shutdown(c->relay_end.get(), SHUT_RDWR);
    }
  }

  void Finish(Connection& c) {
    if (c.running.fetch_sub(1) == 1) {
      c.finished = true;
      Signal(reap_.get());
    }
  }

  // Joins the threads of ended connections and opens a new accept stream for each.
  void Reap() {
    Drain(reap_.get());
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!(*it)->finished) {
        ++it;
        continue;
      }
      if ((*it)->bridge.joinable()) (*it)->bridge.join();
      (*it)->relay.join();
      it = connections_.erase(it);
      Replace();
    }
  }

  void Replace() {
    if (!agent_.connection_status().ok()) return;
    auto stream = agent_.AcceptEgress();
    if (!stream.ok()) {
      CODEBOX_LOG(kWarn, "egress: cannot open an accept stream: " << stream.status().ToString());
      return;
    }
    waiting_.push_back(std::move(*stream));
  }

  // The box ended its side of `c` (idempotent).
  void BoxClosed(Connection& c) {
    std::lock_guard<std::mutex> lock(log_mu_);
    if (c.box_closed || c.recorded) return;
    c.box_closed = true;
    ++closing_;
  }

  void Record(EgressRecord record, Connection* c) {
    CODEBOX_LOG(kInfo, "egress " << (record.allowed ? "allowed" : "refused") << " "
                                 << base::TerminalSafe(record.host, 300) << ":" << record.port
                                 << (record.address.empty() ? "" : " (" + record.address + ")")
                                 << " up " << record.bytes_up << " down " << record.bytes_down
                                 << ": " << base::TerminalSafe(record.reason, 1000));
    std::lock_guard<std::mutex> lock(log_mu_);
    log_.push_back(std::move(record));
    ++recorded_;
    while (log_.size() > kMaxLogRecords) log_.pop_front();
    c->recorded = true;
    if (c->box_closed && --closing_ == 0) log_cv_.notify_all();
  }

  void Bridge(Connection& c, EgressStream::State first);

  protocol::AgentClient& agent_;
  std::shared_ptr<PolicyState> policy_;
  const net::EgressLimits limits_;
  net::EgressBudget budget_;
  const net::Resolver resolve_;
  const std::shared_ptr<const net::SecretEgress> secrets_;
  base::UniqueFd stop_;  // readable once the service ends
  base::UniqueFd reap_;  // a connection's threads both returned
  // The acceptor thread's own; the destructor touches them only after joining it.
  std::vector<std::unique_ptr<EgressStream>> waiting_;
  std::list<std::unique_ptr<Connection>> connections_;
  // Where each relaying connection goes (host, port), for SetPolicy to end those it refuses.
  std::mutex targets_mu_;
  std::map<Connection*, std::pair<std::string, uint16_t>> targets_;
  std::thread acceptor_;
  mutable std::mutex log_mu_;
  mutable std::condition_variable log_cv_;  // closing_ went to 0
  std::deque<EgressRecord> log_;
  uint64_t recorded_ = 0;  // every record ever, the dropped ones too
  int closing_ = 0;        // connections the box closed whose record is not in the log yet
};

// Moves bytes between the box's stream and the relay's socket, keeping the stream's flow
// control: the box's data is acknowledged once written to the relay (so the box never has more
// than the window in flight here), and the relay's data is read only as far as the credit goes.
void EgressServiceImpl::Bridge(Connection& c, EgressStream::State first) {
  EgressStream& stream = *c.stream;
  const int sock = c.bridge_end.get();
  std::string to_relay = std::move(first.data);  // the box's bytes not yet written
  bool box_eof = first.box_eof;                  // the box ended its sending
  bool box_eof_passed = false;                   // ... and the relay was told (SHUT_WR)
  uint64_t credit = first.send_credit;           // what Send may send now
  bool ended = first.ended;                      // the stream is over (see end_ok)
  bool end_ok = first.status.ok();               // ... with `done`: what the box sent counts
  bool relay_eof = false;   // the relay ended its sending, and the box was told
  bool relay_done = false;  // the relay returned: nothing reads what the box sends
  uint64_t unacked = 0;
  std::optional<Clock::time_point> linger_until;
  std::string buffer(protocol::kDataChunk, '\0');
  Status failure;

  while (failure.ok()) {
    if (!to_relay.empty() && !relay_done) {
      ssize_t n = ::send(sock, to_relay.data(), to_relay.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        to_relay.erase(0, static_cast<size_t>(n));
        unacked += static_cast<uint64_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        relay_done = true;  // the relay is gone (EPIPE): what the box sends goes nowhere
      }
    }
    if (relay_done && !to_relay.empty()) {  // acknowledged anyway, so the box is not stuck
      unacked += to_relay.size();
      to_relay.clear();
    }
    if (!ended && (unacked >= kAckBatch || (unacked > 0 && to_relay.empty()))) {
      while (unacked > 0 && failure.ok()) {
        uint64_t n = std::min<uint64_t>(unacked, protocol::msg::kEgressWindow);
        failure = stream.Ack(n);
        unacked -= n;
      }
      if (!failure.ok()) break;
    }
    if (box_eof && to_relay.empty() && !box_eof_passed) {
      ::shutdown(sock, SHUT_WR);
      box_eof_passed = true;
      BoxClosed(c);
    }
    // A stream that ended with `done` may still have brought bytes for the relay: they are
    // written first (the relay's own deadlines bound that).
    if (ended && (!end_ok || to_relay.empty() || relay_done)) break;
    // The relay returned before the box ended its sending: an allowed connection was cut (the
    // budget, the idle time, an upstream error). The program sees a reset, so that a cut
    // download never looks complete; a refusal's answer ends cleanly instead.
    if (relay_done && relay_eof && !box_eof_passed && c.relay_allowed) break;
    if (relay_done && !linger_until) linger_until = Clock::now() + kLinger;

    // An ended stream has nothing more to say (a negative fd is not polled).
    pollfd fds[4] = {{stop_.get(), POLLIN, 0}, {ended ? -1 : stream.wake_fd(), POLLIN, 0}};
    nfds_t n = 2;
    short events = 0;
    if (!to_relay.empty() && !relay_done) events |= POLLOUT;
    if (!relay_eof && credit > 0 && !ended) events |= POLLIN;
    int sock_index = -1, done_index = -1;
    // Polled only when there is something to do on it: a hung-up socket is always ready.
    if (events != 0) {
      sock_index = static_cast<int>(n);
      fds[n++] = {sock, events, 0};
    }
    if (!relay_done) {
      done_index = static_cast<int>(n);
      fds[n++] = {c.relay_done.get(), POLLIN, 0};
    }
    int timeout = -1;
    if (linger_until) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*linger_until - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    int ready = ::poll(fds, n, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      failure = base::ErrnoStatus("egress bridge: poll");
      break;
    }
    if (ready == 0) {
      CODEBOX_LOG(kInfo, "egress: a finished connection: the box neither read nor closed it for "
                             << kLinger.count() << " s; cancelled");
      break;
    }
    if (fds[0].revents != 0) break;  // the service ends
    if (fds[1].revents != 0) {
      EgressStream::State state = stream.Take();
      // The box took more of the relay's bytes: it is still reading, so it gets more time.
      if (linger_until && state.send_credit > credit) linger_until = Clock::now() + kLinger;
      to_relay += state.data;
      box_eof = box_eof || state.box_eof;
      credit = state.send_credit;
      ended = state.ended;
      end_ok = state.status.ok();
      if (ended && !state.status.ok()) {
        CODEBOX_LOG(kInfo,
                    "egress: connection ended: " << base::TerminalSafe(state.status.ToString()));
      }
    }
    if (done_index >= 0 && fds[done_index].revents != 0) relay_done = true;
    if (sock_index >= 0 && (fds[sock_index].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
        !relay_eof && credit > 0) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(credit, buffer.size()));
      ssize_t got = ::recv(sock, buffer.data(), want, MSG_DONTWAIT);
      if (got > 0) {
        failure = stream.Send(std::string_view(buffer.data(), static_cast<size_t>(got)));
        credit -= static_cast<uint64_t>(got);
      } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        relay_eof = true;
        // Not a clean end when the relay was cut (see above): no EOF, a reset.
        if (!(c.relay_allowed && !box_eof_passed)) failure = stream.SendEof();
      }
    }
  }
  if (!failure.ok()) {
    CODEBOX_LOG(kInfo, "egress: connection cut: " << base::TerminalSafe(failure.ToString()));
  }
  stream.Close();               // a no-op once the stream ended
  ::shutdown(sock, SHUT_RDWR);  // the relay, if still running, sees the box gone
  BoxClosed(c);
}

}  // namespace

StatusOr<std::unique_ptr<EgressService>> EgressService::Start(
    protocol::AgentClient& agent, net::EgressPolicy policy, net::EgressLimits limits,
    uint64_t max_total_bytes, net::Resolver resolve,
    std::shared_ptr<const net::SecretEgress> secrets) {
  auto service = std::make_unique<EgressServiceImpl>(
      agent, std::move(policy), limits, max_total_bytes, std::move(resolve), std::move(secrets));
  RETURN_IF_ERROR(service->Start());
  return std::unique_ptr<EgressService>(std::move(service));
}

}  // namespace codebox::box
