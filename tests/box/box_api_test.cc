// The Box API end to end on the jail driver: results, streaming, files, concurrency, errors.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "base/io.h"
#include "box/spares.h"
#include "testing/box_test_util.h"

namespace codebox {
namespace {

using testing::TestBoxOptions;

TEST(BoxApiTest, RunReturnsStdoutAndSaysWhichDriverRan) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto out = box->Run("print(1 + 1)");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "2\n");
  EXPECT_EQ(box->info().driver, "jail");
  auto r = box->RunPython("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->driver, "jail");
  EXPECT_FALSE(r->timed_out);
}

TEST(BoxApiTest, StatePersistsBetweenExecsInOneBox) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  ASSERT_TRUE(box->Run("open('state.txt', 'w').write('kept')").ok());
  auto out = box->Run("print(open('/work/state.txt').read())");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "kept\n");
}

TEST(BoxApiTest, ExecWithStdinEnvCwdAndStreaming) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  std::string streamed;
  ExecOptions opts;
  opts.stdin_data = "from stdin";
  opts.env = {{"GREETING", "hi"}};
  opts.cwd = "/tmp";
  opts.on_stdout = [&](std::string_view d) { streamed.append(d); };
  auto r = box->Exec({"sh", "-c", "cat; echo \" $GREETING $(pwd)\""}, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "from stdin hi /tmp\n");
  EXPECT_EQ(streamed, r->stdout_data);
}

TEST(BoxApiTest, MissingCommandIs127WithAMessage) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto r = box->Exec({"no-such-program"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_NE(r->stderr_data.find("no-such-program"), std::string::npos);
}

TEST(BoxApiTest, CopiesFilesAndDirectoriesInAndOut) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  std::string dir = ::testing::TempDir() + "/copy_in_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  ASSERT_TRUE(base::WriteFile(dir + "/a.csv", "x,y\n1,2\n").ok());
  ASSERT_TRUE(base::WriteFile(dir + "/sub/b.bin", std::string("\0\1\2", 3)).ok());
  Status copied = box->CopyIn(dir, "/data/in");
  ASSERT_TRUE(copied.ok()) << copied.ToString();
  auto r = box->Run(
      "import os, pathlib\n"
      "print(open('/data/in/a.csv').read().splitlines()[1])\n"
      "os.makedirs('out/deep', exist_ok=True)\n"
      "pathlib.Path('out/deep/result.txt').write_text('answer=' + "
      "str(len(open('/data/in/sub/b.bin','rb').read())))\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "1,2\n");
  std::string out = dir + "_out";
  ASSERT_TRUE(box->CopyOut("out", out).ok());
  auto back = base::ReadFile(out + "/deep/result.txt");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, "answer=3");
  Status missing = box->CopyOut("/no/such/file", out + "/x");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/no/such/file"), std::string::npos);
  Status host_missing = box->CopyIn("/no/such/host/file", "/data/x");
  EXPECT_FALSE(host_missing.ok());
}

TEST(BoxApiTest, ConcurrentExecsOnOneBox) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] {
      auto r = box->Run("import time; time.sleep(0.2); print(" + std::to_string(i) + ")");
      if (r.ok() && *r == std::to_string(i) + "\n") ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 10);
}

TEST(BoxApiTest, ManyBoxesAtOnce) {
  std::atomic<int> good{0};
  std::atomic<int> skipped{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto box = Box::Create(TestBoxOptions());
      if (!box.ok()) {
        StatusCode code = box.status().code();
        if (code == StatusCode::kNotFound || code == StatusCode::kUnavailable) ++skipped;
        return;  // any other failure leaves `good` short and fails below
      }
      auto r = (*box)->Run("print('ok')");
      if (r.ok() && *r == "ok\n") ++good;
    });
  }
  for (auto& t : threads) t.join();
  if (skipped == 8) GTEST_SKIP() << "no box can be created here";
  EXPECT_EQ(good.load(), 8);
}

TEST(BoxApiTest, PrestartedBoxesAreFreshAndLeaveNothingBehind) {
  int before = testing::CountOurBoxProcesses();
  BoxOptions options = TestBoxOptions();
  options.prestart = true;
  for (int i = 0; i < 3; ++i) {
    CODEBOX_MAKE_BOX_OR_SKIP(box, options);
    // Each box must be new: nothing an earlier one wrote is there.
    auto r = box->Exec({"sh", "-c", "ls /work /tmp; touch /work/was-here /tmp/was-here"});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data.find("was-here"), std::string::npos) << "box " << i << " reused";
    EXPECT_EQ(*box->Run("print(6 * 7)"), "42\n");
  }
  EXPECT_GT(testing::CountOurBoxProcesses(), before) << "a spare should be waiting";
  box::DestroyPrestartedJails();
  EXPECT_EQ(testing::CountOurBoxProcesses(), before);
}

TEST(BoxApiTest, UseAfterDestroyIsAClearError) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  ASSERT_TRUE(box->Destroy().ok());
  auto r = box->Run("print(1)");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("destroyed"), std::string::npos);
  EXPECT_TRUE(box->Destroy().ok());  // idempotent
}

TEST(BoxApiTest, MissingImageSaysHowToBuildIt) {
  BoxOptions options = TestBoxOptions();
  options.home = ::testing::TempDir() + "/empty_codebox_home";  // a store with no images
  auto box = Box::Create(options);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kNotFound);
  EXPECT_NE(box.status().message().find("codebox image build python"), std::string::npos)
      << box.status().message();
}

TEST(BoxApiTest, UnknownImageListsTheRecipes) {
  BoxOptions options = TestBoxOptions();
  options.image = "no-such-image";
  auto box = Box::Create(options);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kNotFound);
  EXPECT_NE(box.status().message().find("python"), std::string::npos) << box.status().message();
}

TEST(BoxApiTest, BadOptionsAreRejectedBeforeAnythingStarts) {
  BoxOptions options = TestBoxOptions();
  options.memory_mib = 1;
  auto box = Box::Create(options);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kInvalidArgument);
}

TEST(BoxApiTest, BoxLifetimeEndsEverything) {
  BoxOptions options = TestBoxOptions();
  options.box_timeout = std::chrono::milliseconds(1500);
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  auto start = std::chrono::steady_clock::now();
  auto r = box->Exec({"sleep", "30"});
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(4));
  if (r.ok()) {
    EXPECT_TRUE(r->timed_out);
  }
  auto after = box->Run("print(1)");
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kDeadlineExceeded);
}

// A jail's usage is its cgroup's: the CPU its programs burned (also ones that exited), the
// memory charged to it, and its scratch files (tmpfs, so memory too).
TEST(BoxApiTest, AJailsUsageCountsItsCpuMemoryAndScratchFiles) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto before = box->Usage();
  if (!before.ok() && before.status().code() == StatusCode::kUnavailable) {
    GTEST_SKIP() << before.status().ToString();
  }
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  auto busy = box->Exec({"sh", "-c",
                         "head -c 3145728 /dev/zero > /tmp/usage.bin; python3 -c 'import time\n"
                         "t = time.time()\nwhile time.time() - t < 0.6: pass'"});
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  ASSERT_EQ(busy->exit_code, 0) << busy->stderr_data;
  auto after = box->Usage();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GE(after->cpu_time - before->cpu_time, std::chrono::milliseconds(400));
  EXPECT_GE(after->disk_bytes, 3u << 20);
  EXPECT_GE(after->memory_bytes, after->disk_bytes);
  ASSERT_TRUE(box->Destroy().ok());
  EXPECT_FALSE(box->Usage().ok()) << "a destroyed box measures nothing";
}

}  // namespace
}  // namespace codebox
