#include "server/box_id.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

namespace codebox::server {
namespace {

TEST(BoxIdTest, NewIdsNameTheirNodeAndIncarnationAndParseBack) {
  std::string id = NewBoxId("1f2e", "node-a");
  ASSERT_EQ(id.size(), 18u + 7u) << id;
  auto parts = ParseBoxId(id);
  ASSERT_TRUE(parts.has_value()) << id;
  EXPECT_EQ(parts->incarnation, "1f2e");
  EXPECT_EQ(parts->node, "node-a");
  EXPECT_EQ(ParseBoxId(NewBoxId("00ff", "10.244.1.7"))->node, "10.244.1.7");
}

TEST(BoxIdTest, AnIdWithoutANodeIsStillAnId) {
  std::string id = NewBoxId("abcd", "");
  ASSERT_EQ(id.size(), 18u);
  auto parts = ParseBoxId(id);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->node, "");
  EXPECT_TRUE(ParseBoxId("b-0000000000000000").has_value());
}

TEST(BoxIdTest, IdsAreNotReused) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(NewBoxId("abcd", "n"));
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(BoxIdTest, MalformedIdsAreRefused) {
  for (const char* bad : {"", "b-", "b-123", "b-0000000000000000.", "b-000000000000000g.n",
                          "B-0000000000000000", "b-0000000000000000x", "b-0000000000000000.-n",
                          "b-0000000000000000.n-", "b-0000000000000000.N", "b-0000000000000000./",
                          "b-0000000000000000.a/b", "b-0000000000000000.a b",
                          "b-0000000000000000.a%2fb", "x-0000000000000000.n"}) {
    EXPECT_FALSE(ParseBoxId(bad).has_value()) << bad;
  }
  std::string long_node(64, 'a');
  EXPECT_FALSE(ParseBoxId("b-0000000000000000." + long_node).has_value());
  EXPECT_TRUE(ParseBoxId("b-0000000000000000." + long_node.substr(1)).has_value());
}

TEST(BoxIdTest, NodeNamesAreCheckedWithAClearError) {
  EXPECT_TRUE(CheckNodeName("n2", "--node").ok());
  EXPECT_TRUE(CheckNodeName("10.0.0.1", "--node").ok());
  Status st = CheckNodeName("Node_A", "--node");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--node"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("a-z"), std::string::npos) << st.ToString();
}

TEST(BoxIdTest, TheDefaultNodeIsThePodIpInKubernetesElseTheHostName) {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::setenv("POD_IP", "10.1.2.3", 1);
  std::string host = DefaultNodeName();
  EXPECT_TRUE(IsNodeName(host)) << host;
  EXPECT_NE(host, "10.1.2.3");  // not in a pod: POD_IP alone does not count
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  EXPECT_EQ(DefaultNodeName(), "10.1.2.3");
  ::setenv("POD_IP", "not an ip!", 1);
  EXPECT_EQ(DefaultNodeName(), host);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("POD_IP");
}

}  // namespace
}  // namespace codebox::server
