// BoxRegistry's public calls. Box::Create and Box::Destroy are slow (a jail
// ~10-40 ms, a vm seconds), so neither ever runs with `mu` held: a slot of max_boxes is
// reserved under the lock, the box started without it, and registered under it again.
#include "server/box_registry.h"


#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/deadline.h"
#include "base/paths.h"
#include "base/random.h"
#include "base/text.h"
#include "box/backend.h"
#include "box/leftovers.h"
#include "server/box_id.h"
#include "server/box_registry_state.h"
#include "server/json_log.h"

namespace codebox::server {
namespace {

using base::LogLevel;

double Ms(Clock::duration d) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) /
         1000.0;
}

}  // namespace

Status UnknownBoxError(std::string_view id) {
  return NotFound("no box " + std::string(id) + "; it may have been destroyed or reaped");
}

std::string RandomHex(size_t bytes) { return base::HexEncode(base::RandomBytes(bytes)); }

std::string NewRegistryBoxId(const RegistryOptions& options) {
  return NewBoxId(options.incarnation, options.node);
}


void DestroyBox(const std::string& id, const std::shared_ptr<Box>& box, std::string_view why) {
  Status st = box->Destroy();
  if (st.ok()) {
    JsonLog::Write(LogLevel::kInfo, "box destroyed", {{"box", id}, {"reason", why}});
  } else {
    JsonLog::Write(LogLevel::kWarn, "box destroy failed",
                   {{"box", id}, {"reason", why}, {"error", st.ToString()}});
  }
}

BoxRegistry::State::State(RegistryOptions o) : options(std::move(o)) {
  for (const PoolSpec& spec : options.pools) {
    Pool pool;
    pool.spec = spec;
    pool.options = Normalize(spec.options);
    pool.key = PoolMatchKey(pool.options);
    pools.push_back(std::move(pool));
  }
}

BoxOptions BoxRegistry::State::Normalize(const BoxOptions& in) const {
  BoxOptions o = in;
  o.prestart = false;
  if (o.box_timeout > options.max_lifetime) o.box_timeout = options.max_lifetime;
  if (o.driver == DriverKind::kAuto) {
    // When no driver can run here the box start reports why; matching keeps "auto".
    auto choice = box::ChooseDriver(o);
    if (choice.ok()) o.driver = choice->kind;
  }
  return o;
}

bool BoxRegistry::State::ReserveSlotLocked() {
  if (slots >= options.max_boxes) return false;
  ++slots;
  return true;
}

void BoxRegistry::State::ReleaseSlot() {
  {
    std::lock_guard<std::mutex> lock(mu);
    --slots;
  }
  cv.notify_all();
}

std::shared_ptr<Box> BoxRegistry::State::Own(std::unique_ptr<Box> box) {
  std::weak_ptr<State> weak = weak_from_this();
  return std::shared_ptr<Box>(box.release(), [weak](Box* b) {
    delete b;  // ~Box destroys it, if nothing did yet
    if (auto state = weak.lock()) state->ReleaseSlot();
  });
}

StatusOr<std::shared_ptr<Box>> BoxRegistry::State::StartBox(const BoxOptions& box_options,
                                                            std::string_view why) {
  const auto t0 = Clock::now();
  auto box = Box::Create(box_options);
  {
    std::lock_guard<std::mutex> lock(mu);
    ++(box.ok() ? starts.ok : starts.failed);
  }
  if (!box.ok()) {
    ReleaseSlot();
    return box.status();
  }
  JsonLog::Write(LogLevel::kDebug, "box started",
                 {{"why", why},
                  {"image", box_options.image},
                  {"driver", (*box)->info().driver},
                  {"ms", Ms(Clock::now() - t0)}});
  return Own(std::move(*box));
}

std::optional<ReadyBox> BoxRegistry::State::TakeFromPoolLocked(const std::string& key) {
  for (Pool& pool : pools) {
    if (pool.key != key || pool.ready.empty()) continue;
    ReadyBox box = std::move(pool.ready.front());
    pool.ready.pop_front();
    ++pool.taken;
    cv.notify_all();  // a fill thread starts its replacement
    return box;
  }
  return std::nullopt;
}

