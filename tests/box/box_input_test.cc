// What the host sends into a box: programs, arguments, environment and timeouts too large,
// malformed or ambiguous for the kernel or the protocol get a clear error before anything is
// sent, and the box lives on; a program too long to be an argument still runs.
#include <string>

#include "testing/box_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::TestBoxOptions;

TEST(BoxInputTest, HundredMegabyteProgramRuns) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  // 100 MB of source: far past one argument's 128 KiB and the protocol's 1 MiB frame.
  std::string code = "import sys\nx = 20\n";
  std::string filler = "# " + std::string(1000, 'f') + "\n";
  while (code.size() < (100u << 20)) code += filler;
  code += "print(x + 22, sys.argv[0], __name__)\nraise SystemExit(3)\n";
  ExecOptions opts;
  opts.timeout = 60s;
  auto r = box->RunPython(code, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "42 -c __main__\n") << r->stderr_data;
  EXPECT_EQ(r->exit_code, 3);
  // The program's file is gone before it runs: it leaves nothing on the box's disk.
  auto ls = box->Exec({"sh", "-c", "ls -a /tmp | grep -c codebox-program || true"});
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(ls->stdout_data, "0\n");
}

TEST(BoxInputTest, LongProgramKeepsTracebacksAndExitCodes) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  std::string code = "y = 1\n" + std::string(200 << 10, '\n') + "1 / 0\n";
  auto r = box->RunPython(code);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->stderr_data.find("File \"<string>\", line 204802"), std::string::npos)
      << r->stderr_data.substr(0, 500);
  EXPECT_NE(r->stderr_data.find("ZeroDivisionError"), std::string::npos);
}

TEST(BoxInputTest, NulBytesInCodeOrArgvAreAClearError) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto short_code = box->RunPython(std::string("print(1)\0print(2)", 17));
  ASSERT_FALSE(short_code.ok());
  EXPECT_EQ(short_code.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_code.status().message().find("NUL byte at offset 8"), std::string::npos)
      << short_code.status().message();
  std::string long_code = std::string(100 << 10, '#') + std::string("\0", 1) + "\nprint(1)";
  auto long_r = box->RunPython(long_code);
  ASSERT_FALSE(long_r.ok());
  EXPECT_NE(long_r.status().message().find("NUL byte"), std::string::npos);
  auto arg = box->Exec({"echo", std::string("a\0b", 3)});
  ASSERT_FALSE(arg.ok());
  EXPECT_EQ(arg.status().code(), StatusCode::kInvalidArgument);
  // The box is unharmed.
  EXPECT_EQ(*box->Run("print('alive')"), "alive\n");
}

TEST(BoxInputTest, OversizedArgumentsAndEnvironmentAreRefusedBeforeSending) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto big_arg = box->Exec({"echo", std::string(200 << 10, 'a')});
  ASSERT_FALSE(big_arg.ok());
  EXPECT_EQ(big_arg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big_arg.status().message().find("per argument"), std::string::npos);
  ExecOptions env;
  env.env["BIG"] = std::string(2 << 20, 'v');
  auto big_env = box->Exec({"true"}, env);
  ASSERT_FALSE(big_env.ok());
  EXPECT_EQ(big_env.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big_env.status().message().find("BIG"), std::string::npos);
  EXPECT_EQ(*box->Run("print('alive')"), "alive\n");
}

TEST(BoxInputTest, TwoMegabyteEnvironmentFailsBeforeAnyBoxStarts) {
  BoxOptions options = TestBoxOptions();
  options.env["SECRET_BLOB"] = std::string(2 << 20, 'x');
  auto box = Box::Create(options);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(box.status().message().find("SECRET_BLOB"), std::string::npos)
      << box.status().message();
}

TEST(BoxInputTest, ZeroTimeoutIsAnErrorAndNoLimitIsExplicit) {
  BoxOptions zero = TestBoxOptions();
  zero.exec_timeout = 0ms;
  auto refused = Box::Create(zero);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("at least 1 ms"), std::string::npos);

  BoxOptions options = TestBoxOptions();
  options.exec_timeout = kNoTimeout;
  options.box_timeout = kNoTimeout;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  auto r = box->RunPython("import time; time.sleep(0.2); print('done')");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "done\n");
  EXPECT_FALSE(r->timed_out);
  ExecOptions per_call;
  per_call.timeout = 0ms;
  auto bad = box->RunPython("print(1)", per_call);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  per_call.timeout = 300ms;
  auto timed = box->RunPython("import time; time.sleep(5)", per_call);
  ASSERT_TRUE(timed.ok());
  EXPECT_TRUE(timed->timed_out);
}

}  // namespace
}  // namespace codebox
