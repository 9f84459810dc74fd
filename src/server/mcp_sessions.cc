#include "server/mcp_sessions.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "server/box_registry_state.h"

namespace codebox::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The boxes one session holds in the registry, so that ending the session destroys them now
// (not when a tool call still running lets go of the Session) and no new one is made after.
struct BoxBook {
  BoxRegistry* registry;
  BoxOptions options;
  BoxOwner owner;
  std::mutex mu;
  bool ended = false;
  std::map<const Box*, std::string> ids;

  // Destroys every box of the session and refuses new ones.
  void EndAll() {
    std::vector<std::string> doomed;
    {
      std::lock_guard<std::mutex> lock(mu);
      ended = true;
      for (auto& [box, id] : ids) doomed.push_back(id);
      ids.clear();
    }
    for (const std::string& id : doomed) (void)registry->Destroy(id);  // may be reaped already
  }
};

Status SessionEnded() {
  return FailedPrecondition("this MCP session has ended; start a new one with initialize");
}

// mcp::BoxSource over the registry: a registered box, held by a lease for the session's life
// (the session, not the registry's idle reaper, decides when it ends; its lifetime still ends
// it), destroyed on Close.
class RegistryBoxSource : public mcp::BoxSource {
 public:
  explicit RegistryBoxSource(std::shared_ptr<BoxBook> book) : book_(std::move(book)) {}

  StatusOr<std::shared_ptr<Box>> Open() override {
    {
      std::lock_guard<std::mutex> lock(book_->mu);
      if (book_->ended) return SessionEnded();
    }
    BoxRegistry& registry = *book_->registry;
    auto record = registry.Create(book_->options, book_->owner);
    if (!record.ok()) return record.status();
    auto lease = registry.Acquire(record->id);
    if (!lease.ok()) return lease.status();
    // The box pointer shares the lease's ownership: the lease lives as long as the box is used.
    auto held = std::make_shared<BoxRegistry::Lease>(std::move(*lease));
    std::shared_ptr<Box> box(held, &held->box());
    std::unique_lock<std::mutex> lock(book_->mu);
    if (book_->ended) {  // DELETE /mcp came while the box started
      lock.unlock();
      (void)registry.Destroy(record->id);
      return SessionEnded();
    }
    book_->ids[box.get()] = record->id;
    return box;
  }

  void Close(std::shared_ptr<Box> box) override {
    std::string id;
    {
      std::lock_guard<std::mutex> lock(book_->mu);
      auto it = book_->ids.find(box.get());
      if (it == book_->ids.end()) return;  // EndAll destroyed it already
      id = std::move(it->second);
      book_->ids.erase(it);
    }
    (void)book_->registry->Destroy(id);
  }

 private:
  std::shared_ptr<BoxBook> book_;
};

}  // namespace

struct McpSessions::Entry {
  std::string id;
  std::shared_ptr<BoxBook> book;
  std::weak_ptr<State> state;
  std::unique_ptr<mcp::Session> session;  // destroyed with the last Use or map entry
  // Guarded by State::mu.
  int in_flight = 0;
  Clock::time_point last_active = Clock::now();
  bool kept = false;
};

struct McpSessions::State {
  McpSessionsOptions options;
  BoxRegistry* registry = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::shared_ptr<Entry>, std::less<>> entries;
  bool stopping = false;
  std::thread reaper;

  Clock::duration ReapPeriod() const {
    milliseconds period = options.idle_timeout;
    if (period != kNoTimeout) period /= 4;
    return std::clamp(period, milliseconds(10), milliseconds(1000));
  }

