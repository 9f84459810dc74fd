// Box::RunCode: the code-interpreter session in a jail box with the `python` image (IPython);
// the chart and DataFrame tests need `python-data`. Skips name what is missing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/box_test_util.h"
#include "tests/box/kernel_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::RunOk;

class KernelTest : public ::testing::Test {
 protected:
  BoxOptions Options(const std::string& image = "python") {
    BoxOptions options = testing::TestBoxOptions();
    options.image = image;
    return options;
  }
};

TEST_F(KernelTest, StatePersistsAcrossCells) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  Execution first = RunOk(*box, "x = 41\nimport math");
  EXPECT_FALSE(first.error) << first.error->value;
  EXPECT_EQ(first.execution_count, 1);
  EXPECT_EQ(first.driver, "jail");
  Execution second = RunOk(*box, "x + 1");
  EXPECT_EQ(second.text(), "42");
  EXPECT_EQ(second.execution_count, 2);
  EXPECT_EQ(RunOk(*box, "round(math.pi, 2)").text(), "3.14");
}

TEST_F(KernelTest, LastExpressionIsTheMainResult) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  Execution e = RunOk(*box, "1+1");
  ASSERT_EQ(e.results.size(), 1u);
  EXPECT_TRUE(e.results[0].is_main_result);
  EXPECT_EQ(e.text(), "2");
  // A statement, or a trailing semicolon, has no result.
  EXPECT_TRUE(RunOk(*box, "y = 3").results.empty());
  EXPECT_TRUE(RunOk(*box, "y;").results.empty());
  // display() gives results that are not the main one; rich reprs come as their MIME types.
  Execution d = RunOk(*box,
                      "from IPython.display import display, HTML, Markdown\n"
                      "display(HTML('<b>hi</b>'))\ndisplay(Markdown('# t'))\n{'a': [1, 2]}");
  ASSERT_EQ(d.results.size(), 3u);
  EXPECT_EQ(*d.results[0].Get("text/html"), "<b>hi</b>");
  EXPECT_FALSE(d.results[0].is_main_result);
  EXPECT_EQ(*d.results[1].Get("text/markdown"), "# t");
  EXPECT_TRUE(d.results[2].is_main_result);
  EXPECT_EQ(d.text(), "{'a': [1, 2]}");
}

// Named sessions (E2B's code contexts): each its own kernel and variables, started in its cwd,
// restarted and ended on their own, at most kMaxCodeSessions of them.
TEST_F(KernelTest, NamedSessionsKeepTheirOwnVariables) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 'own'");
  RunCodeOptions a;
  a.session = "a";
  a.cwd = "/tmp";
  auto in_a = box->RunCode("x = 'a'\nimport os\nos.getcwd()", a);
  ASSERT_TRUE(in_a.ok()) << in_a.status().ToString();
  EXPECT_EQ(in_a->text(), "'/tmp'");
  EXPECT_EQ(RunOk(*box, "x").text(), "'own'") << "a named session wrote the box's own variables";
  auto again = box->RunCode("x", a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->text(), "'a'");
  ASSERT_TRUE(box->RestartKernel("a").ok());
  auto fresh = box->RunCode("x", a);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(fresh->error.has_value());
  EXPECT_EQ(fresh->error->name, "NameError");
  EXPECT_EQ(box->RestartKernel("nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(box->InterruptCode("nope").code(), StatusCode::kNotFound);
  ASSERT_TRUE(box->EndCodeSession("a").ok());
  EXPECT_EQ(box->EndCodeSession("a").code(), StatusCode::kNotFound);
  EXPECT_FALSE(box->EndCodeSession("").ok()) << "the box's own session cannot end";
  for (size_t i = 0; i < kMaxCodeSessions; ++i) {
    RunCodeOptions o;
    o.session = "s" + std::to_string(i);
    ASSERT_TRUE(box->RunCode("1", o).ok()) << i;
  }
  RunCodeOptions one_more;
  one_more.session = "past";
  EXPECT_EQ(box->RunCode("1", one_more).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(KernelTest, ExceptionIsAResultAndTheNextCellWorks) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "z = 5");
  Execution e = RunOk(*box, "def f():\n    return 1/0\nprint('before')\nf()");
  ASSERT_TRUE(e.error.has_value());
  EXPECT_EQ(e.error->name, "ZeroDivisionError");
  EXPECT_EQ(e.error->value, "division by zero");
  EXPECT_NE(e.error->traceback.find("return 1/0"), std::string::npos) << e.error->traceback;
  EXPECT_EQ(e.error->traceback.find("\x1b["), std::string::npos) << "colour codes";
  EXPECT_EQ(testing::Joined(e.stdout_chunks), "before\n");
  EXPECT_FALSE(e.kernel_restarted);
  Execution syntax = RunOk(*box, "def (");
  ASSERT_TRUE(syntax.error.has_value());
  EXPECT_EQ(syntax.error->name, "SyntaxError");
  EXPECT_EQ(RunOk(*box, "z * 2").text(), "10");
}

TEST_F(KernelTest, IPythonsOwnFeaturesWork) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  // Shell escapes write through the captured fds (no pty: no "\r").
  Execution bang = RunOk(*box, "!echo from-shell; echo to-err >&2");
  EXPECT_EQ(testing::Joined(bang.stdout_chunks), "from-shell\n");
  EXPECT_EQ(testing::Joined(bang.stderr_chunks), "to-err\n");
  EXPECT_EQ(RunOk(*box, "files = !echo a; echo b\nfiles").text(), "['a', 'b']");
  Execution magic = RunOk(*box, "%timeit -n1 -r1 sum(range(10))");
  EXPECT_NE(testing::Joined(magic.stdout_chunks).find("per loop"), std::string::npos);
  // The package is complete for cells that ask for it (the kernel loads it lazily).
  Execution pkg =
      RunOk(*box, "import IPython\nIPython.__version__ >= '8', callable(IPython.embed)");
  EXPECT_EQ(pkg.text(), "(True, True)") << (pkg.error ? pkg.error->traceback : "");
  EXPECT_EQ(RunOk(*box, "get_ipython().execution_count").text(), "5");
  EXPECT_EQ(RunOk(*box, "Out[4]").text(), "(True, True)");
}