BoxRecord BoxRegistry::State::RegisterLocked(std::string id, std::shared_ptr<Box> box,
                                             const BoxOptions& o, bool from_pool,
                                             Clock::time_point started, std::string tenant,
                                             std::shared_ptr<void> tenant_hold) {
  RegisteredBox entry;
  entry.record.id = std::move(id);
  entry.record.tenant = std::move(tenant);
  entry.tenant_hold = std::move(tenant_hold);
  entry.record.image = o.image;
  entry.record.info = box->info();
  entry.record.from_pool = from_pool;
  entry.record.cpus = o.cpus;
  entry.record.memory_mib = o.memory_mib;
  entry.record.disk_mib = o.disk_mib;
  entry.record.created_at = std::chrono::system_clock::now();
  entry.record.last_used = entry.record.created_at;
  entry.last_active = Clock::now();
  // The Box's own watchdog counts box_timeout from its start; the reaper removes it then.
  entry.deadline = base::DeadlineAfter(started, o.box_timeout);
  entry.ceiling = entry.deadline;
  entry.box = std::move(box);
  BoxRecord record = entry.record;
  record.state = "idle";
  boxes.emplace(record.id, std::move(entry));
  return record;
}

StatusOr<std::shared_ptr<void>> BoxRegistry::State::HoldTenantSlotLocked(const BoxOwner& owner) {
  std::shared_ptr<void> hold = tenant_boxes.TryHold(owner.tenant, owner.max_boxes);
  if (!hold) {
    return ResourceExhausted("tenant " + owner.tenant + " holds " +
                             std::to_string(owner.max_boxes) +
                             " boxes, its quota (--tenant-max-boxes, or max-boxes= in the token "
                             "file); destroy one of its boxes or retry later");
  }
  return hold;
}

BoxRegistry::BoxRegistry(RegistryOptions options) {
  if (options.incarnation.empty()) options.incarnation = NewIncarnation();
  state_ = std::make_shared<State>(std::move(options));
}

BoxRegistry::~BoxRegistry() { Shutdown(); }

void BoxRegistry::Start() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->started || state_->stopping) return;
    state_->started = true;
  }
  // What a server killed with -9 left behind (the same walk as `codebox gc`); its owner is
  // gone, so nothing of a live process is touched.
  box::LeftoverReport report = box::CollectLeftovers(
      {.home = base::CodeboxHome(state_->options.defaults.home), .walk_all_cgroups = true});
  for (const std::string& what : report.removed) {
    JsonLog::Write(LogLevel::kInfo, "removed leftover of a dead codebox process",
                   {{"leftover", what}});
  }
  for (const std::string& what : report.failed) {
    JsonLog::Write(LogLevel::kWarn, "could not remove leftover", {{"leftover", what}});
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->pools.empty()) {
    const uint32_t n = std::max<uint32_t>(1, state_->options.pool_start_concurrency);
    for (uint32_t i = 0; i < n; ++i) state_->fillers.emplace_back([s = state_] { s->FillLoop(); });
  }
  state_->reaper = std::thread([s = state_] { s->ReapLoop(); });
}