  // Ends sessions idle past the timeout. Their boxes are destroyed outside the lock.
  void ReapLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      std::vector<std::shared_ptr<Entry>> idle;
      const auto now = Clock::now();
      for (auto it = entries.begin(); it != entries.end();) {
        const Entry& e = *it->second;
        if (e.in_flight == 0 && options.idle_timeout != kNoTimeout &&
            now - e.last_active >= options.idle_timeout) {
          idle.push_back(std::move(it->second));
          it = entries.erase(it);
        } else {
          ++it;
        }
      }
      lock.unlock();
      for (const auto& e : idle) {
        CODEBOX_LOG(kInfo, "mcp: session " << e->id.substr(0, 8) << "... idle; ended");
        e->book->EndAll();
      }
      idle.clear();  // the Sessions go here, outside the lock
      lock.lock();
      if (stopping) break;
      cv.wait_for(lock, ReapPeriod());
    }
  }
};

McpSessions::McpSessions(McpSessionsOptions options, BoxRegistry* registry)
    : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  state_->registry = registry;
  if (state_->options.idle_timeout != kNoTimeout) {
    state_->reaper = std::thread([state = state_.get()] { state->ReapLoop(); });
  }
}

McpSessions::~McpSessions() {
  std::map<std::string, std::shared_ptr<Entry>, std::less<>> entries;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    entries.swap(state_->entries);
  }
  state_->cv.notify_all();
  if (state_->reaper.joinable()) state_->reaper.join();
  for (auto& [id, entry] : entries) entry->book->EndAll();
}

McpSessions::Use::Use(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {}

McpSessions::Use::~Use() {
  if (!entry_) return;  // moved from
  if (auto state = entry_->state.lock()) {
    std::lock_guard<std::mutex> lock(state->mu);
    --entry_->in_flight;
    entry_->last_active = Clock::now();
  }
}

mcp::Session& McpSessions::Use::session() const { return *entry_->session; }
const std::string& McpSessions::Use::id() const { return entry_->id; }

StatusOr<McpSessions::Use> McpSessions::Open(const BoxOwner& owner) {
  auto entry = std::make_shared<Entry>();
  entry->book = std::make_shared<BoxBook>();
  entry->book->registry = state_->registry;
  entry->book->options = state_->options.box_options;
  entry->book->owner = owner;
  entry->state = state_;
  entry->session = std::make_unique<mcp::Session>(state_->options.session,
                                                  std::make_unique<RegistryBoxSource>(entry->book));
  entry->in_flight = 1;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->entries.size() >= state_->options.max_sessions) {
    return ResourceExhausted("at most " + std::to_string(state_->options.max_sessions) +
                             " MCP sessions at once (--max-boxes): end one (DELETE /mcp) or "
                             "wait for an idle one to end");
  }
  // 128 random bits: the session id is the only thing that names a session.
  const std::string& node = state_->options.node;
  do {
    entry->id = RandomHex(16) + (node.empty() ? "" : "." + node);
  } while (state_->entries.count(entry->id) != 0);
  state_->entries.emplace(entry->id, entry);
  return Use(entry);
}

void McpSessions::Keep(const Use& use) {
  std::lock_guard<std::mutex> lock(state_->mu);
  use.entry_->kept = true;
}

StatusOr<McpSessions::Use> McpSessions::Find(std::string_view id, const Caller& caller) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->entries.find(id);
  if (it == state_->entries.end() || !it->second->kept ||
      !caller.Sees(it->second->book->owner.tenant)) {
    return NotFound(
        "no MCP session with this Mcp-Session-Id; it has ended (DELETE, idle for "
        "--idle-timeout, or a server restart): start a new one with initialize");
  }
  ++it->second->in_flight;
  return Use(it->second);
}

Status McpSessions::End(std::string_view id, const Caller& caller) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->entries.find(id);
    if (it == state_->entries.end() || !caller.Sees(it->second->book->owner.tenant)) {
      return NotFound("no MCP session with this Mcp-Session-Id; it has ended already");
    }
    entry = std::move(it->second);
    state_->entries.erase(it);
  }
  entry->book->EndAll();
  return Status::Ok();
}

size_t McpSessions::size() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->entries.size();
}

}  // namespace codebox::server
