#include "cli/interactive_exec.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace codebox::cli {
namespace {

// An interactive session has no exec timeout unless one is given, by any of its names.
TEST(InteractiveExecTest, NamesExecTimeoutKnowsEveryNameOfTheFlagAndNothingElse) {
  EXPECT_TRUE(NamesExecTimeout({"--timeout", "5"}));
  EXPECT_TRUE(NamesExecTimeout({"--driver", "jail", "--exec-timeout=2m"}));
  EXPECT_TRUE(NamesExecTimeout({"--timeout=none"}));
  EXPECT_FALSE(NamesExecTimeout({"--box-timeout", "5"}));
  EXPECT_FALSE(NamesExecTimeout({"-it", "--memory", "1G"}));
  // After "--" the words are the command's.
  EXPECT_FALSE(NamesExecTimeout({"-it", "--", "prog", "--timeout", "5"}));
}

TEST(InteractiveExecTest, ExitStatusIsTheProgramsOrSaysWhatEndedIt) {
  ExecResult r;
  r.exit_code = 3;
  EXPECT_EQ(ExitStatusOf(r), 3);
  r.exit_code = -1;
  r.signal = SIGINT;
  EXPECT_EQ(ExitStatusOf(r), 130);
  r.timed_out = true;
  r.signal = SIGKILL;
  EXPECT_EQ(ExitStatusOf(r), 124);
}

}  // namespace
}  // namespace codebox::cli