StatusOr<BoxRecord> BoxRegistry::Create(const BoxOptions& options, const BoxOwner& owner) {
  State& s = *state_;
  const BoxOptions o = s.Normalize(options);
  const std::string key = PoolMatchKey(o);
  std::shared_ptr<void> tenant_hold;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.stopping) return Unavailable("the server is shutting down; retry on another");
    ASSIGN_OR_RETURN(tenant_hold, s.HoldTenantSlotLocked(owner));
    if (auto ready = s.TakeFromPoolLocked(key)) {
      BoxRecord record = s.RegisterLocked(std::move(ready->id), std::move(ready->box), o, true,
                                          ready->started, owner.tenant, std::move(tenant_hold));
      lock.unlock();
      JsonLog::Write(LogLevel::kInfo, "box created",
                     {{"box", record.id}, {"image", o.image}, {"from_pool", true}});
      return record;
    }
    if (!s.ReserveSlotLocked()) {
      return ResourceExhausted(
          "the server holds " + std::to_string(s.slots) + " boxes, its limit (--max-boxes " +
          std::to_string(s.options.max_boxes) + "); destroy a box or retry later");
    }
    ++s.demand_starting;
  }
  const auto started = Clock::now();
  auto box = s.StartBox(o, "request");
  std::shared_ptr<Box> discard;  // dropped after the lock is released
  std::unique_lock<std::mutex> lock(s.mu);
  --s.demand_starting;
  s.cv.notify_all();
  if (!box.ok()) {
    lock.unlock();
    JsonLog::Write(LogLevel::kWarn, "box start failed",
                   {{"image", o.image}, {"error", box.status().ToString()}});
    return box.status();
  }
  if (s.stopping) {
    discard = std::move(*box);
    lock.unlock();
    return Unavailable("the server is shutting down; retry on another");
  }
  BoxRecord record = s.RegisterLocked(NewRegistryBoxId(s.options), std::move(*box), o, false,
                                      started, owner.tenant, std::move(tenant_hold));
  lock.unlock();
  JsonLog::Write(LogLevel::kInfo, "box created",
                 {{"box", record.id},
                  {"image", o.image},
                  {"from_pool", false},
                  {"ms", Ms(Clock::now() - started)}});
  return record;
}

StatusOr<BoxRegistry::Lease> BoxRegistry::Acquire(std::string_view id, const Caller& caller) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->boxes.find(id);
  if (it == state_->boxes.end() || !caller.Sees(it->second.record.tenant)) {
    return UnknownBoxError(id);
  }
  RegisteredBox& b = it->second;
  ++b.leases;
  ++b.record.requests;
  b.record.last_used = std::chrono::system_clock::now();
  b.last_active = Clock::now();
  Lease lease;
  lease.box_ = b.box;
  lease.id_ = b.record.id;
  std::weak_ptr<State> weak = state_;
  // Runs when the last copy of this lease goes: the box is idle again from then on.
  lease.release_ = std::shared_ptr<void>(nullptr, [weak, id = b.record.id](void*) {
    auto state = weak.lock();
    if (!state) return;
    std::lock_guard<std::mutex> lock(state->mu);
    auto it = state->boxes.find(id);
    if (it == state->boxes.end()) return;  // destroyed meanwhile
    --it->second.leases;
    it->second.last_active = Clock::now();
  });
  return lease;
}

static BoxRecord WithState(const RegisteredBox& b) {
  BoxRecord record = b.record;
  record.state = b.leases > 0 ? "busy" : "idle";
  return record;
}

StatusOr<BoxRecord> BoxRegistry::Get(std::string_view id, const Caller& caller) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->boxes.find(id);
  if (it == state_->boxes.end() || !caller.Sees(it->second.record.tenant)) {
    return UnknownBoxError(id);
  }
  return WithState(it->second);
}

StatusOr<std::vector<EgressRecord>> BoxRegistry::EgressLog(std::string_view id,
                                                           const Caller& caller) const {
  std::shared_ptr<Box> box;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->boxes.find(id);
    if (it == state_->boxes.end() || !caller.Sees(it->second.record.tenant)) {
      return UnknownBoxError(id);
    }
    box = it->second.box;
  }
  // Outside the lock; dropping `box` may be the last owner only once DestroyBox let go, which
  // must not happen under `mu` either.
  return box->EgressLog();
}

std::vector<BoxRecord> BoxRegistry::List(const Caller& caller) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<BoxRecord> out;
  for (const auto& [id, b] : state_->boxes) {
    if (caller.Sees(b.record.tenant)) out.push_back(WithState(b));
  }
  std::sort(out.begin(), out.end(),
            [](const BoxRecord& a, const BoxRecord& b) { return a.created_at < b.created_at; });
  return out;
}

namespace {

std::optional<std::chrono::system_clock::time_point> WallClock(
    const std::optional<Clock::time_point>& t) {
  if (!t) return std::nullopt;
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(*t - Clock::now());
}

}  // namespace

