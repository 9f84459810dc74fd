// What the system prompts tell the model about the sandbox's network.
#include <gtest/gtest.h>

#include "llm/session.h"

namespace codebox::llm {
namespace {

TEST(NetworkNoteTest, SaysWhichHostsAndWhetherPipWorks) {
  EXPECT_EQ(NetworkNote(BoxOptions{}), " without network access");
  BoxOptions allow;
  allow.network = NetworkMode::kAllow;  // allow with no hosts: still nothing to reach
  EXPECT_EQ(NetworkNote(allow), " without network access");
  allow.allow_hosts = {"api.example.org", "*.data.example.org:8443"};
  const std::string hosts = NetworkNote(allow);
  EXPECT_NE(hosts.find("only these hosts"), std::string::npos) << hosts;
  EXPECT_NE(hosts.find("api.example.org, *.data.example.org:8443"), std::string::npos) << hosts;
  EXPECT_NE(hosts.find("HTTP_PROXY"), std::string::npos) << hosts;
  EXPECT_EQ(hosts.find("pip install"), std::string::npos) << "no index, no pip: " << hosts;
  allow.allow_hosts.push_back("pypi.org");
  EXPECT_NE(NetworkNote(allow).find("%pip install --user"), std::string::npos);
  BoxOptions open;
  open.network = NetworkMode::kOpen;
  const std::string any = NetworkNote(open);
  EXPECT_NE(any.find("public internet addresses"), std::string::npos) << any;
  EXPECT_NE(any.find("%pip install --user"), std::string::npos) << any;
}

}  // namespace
}  // namespace codebox::llm
