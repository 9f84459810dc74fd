#include "server/egress_audit.h"

#include <algorithm>

namespace codebox::server {

bool SameRecord(const EgressRecord& a, const EgressRecord& b) {
  return a.host == b.host && a.port == b.port && a.allowed == b.allowed && a.reason == b.reason &&
         a.address == b.address && a.bytes_up == b.bytes_up && a.bytes_down == b.bytes_down;
}

namespace {

// Where the records after `tail` start in `log`: just past the last place `tail` ends in it;
// 0 when it is not there (everything seen has been dropped since). Searching from the end,
// so a repeated run of records reads as nothing new rather than as all of it again.
size_t StartAfter(const std::vector<EgressRecord>& log, const std::vector<EgressRecord>& tail) {
  if (tail.empty() || log.size() < tail.size()) return 0;
  for (size_t end = log.size(); end >= tail.size(); --end) {
    bool match = true;
    for (size_t k = 0; k < tail.size() && match; ++k) {
      match = SameRecord(log[end - tail.size() + k], tail[k]);
    }
    if (match) return end;
  }
  return 0;
}

}  // namespace

std::vector<EgressRecord> EgressAudit::NewRecords(const std::string& box_id,
                                                  const std::vector<EgressRecord>& log) {
  std::lock_guard<std::mutex> lock(mu_);
  Seen& seen = seen_[box_id];
  size_t start = 0;
  if (log.size() < kLogCap) {
    start = std::min(seen.count, log.size());  // under the cap the log only grows
  } else if (seen.count > 0) {
    start = StartAfter(log, seen.tail);  // full: the oldest are dropped as new ones come
  }
  std::vector<EgressRecord> fresh(log.begin() + static_cast<long>(start), log.end());
  seen.count = log.size();
  const size_t keep = std::min(kTail, log.size());
  seen.tail.assign(log.end() - static_cast<long>(keep), log.end());
  return fresh;
}

void EgressAudit::Forget(std::string_view box_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(box_id);
  if (it != seen_.end()) seen_.erase(it);
}

}  // namespace codebox::server
