#include "server/egress_audit.h"

#include <gtest/gtest.h>

namespace codebox::server {
namespace {

EgressRecord Record(int i) {
  EgressRecord r;
  r.host = "h" + std::to_string(i) + ".example.org";
  r.port = 443;
  r.allowed = i % 2 == 0;
  r.reason = "r";
  r.bytes_up = static_cast<uint64_t>(i);
  return r;
}

std::vector<EgressRecord> Range(int from, int to) {  // [from, to)
  std::vector<EgressRecord> out;
  for (int i = from; i < to; ++i) out.push_back(Record(i));
  return out;
}

std::vector<std::string> Hosts(const std::vector<EgressRecord>& records) {
  std::vector<std::string> out;
  for (const EgressRecord& r : records) out.push_back(r.host);
  return out;
}

TEST(EgressAuditTest, EachRecordOnceWhileTheLogGrows) {
  EgressAudit audit;
  EXPECT_EQ(audit.NewRecords("b-1", {}).size(), 0u);
  EXPECT_EQ(Hosts(audit.NewRecords("b-1", Range(0, 3))), Hosts(Range(0, 3)));
  EXPECT_EQ(audit.NewRecords("b-1", Range(0, 3)).size(), 0u);
  EXPECT_EQ(Hosts(audit.NewRecords("b-1", Range(0, 5))), Hosts(Range(3, 5)));
  // Another box is followed on its own; a forgotten one starts again.
  EXPECT_EQ(audit.NewRecords("b-2", Range(0, 5)).size(), 5u);
  audit.Forget("b-1");
  EXPECT_EQ(audit.NewRecords("b-1", Range(0, 5)).size(), 5u);
}

TEST(EgressAuditTest, AFullLogIsFollowedByItsLastRecords) {
  const size_t cap = EgressAudit::kLogCap;
  EgressAudit audit;
  EXPECT_EQ(audit.NewRecords("b", Range(0, static_cast<int>(cap) - 10)).size(), cap - 10);
  // 30 more came: the log holds the last `cap` of them, the 20 oldest dropped.
  auto fresh = audit.NewRecords("b", Range(20, static_cast<int>(cap) + 20));
  EXPECT_EQ(Hosts(fresh), Hosts(Range(static_cast<int>(cap) - 10, static_cast<int>(cap) + 20)));
  EXPECT_EQ(audit.NewRecords("b", Range(20, static_cast<int>(cap) + 20)).size(), 0u);
  fresh = audit.NewRecords("b", Range(25, static_cast<int>(cap) + 25));
  EXPECT_EQ(fresh.size(), 5u);
  // Everything seen has been dropped since: all of the log is new.
  fresh = audit.NewRecords("b", Range(5000, 5000 + static_cast<int>(cap)));
  EXPECT_EQ(fresh.size(), cap);
}

}  // namespace
}  // namespace codebox::server
