// Box::RunCode: the code-interpreter session in a jail box with the `python` image (IPython);
// the chart and DataFrame tests need `python-data`. Skips name what is missing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/box/box_test_util.h"
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

}  // namespace
}  // namespace codebox
