#include "cli/run_flags.h"

#include <gtest/gtest.h>

namespace codebox::cli {
namespace {

using namespace std::chrono_literals;

StatusOr<Invocation> Parse(const std::vector<std::string>& args, bool is_exec) {
  Invocation inv;
  ASSIGN_OR_RETURN(bool parsed, ParseInvocation(args, is_exec, &inv));
  EXPECT_TRUE(parsed);
  return inv;
}

TEST(RunFlagsTest, ExecOptionsEndAtTheCommand) {
  auto inv = Parse({"--memory=1G", "ls", "-la", "--json", "/work"}, true);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->box.memory_mib, 1024u);
  EXPECT_FALSE(inv->json) << "--json after the command is the command's";
  EXPECT_EQ(inv->argv, (std::vector<std::string>{"ls", "-la", "--json", "/work"}));
}

TEST(RunFlagsTest, AnInteractiveExecHasATimeoutOnlyWhenCodeboxIsGivenOne) {
  auto given = Parse({"-i", "--timeout", "5", "prog"}, true);
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  ASSERT_TRUE(given->interactive && given->interactive->timeout);
  EXPECT_EQ(*given->interactive->timeout, 5000ms);
  // The command's own --timeout is its own, after the command's name or after "--".
  for (const auto& args : {std::vector<std::string>{"-i", "prog", "--timeout", "5"},
                           std::vector<std::string>{"-it", "--", "prog", "--timeout=5"}}) {
    auto inv = Parse(args, true);
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    ASSERT_TRUE(inv->interactive);
    EXPECT_FALSE(inv->interactive->timeout) << args[1];
    EXPECT_EQ(inv->argv.front(), "prog");
  }
}

TEST(RunFlagsTest, ErrorsAreUsageErrorsNamingTheFlag) {
  auto slip = Parse({"--memroy", "1G", "print(1)"}, false);
  ASSERT_FALSE(slip.ok());
  EXPECT_NE(slip.status().message().find("did you mean --memory?"), std::string::npos);
  auto switch_with_value = Parse({"--json=yes", "print(1)"}, false);
  ASSERT_FALSE(switch_with_value.ok());
  EXPECT_NE(switch_with_value.status().message().find("--json takes no value"), std::string::npos);
  EXPECT_FALSE(Parse({"-it", "--json", "sh"}, true).ok()) << "--json does not go with -i/-t";
}

}  // namespace
}  // namespace codebox::cli
