// Inside BoxRegistry: its boxes, pools, slots and threads, shared by box_registry.cc (the
// public calls and the reaper) and pool.cc (pool specs, matching and the fill threads).
// Not part of the registry's interface.
#ifndef CODEBOX_SERVER_BOX_REGISTRY_STATE_H_
#define CODEBOX_SERVER_BOX_REGISTRY_STATE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/box_registry.h"

namespace codebox::server {

using Clock = std::chrono::steady_clock;

// The options two boxes must share for one to stand in for the other: the box's shape
// (options::BoxShapeKey) and what Box applies from its options per exec (timeouts, env, output
// limit, driver), as length-prefixed text. `options` is normalized (BoxRegistry::State).
std::string PoolMatchKey(const BoxOptions& options);

struct RegisteredBox {
  std::shared_ptr<Box> box;
  BoxRecord record;  // state is filled in when read
  uint32_t leases = 0;
  Clock::time_point last_active;              // last lease ended, or registered
  std::optional<Clock::time_point> deadline;  // its lifetime ends
  bool lifetime_set = false;  // SetLifetime moved it: the lifetime, not idleness, ends the box
  std::optional<Clock::time_point> ceiling;   // the latest SetLifetime may move `deadline` to
  std::shared_ptr<void> tenant_hold;          // its place in its tenant's box quota
};

struct ReadyBox {
  std::string id;  // kept when it is registered, so logs follow one box throughout
  std::shared_ptr<Box> box;
  Clock::time_point started;
};

struct Pool {
  PoolSpec spec;
  BoxOptions options;  // normalized
  std::string key;     // PoolMatchKey(options)
  std::deque<ReadyBox> ready;
  uint32_t starting = 0;
  uint64_t taken = 0;
  std::string last_error;
  uint32_t failures = 0;  // starts failed in a row
  Clock::time_point retry_at{};
  bool prewarm_unavailable_logged = false;
};

struct BoxRegistry::State : std::enable_shared_from_this<BoxRegistry::State> {
  explicit State(RegistryOptions options);

  // What a box is actually started with: prestart off (a spare jail would be a box outside
  // max_boxes), box_timeout capped at max_lifetime, driver "auto" resolved (so "auto" and the
  // driver it picks match the same pool).
  BoxOptions Normalize(const BoxOptions& options) const;

  // A slot of max_boxes for a box about to start; false when none is free. `mu` held.
  bool ReserveSlotLocked();
  void ReleaseSlot();  // `mu` not held
  // Box::Create in a reserved slot; the slot is released when it fails. Counted and logged.
  StatusOr<std::shared_ptr<Box>> StartBox(const BoxOptions& options, std::string_view why);
  // The box, shared; the slot it holds is released when the last owner drops it (and the
  // Box's destructor has destroyed it). Never drop the last owner with `mu` held.
  std::shared_ptr<Box> Own(std::unique_ptr<Box> box);

  // A ready box of the pool whose key matches, removed from it; nullopt when none. `mu` held.
  std::optional<ReadyBox> TakeFromPoolLocked(const std::string& key);
  // Registers a box under a new id. `mu` held.
  BoxRecord RegisterLocked(std::string id, std::shared_ptr<Box> box, const BoxOptions& options,
                           bool from_pool, Clock::time_point started, std::string tenant,
                           std::shared_ptr<void> tenant_hold);
  // A place in `owner`'s box quota, or kResourceExhausted naming the quota. `mu` held.
  StatusOr<std::shared_ptr<void>> HoldTenantSlotLocked(const BoxOwner& owner);

  void FillLoop();  // pool.cc: one of the pool start threads
  void ReapLoop();  // reaper.cc: idle timeout, lifetime, stale pool boxes
  Clock::duration ReapPeriod() const;

  const RegistryOptions options;
  mutable std::mutex mu;
  std::condition_variable cv;  // slots freed, pool boxes taken, shutdown
  std::map<std::string, RegisteredBox, std::less<>> boxes;
  std::vector<Pool> pools;                   // fixed after construction
  std::vector<std::weak_ptr<Box>> oneshots;  // to destroy at shutdown
  uint32_t slots = 0;                        // boxes alive or starting, of every kind
  uint32_t demand_starting = 0;  // starts for requests now running: refills wait for them
  BoxStartCounts starts;
  TenantCounter tenant_boxes;  // registered and one-shot boxes, per tenant
  bool started = false;
  bool stopping = false;
  std::vector<std::thread> fillers;
  std::thread reaper;
  std::once_flag shutdown_once;
};

// `bytes` bytes from getrandom(2) as 2*bytes lower-case hex digits (ids no one can guess).
std::string RandomHex(size_t bytes);
// A new box id of this registry's node and incarnation (server/box_id.h).
std::string NewRegistryBoxId(const RegistryOptions& options);

// Box::Destroy() with a log line naming the box and why. Never with `mu` held: it is slow.
void DestroyBox(const std::string& id, const std::shared_ptr<Box>& box, std::string_view why);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_BOX_REGISTRY_STATE_H_