TEST_F(KernelTest, StreamsOutputWhileTheCellRuns) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  std::mutex mu;
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> seen;
  RunCodeOptions options;
  options.on_stdout = [&](std::string_view s) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(std::string(s), std::chrono::steady_clock::now());
  };
  std::string err;
  options.on_stderr = [&](std::string_view s) { err += s; };
  int results = 0;
  options.on_result = [&](const CellResult&) { ++results; };
  auto e = box->RunCode(
      "import sys, time, subprocess\nprint('first')\ntime.sleep(1.5)\n"
      "subprocess.run(['sh', '-c', 'echo from-child; echo child-err >&2'])\n"
      "print('oops', file=sys.stderr)\n'end'",
      options);
  auto returned = std::chrono::steady_clock::now();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0].first, "first\n");
  EXPECT_GE(returned - seen[0].second, 1s) << "the first chunk came only at the cell's end";
  EXPECT_EQ(testing::Joined(e->stdout_chunks), "first\nfrom-child\n");
  EXPECT_EQ(err, "child-err\noops\n");
  EXPECT_EQ(testing::Joined(e->stderr_chunks), err);
  EXPECT_EQ(results, 1);
  EXPECT_EQ(e->text(), "'end'");
}

TEST_F(KernelTest, ExecsRunWhileACellRunsAndTheWorkdirStaysClean) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  std::thread cell(
      [&] { RunOk(*box, "import time\nfor i in range(20):\n    print(i)\n    time.sleep(0.1)"); });
  std::this_thread::sleep_for(300ms);
  auto start = std::chrono::steady_clock::now();
  auto r = box->Exec({"sh", "-c", "ls -A ."});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "the exec waited for the cell";
  cell.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "") << "the kernel wrote to the workdir";
  RunOk(*box, "def f(): pass\nf()");
  auto after = box->Exec({"sh", "-c", "ls -A ."});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->stdout_data, "");
}

TEST_F(KernelTest, TwentySessionsInParallelKeepTheirOwnState) {
  constexpr int kBoxes = 20;
  std::vector<std::thread> threads;
  std::vector<std::string> answers(kBoxes), skips(kBoxes);
  for (int i = 0; i < kBoxes; ++i) {
    threads.emplace_back([&, i] {
      BoxOptions options = Options();
      options.exec_timeout = 120s;  // twenty IPython starts share the cores
      auto box = testing::MakeBoxOrSkipReason(options, &skips[i]);
      if (!box) return;
      RunOk(*box, "n = " + std::to_string(i));
      answers[i] = RunOk(*box, "n * 10").text();
    });
  }
  for (auto& t : threads) t.join();
  if (!skips[0].empty()) GTEST_SKIP() << skips[0];
  for (int i = 0; i < kBoxes; ++i) EXPECT_EQ(answers[i], std::to_string(i * 10)) << "box " << i;
}

}  // namespace
}  // namespace codebox
