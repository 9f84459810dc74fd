#include "cli/box_flags.h"

#include <gtest/gtest.h>

namespace codebox::cli {
namespace {

TEST(BoxFlagsTest, ParsesSizesAndDurations) {
  EXPECT_EQ(*ParseMebibytes("512"), 512u);
  EXPECT_EQ(*ParseMebibytes("2G"), 2048u);
  EXPECT_EQ(*ParseMebibytes("256m"), 256u);
  EXPECT_FALSE(ParseMebibytes("lots").ok());
  EXPECT_EQ(ParseDuration("1.5")->count(), 1500);
  EXPECT_EQ(ParseDuration("500ms")->count(), 500);
  EXPECT_EQ(ParseDuration("2m")->count(), 120000);
  EXPECT_FALSE(ParseDuration("-1").ok());
  // Under 1 ms truncates to 0, which must not silently mean "no limit".
  for (const char* tiny : {"0", "0ms", "0.0004", "0.5ms"}) {
    auto d = ParseDuration(tiny);
    ASSERT_FALSE(d.ok()) << tiny;
    EXPECT_NE(d.status().message().find("at least 1ms"), std::string::npos) << d.status().message();
  }
  EXPECT_EQ(*ParseTimeout("none"), kNoTimeout);
  EXPECT_EQ(ParseTimeout("1ms")->count(), 1);
  auto zero = ParseTimeout("0");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("none for no limit"), std::string::npos);
}

TEST(BoxFlagsTest, ConsumesBoxFlagsAndLeavesOthers) {
  std::vector<std::string> args = {"--memory", "1G", "--env", "A=1", "--driver", "jail",
                                   "--allow-emulation", "--json"};
  BoxOptions options;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    auto r = ParseBoxFlag(args, &i, &options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (!*r) break;
  }
  EXPECT_EQ(args[i], "--json");
  EXPECT_EQ(options.memory_mib, 1024u);
  EXPECT_EQ(options.env.at("A"), "1");
  EXPECT_EQ(options.driver, DriverKind::kJail);
  EXPECT_TRUE(options.allow_emulation);
}

TEST(BoxFlagsTest, BadValuesSayWhichFlag) {
  std::vector<std::string> args = {"--env", "NOVALUE"};
  BoxOptions options;
  size_t i = 0;
  auto r = ParseBoxFlag(args, &i, &options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--env: wants K=V"), std::string::npos);
  std::vector<std::string> missing = {"--image"};
  i = 0;
  EXPECT_FALSE(ParseBoxFlag(missing, &i, &options).ok());
}

}  // namespace
}  // namespace codebox::cli
