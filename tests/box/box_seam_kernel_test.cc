// Box::RunCode through the BoxEnv seam: the agent's own code in a child of the test, so the
// kernel runs on the host (needs the host's python3 with IPython; skips without it). Checks
// what needs a short agent idle deadline: an idle kernel, and a silent cell, are never ended
// by it (the host asks the agent whether the kernel still runs).
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "seam_fixture.h"
#include "kernel_test_util.h"

namespace codebox::testing {
namespace {

bool HostHasIPython() {
  return std::system("env -i PATH=/usr/local/bin:/usr/bin:/bin python3 -c 'import IPython' "
                     ">/dev/null 2>&1") == 0;
}

TEST_F(SeamTest, AnIdleKernelOutlivesTheIdleDeadline) {
  if (!HostHasIPython()) GTEST_SKIP() << "the host's python3 has no IPython (python3-ipython)";
  env_.idle = 300ms;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  Execution first = RunOk(*box, "x = 41");
  ASSERT_FALSE(first.error) << first.error->value;
  std::this_thread::sleep_for(1500ms);  // five idle periods without a frame
  Execution silent = RunOk(*box, "import time\ntime.sleep(1.2)\nx + 1");
  EXPECT_FALSE(silent.kernel_restarted) << (silent.error ? silent.error->value : "");
  EXPECT_EQ(silent.text(), "42");
  EXPECT_EQ(silent.execution_count, 2);
}

}  // namespace
}  // namespace codebox::testing
