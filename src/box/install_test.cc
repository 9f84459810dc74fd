#include "box/install.h"

#include <gtest/gtest.h>

namespace codebox::box {
namespace {

std::vector<std::string> Tail(const std::vector<std::string>& argv, size_t from_end) {
  return {argv.end() - static_cast<ptrdiff_t>(from_end), argv.end()};
}

std::vector<std::string> Allowed(const PipInstall& plan) {
  std::vector<std::string> out;
  for (const net::HostPattern& p : plan.allow) out.push_back(p.ToString());
  return out;
}

TEST(PlanPipInstallTest, ThePublicIndexByDefault) {
  auto plan = PlanPipInstall({"pandas", "numpy>=1.26,<2", "requests[socks]"}, "");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(std::vector<std::string>(plan->argv.begin(), plan->argv.begin() + 6),
            (std::vector<std::string>{"python3", "-m", "pip", "install", "--user",
                                      "--break-system-packages"}));
  EXPECT_EQ(Tail(plan->argv, 4),
            (std::vector<std::string>{"--", "pandas", "numpy>=1.26,<2", "requests[socks]"}));
  for (const std::string& arg : plan->argv) EXPECT_NE(arg, "--index-url");
  EXPECT_EQ(Allowed(*plan),
            (std::vector<std::string>{"pypi.org:443", "files.pythonhosted.org:443"}));
}

TEST(PlanPipInstallTest, AnIndexUrlIsPassedAndItsHostAllowed) {
  auto https = PlanPipInstall({"x"}, "https://user:pw@Index.Example:8443/simple/");
  ASSERT_TRUE(https.ok()) << https.status().ToString();
  EXPECT_EQ(Tail(https->argv, 4),
            (std::vector<std::string>{"--index-url", "https://user:pw@Index.Example:8443/simple/",
                                      "--", "x"}));
  EXPECT_EQ(Allowed(*https), std::vector<std::string>{"index.example:8443"});

  auto http = PlanPipInstall({"x"}, "http://127.0.0.1:8080/simple");
  ASSERT_TRUE(http.ok()) << http.status().ToString();
  EXPECT_EQ(Tail(http->argv, 6),
            (std::vector<std::string>{"--index-url", "http://127.0.0.1:8080/simple",
                                      "--trusted-host", "127.0.0.1:8080", "--", "x"}));
  EXPECT_EQ(Allowed(*http), std::vector<std::string>{"127.0.0.1:8080"});

  auto default_port = PlanPipInstall({"x"}, "http://[fd00::1]/simple");
  ASSERT_TRUE(default_port.ok()) << default_port.status().ToString();
  EXPECT_EQ(Allowed(*default_port), std::vector<std::string>{"[fd00::1]:80"});
}

TEST(PlanPipInstallTest, NamesThatCouldBeOptionsOrMoreAreRefused) {
  for (const std::string& bad :
       {std::string(""), std::string("-r/etc/passwd"), std::string("--index-url=http://x"),
        std::string(" -e ."), std::string("pkg; rm -rf /"), std::string("pkg @ file:///x"),
        std::string("pkg\nx"), std::string("pkg$(id)"), std::string(300, 'a')}) {
    auto plan = PlanPipInstall({"fine", bad}, "");
    ASSERT_FALSE(plan.ok()) << bad;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(plan.status().message().find("install packages"), std::string::npos);
  }
  EXPECT_FALSE(PlanPipInstall({}, "").ok());
  EXPECT_FALSE(PlanPipInstall(std::vector<std::string>(kMaxInstallPackages + 1, "x"), "").ok());
}

TEST(PlanPipInstallTest, AnIndexUrlMustBeHttpWithAHost) {
  for (const std::string& bad :
       {std::string("ftp://x/simple"), std::string("file:///srv/wheels"), std::string("x/simple"),
        std::string("https:///simple"), std::string("https://bad host/"),
        std::string("https://a_b..c/"), std::string("http://x:99999/")}) {
    auto plan = PlanPipInstall({"x"}, bad);
    ASSERT_FALSE(plan.ok()) << bad;
    EXPECT_NE(plan.status().message().find("index_url"), std::string::npos)
        << plan.status().message();
  }
}

}  // namespace
}  // namespace codebox::box