StatusOr<std::optional<std::chrono::system_clock::time_point>> BoxRegistry::LifetimeEnd(
    std::string_view id, const Caller& caller) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->boxes.find(id);
  if (it == state_->boxes.end() || !caller.Sees(it->second.record.tenant)) {
    return UnknownBoxError(id);
  }
  return WallClock(it->second.deadline);
}

StatusOr<std::optional<std::chrono::system_clock::time_point>> BoxRegistry::SetLifetime(
    std::string_view id, std::chrono::milliseconds from_now, const Caller& caller) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->boxes.find(id);
  if (it == state_->boxes.end() || !caller.Sees(it->second.record.tenant)) {
    return UnknownBoxError(id);
  }
  RegisteredBox& b = it->second;
  std::optional<Clock::time_point> end = base::DeadlineAfter(Clock::now(), from_now);
  if (!end || (b.ceiling && *end > *b.ceiling)) end = b.ceiling;
  b.deadline = end;
  b.lifetime_set = true;
  state_->cv.notify_all();  // the reaper looks again (a lifetime may have been shortened)
  return WallClock(b.deadline);
}

Status BoxRegistry::Destroy(std::string_view id, const Caller& caller) {
  std::unique_lock<std::mutex> lock(state_->mu);
  auto it = state_->boxes.find(id);
  if (it == state_->boxes.end() || !caller.Sees(it->second.record.tenant)) {
    return UnknownBoxError(id);
  }
  auto node = state_->boxes.extract(it);
  lock.unlock();
  // Calls in flight on leases fail cleanly; the Box itself goes with the last lease.
  DestroyBox(node.key(), node.mapped().box, "request");
  return Status::Ok();
}

namespace {

// What TakeOneShot hands out, through an aliasing shared_ptr<Box>: its end is logged with its
// id, then the box goes (and with it its slot).
struct OneShot {
  std::string id;
  std::shared_ptr<void> tenant_hold;  // given back after the box went (members go in reverse)
  std::shared_ptr<Box> box;
  ~OneShot() {
    JsonLog::Write(LogLevel::kInfo, "box destroyed", {{"box", id}, {"reason", "one-shot"}});
  }
};

}  // namespace

StatusOr<std::shared_ptr<Box>> BoxRegistry::TakeOneShot(const BoxOptions& options,
                                                        bool* from_pool, const BoxOwner& owner) {
  State& s = *state_;
  const BoxOptions o = s.Normalize(options);
  const std::string key = PoolMatchKey(o);
  auto taken = std::make_shared<OneShot>();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stopping) return Unavailable("the server is shutting down; retry on another");
    ASSIGN_OR_RETURN(taken->tenant_hold, s.HoldTenantSlotLocked(owner));
    if (auto ready = s.TakeFromPoolLocked(key)) {
      taken->id = std::move(ready->id);
      taken->box = std::move(ready->box);
    } else if (!s.ReserveSlotLocked()) {
      return ResourceExhausted("the server holds " + std::to_string(s.slots) +
                               " boxes, its limit (--max-boxes " +
                               std::to_string(s.options.max_boxes) + "); retry later");
    } else {
      ++s.demand_starting;
    }
  }
  const bool pooled = taken->box != nullptr;
  if (from_pool != nullptr) *from_pool = pooled;
  if (!pooled) {
    auto started = s.StartBox(o, "one-shot");
    {
      std::lock_guard<std::mutex> lock(s.mu);
      --s.demand_starting;
    }
    s.cv.notify_all();
    if (!started.ok()) {
      JsonLog::Write(LogLevel::kWarn, "box start failed",
                     {{"image", o.image}, {"error", started.status().ToString()}});
      return started.status();
    }
    taken->id = NewRegistryBoxId(s.options);
    taken->box = std::move(*started);
  }
  std::shared_ptr<Box> box(taken, taken->box.get());
  {
    std::lock_guard<std::mutex> lock(s.mu);
    // When stopping, Shutdown has swept the one-shots already: this one goes on return.
    if (s.stopping) return Unavailable("the server is shutting down; retry on another");
    std::erase_if(s.oneshots, [](const std::weak_ptr<Box>& w) { return w.expired(); });
    s.oneshots.push_back(box);
  }
  JsonLog::Write(
      LogLevel::kInfo, "box created",
      {{"box", taken->id}, {"image", o.image}, {"from_pool", pooled}, {"one_shot", true}});
  return box;
}

