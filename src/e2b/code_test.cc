#include "e2b/code.h"

#include <gtest/gtest.h>

#include "base/json.h"

namespace codebox::e2b {
namespace {

using nlohmann::json;

json LineJson(const std::string& line) {
  EXPECT_TRUE(!line.empty() && line.back() == '\n' && line.find('\n') == line.size() - 1)
      << "one whole line: " << line;
  return base::ParseJsonOrDiscarded(line);
}

TEST(CodeMessagesTest, ExecuteRequests) {
  auto r = ExecuteRequestFromJson(json{{"code", "1+1"}, {"env_vars", {{"Z", "1"}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->code, "1+1");
  EXPECT_EQ(r->env_vars.at("Z"), "1");
  EXPECT_EQ(ExecuteRequestFromJson(json{{"code", ""}, {"language", " JS "}})->language,
            "javascript");
  EXPECT_FALSE(
      ExecuteRequestFromJson(json{{"code", "1"}, {"context_id", "c"}, {"language", "python"}}).ok())
      << "a context and a language together";
  EXPECT_FALSE(ExecuteRequestFromJson(json{{"code", 1}}).ok());
  EXPECT_FALSE(ExecuteRequestFromJson(json{{"nocode", "1"}}).ok());
  EXPECT_FALSE(ExecuteRequestFromJson(json{{"code", "1"}, {"env_vars", {{"A", 1}}}}).ok());
  EXPECT_FALSE(
      ExecuteRequestFromJson(json{{"code", "1"}, {"context_id", std::string(200, 'c')}}).ok());
  EXPECT_FALSE(ExecuteRequestFromJson(json::array()).ok());
  auto c = ContextRequestFromJson(json::object());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->language, "python");
  EXPECT_EQ(c->cwd, "");
  EXPECT_FALSE(ContextRequestFromJson(json{{"cwd", std::string("a\0b", 3)}}).ok());
}

TEST(CodeMessagesTest, LinesAsTheSdkReadsThem) {
  json out = LineJson(StdoutLine("hi\n", "2026-12-07T00:00:00.000Z"));
  EXPECT_EQ(out["type"], "stdout");
  EXPECT_EQ(out["text"], "hi\n");
  CellResult r;
  r.is_main_result = true;
  r.data = {{"text/plain", "'abc'"},
            {"text/html", "<b>x</b>"},
            {"application/json", "{\"a\": 1}"},
            {"image/png", "iVBORw0KGgo="}};
  json result = LineJson(ResultLine(r));
  EXPECT_EQ(result["type"], "result");
  EXPECT_EQ(result["text"], "abc") << "a str's quotes go, as E2B's server does";
  EXPECT_EQ(result["html"], "<b>x</b>");
  EXPECT_EQ(result["json"], (json{{"a", 1}})) << "json is an object";
  EXPECT_EQ(result["png"], "iVBORw0KGgo=");
  EXPECT_EQ(result["is_main_result"], true);
  EXPECT_EQ(result.size(), 6u) << "no keys the SDK would take for extra formats: " << result;
  CellResult figure;
  figure.data = {{"image/png", "iVBORw0KGgo="},
                 {kChartMime, "{\"type\": \"line\", \"elements\": []}"}};
  EXPECT_EQ(LineJson(ResultLine(figure))["chart"]["type"], "line") << "the chart is an object";
  json error = LineJson(ErrorLine(
      {.name = "ZeroDivisionError", .value = "division by zero", .traceback = "Traceback\nline"}));
  EXPECT_EQ(error["name"], "ZeroDivisionError");
  EXPECT_EQ(LineJson(ExecutionCountLine(3))["execution_count"], 3);
  EXPECT_EQ(LineJson(EndOfExecutionLine())["type"], "end_of_execution");
  // Bytes that are not UTF-8 (what a box may print) still make one valid line.
  EXPECT_FALSE(LineJson(StdoutLine("\xff\xfe\n", "t")).is_discarded());
}

}  // namespace
}  // namespace codebox::e2b
