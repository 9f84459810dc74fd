// The server's record of what each box's egress proxy did: it follows every box's
// Box::EgressLog (the last 1000 connections, oldest first) so that each connection reaches the
// server's JSON log and metrics once. The API reads a box's log after every request on it,
// before DELETE destroys it, and at the end of a one-shot run.
#ifndef CODEBOX_SERVER_EGRESS_AUDIT_H_
#define CODEBOX_SERVER_EGRESS_AUDIT_H_

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/box.h"

namespace codebox::server {

class EgressAudit {
 public:
  // The records of `log` (the box's whole log now) not returned for `box_id` before. While the
  // log is under its cap, that is every record past the count seen; once it is full and the
  // oldest are dropped, the new ones are those after the last few records seen (a connection
  // exactly like the one before it, past the cap, may be missed: an audit aid, not a ledger).
  std::vector<EgressRecord> NewRecords(const std::string& box_id,
                                       const std::vector<EgressRecord>& log);
  // The box is gone: stop following it.
  void Forget(std::string_view box_id);

  static constexpr size_t kLogCap = 1000;  // Box::EgressLog's
  static constexpr size_t kTail = 8;       // records kept to find the place in a full log

 private:
  struct Seen {
    size_t count = 0;
    std::vector<EgressRecord> tail;  // the last kTail records seen
  };
  std::mutex mu_;
  std::map<std::string, Seen, std::less<>> seen_;
};

bool SameRecord(const EgressRecord& a, const EgressRecord& b);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_EGRESS_AUDIT_H_