std::vector<PoolStatus> BoxRegistry::Pools() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<PoolStatus> out;
  for (const Pool& pool : state_->pools) {
    out.push_back({.spec = pool.spec.text,
                   .image = pool.options.image,
                   .target = pool.spec.size,
                   .ready = static_cast<uint32_t>(pool.ready.size()),
                   .starting = pool.starting,
                   .taken = pool.taken,
                   .last_error = pool.last_error});
  }
  return out;
}

uint32_t BoxRegistry::box_count() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->slots;
}

uint32_t BoxRegistry::max_boxes() const { return state_->options.max_boxes; }

const std::string& BoxRegistry::node() const { return state_->options.node; }
const std::string& BoxRegistry::incarnation() const { return state_->options.incarnation; }

BoxStartCounts BoxRegistry::start_counts() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->starts;
}

std::vector<BoxCount> BoxRegistry::CountBoxes() const {
  std::map<std::pair<std::string, std::string>, uint32_t> counts;
  // A one-shot's caller may drop it while we look: this may then hold its last reference,
  // which must go after the lock (its deleter takes the lock).
  std::vector<std::shared_ptr<Box>> held;
  std::lock_guard<std::mutex> lock(state_->mu);
  uint32_t counted = 0;
  for (const auto& [id, b] : state_->boxes) {
    ++counts[{b.record.info.driver, b.leases > 0 ? "busy" : "idle"}];
    ++counted;
  }
  for (const Pool& pool : state_->pools) {
    for (const ReadyBox& r : pool.ready) ++counts[{r.box->info().driver, "pool"}];
    counted += static_cast<uint32_t>(pool.ready.size());
    if (pool.starting > 0) {
      counts[{std::string(DriverKindName(pool.options.driver)), "starting"}] += pool.starting;
      counted += pool.starting;
    }
  }
  for (const auto& weak : state_->oneshots) {
    if (auto box = weak.lock()) {
      ++counts[{box->info().driver, "oneshot"}];
      ++counted;
      held.push_back(std::move(box));
    }
  }
  // What is left of the slots: request starts under way, or destroyed boxes a lease holds.
  if (state_->slots > counted) counts[{"", "other"}] += state_->slots - counted;
  std::vector<BoxCount> out;
  for (const auto& [k, n] : counts) out.push_back({k.first, k.second, n});
  return out;
}

std::map<std::string, uint32_t, std::less<>> BoxRegistry::TenantBoxCounts() const {
  return state_->tenant_boxes.Counts();
}

void BoxRegistry::Shutdown() {
  std::call_once(state_->shutdown_once, [this] {
    State& s = *state_;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stopping = true;
    }
    s.cv.notify_all();
    for (std::thread& t : s.fillers) t.join();  // each finishes the start it is in
    if (s.reaper.joinable()) s.reaper.join();
    std::map<std::string, RegisteredBox, std::less<>> boxes;
    std::vector<ReadyBox> ready;
    std::vector<std::shared_ptr<Box>> oneshots;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      boxes.swap(s.boxes);
      for (Pool& pool : s.pools) {
        for (ReadyBox& r : pool.ready) ready.push_back(std::move(r));
        pool.ready.clear();
      }
      for (auto& weak : s.oneshots) {
        if (auto box = weak.lock()) oneshots.push_back(std::move(box));
      }
      s.oneshots.clear();
    }
    for (auto& [id, b] : boxes) DestroyBox(id, b.box, "shutdown");
    for (ReadyBox& r : ready) DestroyBox(r.id, r.box, "shutdown (pool)");
    for (auto& box : oneshots) DestroyBox("", box, "shutdown (one-shot)");
  });
}

}  // namespace codebox::server
