// The boxes a `codebox serve` holds: created on request or taken from a warm pool, found by id,
// used by one or more requests at a time, destroyed on request, when idle too long (unless
// their lifetime was set: SetLifetime), when their lifetime ends, or when the server stops. Pool boxes count against max_boxes. Thread-safe.
#ifndef CODEBOX_SERVER_BOX_REGISTRY_H_
#define CODEBOX_SERVER_BOX_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/box_record.h"
#include "api/server_status.h"
#include "codebox/box.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "server/tenants.h"

namespace codebox::server {

// One warm pool: `size` never-used boxes of `options`, each prewarmed (a python3 waiting for
// code; also the kernel when `kernel`). `--pool python=4,driver=jail,memory=256,kernel=1`.
struct PoolSpec {
  BoxOptions options = {};
  uint32_t size = 0;
  bool kernel = false;
  std::string text = {};  // as given, for logs and `codebox status`
};
// "IMAGE=N[,KEY=VALUE...]": KEY is any box option (schema names, aliases or flag names,
// e.g. driver, memory, cpus) or "kernel"; errors name the part that is wrong.
StatusOr<PoolSpec> ParsePoolSpec(std::string_view text, const BoxOptions& defaults);

struct RegistryOptions {
  uint32_t max_boxes = 256;  // all boxes, pool boxes included; past it kResourceExhausted
  // A box no request has used for this long is destroyed (kNoTimeout: never).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
  // The longest a box lives; a box_timeout a client asks for is capped to it.
  std::chrono::milliseconds max_lifetime{std::chrono::hours(1)};
  std::vector<PoolSpec> pools = {};
  // Options the server sets for every box (home: where images live); a client's options
  // start from these.
  BoxOptions defaults = {};
  // Pool boxes started at once (refills). On 2 cores a few starts at a time finish sooner
  // than many at once, and leave CPU to requests.
  uint32_t pool_start_concurrency = 2;
  // Box ids name this node and incarnation (server/box_id.h); an empty node makes ids without
  // one, an empty incarnation is made at random.
  std::string node = {};
  std::string incarnation = {};
};

// Boxes by driver ("jail", "vm/kvm", ...) and state ("idle", "busy" for registered boxes,
// "pool" ready in a pool, "starting", "oneshot"), for codebox_boxes{driver,state}.
struct BoxCount {
  std::string driver;
  std::string state;
  uint32_t count = 0;
};

// Box starts since the registry began (GET /metrics: codebox_box_starts_total{result}).
struct BoxStartCounts {
  uint64_t ok = 0;
  uint64_t failed = 0;
};

// What `GET /v1/boxes/{id}` shows: an API message (api/box_record.h).
using api::BoxRecord;

// A warm pool as /healthz and /v1/status show it: an API message (api/server_status.h).
using api::PoolStatus;

// Whose box a Create or TakeOneShot makes, and how many boxes that tenant may hold at once
// (pool boxes are nobody's until taken).
struct BoxOwner {
  std::string tenant = std::string(kLocalTenant);
  uint32_t max_boxes = UINT32_MAX;
};

// The answer for a box id this registry does not hold, and for one another tenant holds: a
// tenant cannot tell the two apart.
Status UnknownBoxError(std::string_view id);

class BoxRegistry {
 public:
  explicit BoxRegistry(RegistryOptions options);
  ~BoxRegistry();  // Shutdown()

  // Starts filling the pools in the background (a failed pool start is logged and retried
  // with backoff; it never stops the server).
  void Start();

  // A registered box for `options` (already merged with the defaults and validated): a pool
  // box when one with equal options (options::BoxShapeKey, and the options Box applies per exec:
  // timeouts, env, output limit, the driver "auto" resolves to) is ready, else started now.
  // box_timeout is capped at max_lifetime; prestart is ignored (a spare jail would be a box
  // outside max_boxes). kResourceExhausted at max_boxes, or when `owner` holds its max_boxes.
  StatusOr<BoxRecord> Create(const BoxOptions& options, const BoxOwner& owner = {});

  // A box held for one request; the box is "busy" and not idle-reaped while any lease on it
  // lives. A lease may outlive Destroy() of its box: calls then fail cleanly.
  class Lease {
   public:
    Box& box() const { return *box_; }
    const std::string& id() const { return id_; }
    // ...private: shared ownership of the box and the registry's bookkeeping.
   private:
    friend class BoxRegistry;
    std::shared_ptr<Box> box_;
    std::string id_;
    std::shared_ptr<void> release_;  // marks the box idle again when the last lease goes
  };
  // Each call that names a box takes who asks: a box `caller` may not see (another tenant's)
  // is UnknownBoxError exactly as an unknown id is, so no route can tell the two apart. The
  // server's own bookkeeping (and tests) ask as Caller::System().
  //
  // kNotFound ("no box b-...; it may have been destroyed or reaped") when unknown.
  StatusOr<Lease> Acquire(std::string_view id, const Caller& caller = Caller::System());

  StatusOr<BoxRecord> Get(std::string_view id, const Caller& caller = Caller::System()) const;
  // The box's Box::EgressLog, read without leasing it (no request counted, not kept busy).
  StatusOr<std::vector<EgressRecord>> EgressLog(std::string_view id,
                                                const Caller& caller = Caller::System()) const;
  // The boxes `caller` may see.
  std::vector<BoxRecord> List(const Caller& caller = Caller::System()) const;
  Status Destroy(std::string_view id, const Caller& caller = Caller::System());
  // When the box's lifetime ends (the reaper destroys it then), as wall-clock time; nullopt:
  // it has no end.
  StatusOr<std::optional<std::chrono::system_clock::time_point>> LifetimeEnd(
      std::string_view id, const Caller& caller = Caller::System()) const;
  // Moves the end of the box's lifetime to `from_now` after now (sooner or later), but never
  // past the end it was created with (its box_timeout under max_lifetime): a client never
  // sets its own ceiling. From then on the lifetime alone ends the box, not the idle timeout
  // (E2B's sandboxes live until their timeout, used or not). Answers the new end.
  StatusOr<std::optional<std::chrono::system_clock::time_point>> SetLifetime(
      std::string_view id, std::chrono::milliseconds from_now,
      const Caller& caller = Caller::System());

  // The one-shot path (POST /v1/run): a box that is never registered, from a pool when one
  // matches; it counts against max_boxes until the caller drops it. `from_pool` says which.
  StatusOr<std::shared_ptr<Box>> TakeOneShot(const BoxOptions& options, bool* from_pool,
                                             const BoxOwner& owner = {});

  std::vector<PoolStatus> Pools() const;
  uint32_t box_count() const;  // registered + pool + one-shot
  uint32_t max_boxes() const;
  // What its box ids carry (RegistryOptions::node and the incarnation, made when not given).
  const std::string& node() const;
  const std::string& incarnation() const;
  BoxStartCounts start_counts() const;
  std::vector<BoxCount> CountBoxes() const;
  // Boxes each tenant holds now (registered and one-shot), for codebox_tenant_boxes.
  std::map<std::string, uint32_t, std::less<>> TenantBoxCounts() const;

  // Stops refilling and destroys every box (pool, registered, one-shot boxes once dropped),
  // and every box a caller still holds (its calls fail cleanly). Idempotent.
  void Shutdown();

  struct State;  // box_registry_state.h

 private:
  std::shared_ptr<State> state_;
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_BOX_REGISTRY_H_
