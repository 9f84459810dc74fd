#include "server/tenants.h"

#include <gtest/gtest.h>

namespace codebox::server {
namespace {

TEST(TokenFileTest, ReadsTenantsAdminsAndQuotas) {
  auto grants = ParseTokenLines(
      "# the team's tokens\n"
      "\n"
      "  tok-a1 tenant=a max-boxes=3\n"
      "tok-a2 tenant=a max-requests=5   # a comment\n"
      "tok-solo\n"
      "tok-root admin\n",
      "tokens");
  ASSERT_TRUE(grants.ok()) << grants.status().ToString();
  ASSERT_EQ(grants->size(), 4u);
  EXPECT_EQ((*grants)[0].token, "tok-a1");
  EXPECT_EQ((*grants)[0].tenant, "a");
  EXPECT_EQ((*grants)[1].tenant, "a");
  EXPECT_FALSE((*grants)[0].admin);
  // A token without tenant= is a tenant of its own, named without the token in it.
  EXPECT_EQ((*grants)[2].tenant.rfind("t-", 0), 0u);
  EXPECT_EQ((*grants)[2].tenant.size(), 10u);
  EXPECT_EQ((*grants)[2].tenant.find("solo"), std::string::npos);
  EXPECT_TRUE((*grants)[3].admin);

  TenantQuotas quotas({.max_boxes = 10, .max_requests = 20}, *grants);
  EXPECT_EQ(quotas.For("a").max_boxes, 3u);
  EXPECT_EQ(quotas.For("a").max_requests, 5u);
  EXPECT_EQ(quotas.For("someone-else").max_boxes, 10u);
}

TEST(TokenFileTest, ErrorsNameTheLineNeverTheToken) {
  for (const char* text : {"tok-secret tenant=\n", "tok-secret tenant=a/b\n",
                           "tok-secret max-boxes=0\n", "tok-secret max-boxes=x\n",
                           "tok-secret other-secret\n", "tok-secret\ntok-secret\n",
                           "t1 tenant=a max-boxes=1\nt2 tenant=a max-boxes=2\n"}) {
    auto grants = ParseTokenLines(text, "tokens");
    ASSERT_FALSE(grants.ok()) << text;
    EXPECT_EQ(grants.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(grants.status().message().find("secret"), std::string::npos)
        << grants.status().message();
  }
}

TEST(CallerTest, SeesItsOwnTenantOrEverythingAsAdmin) {
  Caller a{"a", false};
  EXPECT_TRUE(a.Sees("a"));
  EXPECT_FALSE(a.Sees("b"));
  EXPECT_FALSE(a.Sees(""));
  EXPECT_TRUE((Caller{"b", true}).Sees("a"));
}

TEST(TenantCounterTest, HoldsUpToTheCeilingAndGivesBack) {
  TenantCounter counter;
  auto h1 = counter.TryHold("a", 2);
  auto h2 = counter.TryHold("a", 2);
  ASSERT_TRUE(h1 && h2);
  EXPECT_FALSE(counter.TryHold("a", 2));
  EXPECT_TRUE(counter.TryHold("b", 2)) << "another tenant has its own share";
  EXPECT_EQ(counter.Count("a"), 2u);
  h1.reset();
  EXPECT_EQ(counter.Count("a"), 1u);
  EXPECT_TRUE(counter.TryHold("a", 2));
  h2.reset();
  EXPECT_EQ(counter.Counts().count("a"), 0u);
}

TEST(TenantCounterTest, AHoldMayOutliveItsCounter) {
  std::shared_ptr<void> hold;
  {
    TenantCounter counter;
    hold = counter.TryHold("a", 1);
  }
  hold.reset();  // no crash, no use after free (ASan)
}

}  // namespace
}  // namespace codebox::server
