// The registry's reaper thread: ends boxes idle too long or past their lifetime, and replaces
// pool boxes that have waited through half of theirs.
#include <algorithm>
#include <vector>

#include "server/box_registry_state.h"

namespace codebox::server {

using std::chrono::milliseconds;

Clock::duration BoxRegistry::State::ReapPeriod() const {
  milliseconds period = std::min(options.idle_timeout, options.max_lifetime);
  if (period != kNoTimeout) period /= 4;
  return std::clamp(period, milliseconds(10), milliseconds(1000));
}

void BoxRegistry::State::ReapLoop() {
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    const auto now = Clock::now();
    std::vector<std::pair<RegisteredBox, std::string>> victims;
    for (auto it = boxes.begin(); it != boxes.end();) {
      RegisteredBox& b = it->second;
      const char* why = nullptr;
      if (b.deadline && now >= *b.deadline) {
        why = "lifetime";
      } else if (b.leases == 0 && !b.lifetime_set && options.idle_timeout != kNoTimeout &&
                 now - b.last_active >= options.idle_timeout) {
        why = "idle";
      }
      if (why == nullptr) {
        ++it;
        continue;
      }
      victims.emplace_back(std::move(b), why);
      it = boxes.erase(it);
    }
    // A pool box's lifetime runs while it waits: one past half of it is replaced, so a box
    // handed out always has at least half its lifetime left.
    std::vector<ReadyBox> stale;
    for (Pool& pool : pools) {
      if (pool.options.box_timeout == kNoTimeout) continue;
      while (!pool.ready.empty() &&
             now - pool.ready.front().started >= pool.options.box_timeout / 2) {
        stale.push_back(std::move(pool.ready.front()));
        pool.ready.pop_front();
      }
    }
    if (!stale.empty()) cv.notify_all();
    lock.unlock();
    for (auto& [b, why] : victims) DestroyBox(b.record.id, b.box, why);
    for (ReadyBox& r : stale) DestroyBox(r.id, r.box, "pool box past half its lifetime");
    victims.clear();  // the boxes (and their slots) go here, outside the lock
    stale.clear();
    lock.lock();
    if (stopping) break;
    cv.wait_for(lock, ReapPeriod());
  }
}

}  // namespace codebox::server
